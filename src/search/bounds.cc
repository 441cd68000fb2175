// The makespan lower bound of search() (see search.h; the proof is in
// docs/search.md, "The lower bound").
#include <algorithm>
#include <cmath>
#include <limits>

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
      chain_term(profile, pp_degree, transfer_time),
      memory_term(profile, pp_degree, num_microbatches, transfer_time, memory_limit)};
  const Term* best = &terms[0];
  for (const Term& t : terms)
    if (t.value > best->value + kEps) best = &t;
  if (reason) *reason = best->why;
  return best->value;
}

}  // namespace pipeplan
