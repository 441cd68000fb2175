// The makespan lower bound of search() (see search.h; the proof is in
// docs/search.md, "The lower bound").
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ir/numbers.h"
#include "pipeplan/search.h"

namespace pipeplan {
namespace {

constexpr double kEps = 1e-9;

struct Term {
  double value = 0.0;
  std::string why;
};

// Busiest rank with the pipeline's fill: all the work is spread over p ranks,
// and the k-th rank to receive its first action (k = 1..p-1) waits at least
// the F of the first k layers and k transfers before it.
Term balance_term(const LayerProfile& profile, int p, double m, double transfer) {
  double total = 0, biggest = 0, fill = 0, prefix = 0;
  for (std::size_t l = 0; l < profile.size(); ++l) {
    const Layer& layer = profile.layers[l];
    total += layer.f + layer.b;
    biggest = std::max(biggest, layer.f + layer.b);
    if (static_cast<int>(l) < p - 1) {
      prefix += layer.f;
      fill += prefix + static_cast<double>(l + 1) * transfer;
    }
  }
  const double value = std::max((m * total + fill) / p, m * biggest);
  return {value,
          "busiest rank: max((m x total work + fill) / p, m x heaviest layer), the fill "
          "summing each later-reached rank's wait for the first layers' F and transfers = " +
              detail::format_number(value)};
}

// Whole layers with the fill: the k-th rank to start (k = 0..p-1) starts no
// earlier than S_k, the F of the first k layers and k transfers, and then
// does m(F + B) of each layer it holds, so a rank that starts at S_k holds
// at most cap(T - S_k) layers: as many of the cheapest layers as fit. Every
// rank holds one layer at least and they hold all L: the least T with
// sum_k cap(T - S_k) >= L (found by bisection, then snapped to the makespan
// of the layer counts it allows) is a lower bound.
Term layer_term(const LayerProfile& profile, int p, double m, double transfer) {
  const std::size_t L = profile.size();
  const auto P = static_cast<std::size_t>(p);
  if (p < 1 || L < P) return {0.0, ""};
  std::vector<double> load(L), start(P, 0.0);
  for (std::size_t l = 0; l < L; ++l) load[l] = m * (profile.layers[l].f + profile.layers[l].b);
  std::sort(load.begin(), load.end());
  std::vector<double> cheapest(L + 1, 0.0);  // the n cheapest layers' work
  for (std::size_t n = 0; n < L; ++n) cheapest[n + 1] = cheapest[n] + load[n];
  for (std::size_t k = 1; k < P; ++k) start[k] = start[k - 1] + profile.layers[k - 1].f + transfer;
  // Layers each rank can hold by T (0: some rank cannot hold one).
  std::vector<std::size_t> counts(P);
  const auto fits = [&](double T) {
    std::size_t total = 0;
    for (std::size_t k = 0; k < P; ++k) {
      const double room = T - start[k] + kEps * std::max(1.0, std::abs(T));
      counts[k] = static_cast<std::size_t>(
          std::upper_bound(cheapest.begin() + 1, cheapest.end(), room) - (cheapest.begin() + 1));
      if (counts[k] == 0) return false;
      total += counts[k];
    }
    return total >= L;
  };
  double lo = start[P - 1], hi = start[P - 1] + cheapest[L];
  if (!fits(hi)) return {0.0, ""};
  for (int it = 0; it < 200 && hi - lo > kEps * std::max(1.0, hi); ++it) {
    const double mid = 0.5 * (lo + hi);
    (fits(mid) ? hi : lo) = mid;
  }
  fits(hi);
  double value = 0;
  for (std::size_t k = 0; k < P; ++k) value = std::max(value, start[k] + cheapest[counts[k]]);
  return {value,
          "whole layers: the k-th rank to start waits the first k layers' F and k transfers, "
          "then does m x (F + B) of each layer it holds, and holds at least one = " +
              detail::format_number(value)};
}

// One microbatch's F + I chain through every layer, the first layer's W and
// the 2(p-1) rank changes it must make.
Term chain_term(const LayerProfile& profile, int p, double transfer) {
  double chain = 0;
  for (const Layer& l : profile.layers) chain += l.f + l.i();
  if (!profile.layers.empty()) chain += profile.layers.front().w;
  const double value = chain + 2.0 * (p - 1) * transfer;
  return {value,
          "one microbatch's F + I chain through every layer + first layer's W + 2(p-1) "
          "transfers = " +
              detail::format_number(value)};
}

// The memory budget on the rank holding the first stage (its first j layers,
// for the j that gives the least): a microbatch holds their activations from
// its F there until its backward there ends, at least a round trip R_j, and
// at most K_j = floor(budget / their activations) do at once, so some K_j-th
// of the microbatches run their round trips one after another.
Term memory_term(const LayerProfile& profile, int p, int m, double transfer, double budget) {
  const std::size_t L = profile.size();
  if (!std::isfinite(budget) || L == 0) return {0.0, ""};
  double rest = 0;  // F + I of the layers after the first stage
  for (const Layer& l : profile.layers) rest += l.f + l.i();
  double best = std::numeric_limits<double>::infinity(), head = 0, back = 0, held = 0;
  std::size_t best_j = 0;
  for (std::size_t j = 1; j + static_cast<std::size_t>(p - 1) <= L; ++j) {
    const Layer& l = profile.layers[j - 1];
    head += l.f, back += l.b, held += l.activation, rest -= l.f + l.i();
    if (held <= 0) return {0.0, ""};  // nothing held: no limit on microbatches in flight
    const double in_flight = std::floor(budget / held + kEps);
    if (in_flight < 1) break;  // a first stage this long cannot fit: nor can longer ones
    const double trip = rest + back + 2.0 * (p - 1) * transfer;
    const double value = head + std::ceil(m / in_flight - kEps) * trip;
    if (value < best) best = value, best_j = j;
  }
  if (!std::isfinite(best)) return {0.0, ""};
  return {best,
          "memory: the first stage's microbatches in flight within the budget, each "
          "held for a round trip (least over its first " +
              std::to_string(best_j) + " layer(s)) = " + detail::format_number(best)};
}

}  // namespace

double makespan_lower_bound(const LayerProfile& profile, int pp_degree, int num_microbatches,
                            double transfer_time, std::string* reason, double memory_limit) {
  const Term terms[] = {
      balance_term(profile, pp_degree, num_microbatches, transfer_time),
      layer_term(profile, pp_degree, num_microbatches, transfer_time),
      chain_term(profile, pp_degree, transfer_time),
      memory_term(profile, pp_degree, num_microbatches, transfer_time, memory_limit)};
  const Term* best = &terms[0];
  for (const Term& t : terms)
    if (t.value > best->value + kEps) best = &t;
  if (reason) *reason = best->why;
  return best->value;
}

}  // namespace pipeplan
