// The makespan lower bound of search() (see search.h; the proof is in
// docs/search.md, "The lower bound").
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "ir/numbers.h"
#include "pipeplan/search.h"
#include "search/tuning.h"

namespace pipeplan {
namespace {

using detail::kEps;

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
// at most cap(T - S_k) layers: as many of the cheapest layers as fit.
struct Packing {
  std::vector<double> cheapest;  // cheapest[n]: the n cheapest layers' m(F + B)
  std::vector<double> start;     // S_k
  Packing(const LayerProfile& profile, std::size_t p, double m, double transfer)
      : cheapest(profile.size() + 1, 0.0), start(p, 0.0) {
    std::vector<double> load;
    for (const Layer& l : profile.layers) load.push_back(m * (l.f + l.b));
    std::sort(load.begin(), load.end());
    for (std::size_t n = 0; n < load.size(); ++n) cheapest[n + 1] = cheapest[n] + load[n];
    for (std::size_t k = 1; k < p; ++k)
      start[k] = start[k - 1] + profile.layers[k - 1].f + transfer;
  }
  // How many layers the k-th rank to start can hold by T.
  std::size_t cap(std::size_t k, double T) const {
    const double room = T - start[k] + kEps * std::max(1.0, std::abs(T));
    return static_cast<std::size_t>(std::upper_bound(cheapest.begin() + 1, cheapest.end(), room) -
                                    (cheapest.begin() + 1));
  }
};

// The least T in [lo, hi] with fits(T) (monotone), by bisection, snapped
// to need(T): the makespan of the layer counts fits(T) allows (a sum of the
// costs, so 25.5 rather than 25.49999998 when the bisection stops within
// the tolerance below it). Infinity when not even hi fits.
template <class Fits, class Need>
double least_time(double lo, double hi, const Fits& fits, const Need& need) {
  if (!fits(hi)) return std::numeric_limits<double>::infinity();
  for (int it = 0; it < 200 && hi - lo > kEps * std::max(1.0, hi); ++it) {
    const double mid = 0.5 * (lo + hi);
    (fits(mid) ? hi : lo) = mid;
  }
  const double exact = need(hi);
  return exact <= hi + 2 * kEps * std::max(1.0, hi) ? exact : hi;
}

// Every rank holds a layer and together they hold all L: the least T with
// cap(T - S_k) >= 1 for every k and the caps summing to L or more.
Term layer_term(const LayerProfile& profile, int p, double m, double transfer) {
  const std::size_t L = profile.size();
  const auto P = static_cast<std::size_t>(p);
  if (p < 1 || L < P) return {0.0, ""};
  const Packing pack(profile, P, m, transfer);
  const auto fits = [&](double T) {
    std::size_t total = 0;
    for (std::size_t k = 0; k < P; ++k) {
      const std::size_t c = pack.cap(k, T);
      if (c == 0) return false;
      total += c;
    }
    return total >= L;
  };
  const auto need = [&](double T) {
    double v = 0;
    for (std::size_t k = 0; k < P; ++k)
      v = std::max(v, pack.start[k] + pack.cheapest[pack.cap(k, T)]);
    return v;
  };
  const double value =
      least_time(pack.start[P - 1], pack.start[P - 1] + pack.cheapest[L], fits, need);
  if (!std::isfinite(value)) return {0.0, ""};
  return {value,
          "whole layers: the k-th rank to start waits the first k layers' F and k transfers, "
          "then does m x (F + B) of each layer it holds, and holds at least one = " +
              detail::format_number(value)};
}

// How much forward work a rank can do while holding at most `budget` of
// activations: budget x the largest F per unit of activation among layers
// 0..L-p (the layers the drain's rank R may hold; a stage's ratio is at most
// its layers' largest). Infinite when no budget is given, when a microbatch
// may leave the device (offload), when one of those layers holds nothing, or
// when a recompute may cost less than the forward it replaces.
double forward_room(const LayerProfile& profile, std::size_t P, double budget,
                    BoundMemoryActions actions) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  if (!std::isfinite(budget) || actions.offload) return kNone;
  double ratio = 0;
  for (std::size_t l = 0; l + P <= profile.size(); ++l) {
    const Layer& layer = profile.layers[l];
    if (layer.activation <= 0 || (actions.recompute && layer.recompute_time() < layer.f))
      return kNone;
    ratio = std::max(ratio, layer.f / layer.activation);
  }
  return budget * ratio;
}

// The drain: take the rank R whose highest layer λ is the lowest of the
// ranks' highest layers (at most layer L - p, as they are p distinct layers).
// Its first backward needs a microbatch's F through every layer and its I
// back through every layer above λ, across the p - 1 other ranks both ways,
// and its F path to λ enters each other rank holding a layer at or below λ;
// then all of R's m x B still runs. Until then R can only run forwards, and
// every forward it started is held at once when that backward starts, so
// within the budget it did at most forward_room() of its m x F: the rest runs
// after it too. With R holding n layers (the n cheapest B and the n cheapest
// F of layers 0..L-p at least) and the others the other L - n as whole
// layers after their starts: the least over n of the larger of the two.
Term drain_term(const LayerProfile& profile, int p, double m, double transfer, double budget,
                BoundMemoryActions actions) {
  const std::size_t L = profile.size();
  const auto P = static_cast<std::size_t>(p);
  if (p < 2 || L < P) return {0.0, ""};
  double base = 2.0 * (p - 1) * transfer;
  for (const Layer& l : profile.layers) base += l.f;
  std::vector<double> above(L, 0.0);  // above[λ]: the I of the layers above λ
  for (std::size_t l = L - 1; l-- > 0;)
    above[l] = above[l + 1] + std::max(0.0, profile.layers[l + 1].i());
  std::vector<double> back, fwd;  // m x B and m x F of the layers R may hold, cheapest first
  for (std::size_t l = 0; l + P <= L; ++l) {
    back.push_back(m * profile.layers[l].b);
    fwd.push_back(m * profile.layers[l].f);
  }
  std::sort(back.begin(), back.end());
  std::sort(fwd.begin(), fwd.end());
  const double room = forward_room(profile, P, budget, actions);
  const Packing pack(profile, P, m, transfer);
  // R, the r-th to start, holds n layers; every other rank one or more.
  std::vector<std::size_t> caps(P), spare(P);
  const auto placement = [&](double T, std::size_t n) -> std::ptrdiff_t {
    std::size_t total = 0, ones = 0;
    for (std::size_t k = 0; k < P; ++k) {
      caps[k] = pack.cap(k, T);
      total += caps[k];
      ones += caps[k] >= 1;
    }
    for (std::size_t r = P; r-- > 0;)
      if (caps[r] >= n && ones + (caps[r] == 0) >= P && total - caps[r] >= L - n)
        return static_cast<std::ptrdiff_t>(r);
    return -1;
  };
  // The least I above λ plus transfers into the other ranks holding one of
  // the λ + 1 - n layers at or below λ that R does not: each holds its own
  // top layer above λ too, so it takes at most cap - 1 of them (the caps
  // of placement()'s T; the p - 1 largest, whichever rank R is).
  const auto detour = [&](std::size_t n) {
    spare.assign(P, 0);
    for (std::size_t k = 0; k < P; ++k) spare[k] = caps[k] > 0 ? caps[k] - 1 : 0;
    std::sort(spare.begin(), spare.end(), std::greater<>());
    for (std::size_t k = 1; k < P; ++k) spare[k] += spare[k - 1];  // spare[k]: the k + 1 largest
    double least = std::numeric_limits<double>::infinity();
    for (std::size_t top = L - P + 1; top-- > n - 1 && above[top] < least - kEps;) {
      const std::size_t below = top + 1 - n;
      const auto ranks = static_cast<std::size_t>(
          below == 0 ? 0
                     : std::lower_bound(spare.begin(), spare.begin() + (P - 1), below) -
                           spare.begin() + 1);
      if (ranks < P) least = std::min(least, above[top] + static_cast<double>(ranks) * transfer);
    }
    return least;
  };
  double best = std::numeric_limits<double>::infinity(), work = 0, forwards = 0;
  std::size_t best_n = 0;
  bool late_forwards = false;  // whether the best n has forwards after the first backward
  for (std::size_t n = 1; n <= back.size(); ++n) {
    work += back[n - 1];
    forwards += fwd[n - 1];
    const double late = forwards > room ? forwards - room : 0.0;
    const double least_drain = base + above[L - P] + work + late;
    if (least_drain >= best - kEps) break;  // the drain only grows with n: no n beyond wins
    const auto drain = [&] { return base + detour(n) + work + late; };  // placement()'s caps
    const auto fits = [&](double T) {
      return placement(T, n) >= 0 && drain() <= T + kEps * std::max(1.0, T);
    };
    const auto need = [&](double T) {
      const auto r = static_cast<std::size_t>(placement(T, n));
      double v = std::max(pack.start[r] + pack.cheapest[n], drain());
      for (std::size_t k = 0; k < P; ++k)
        if (k != r) v = std::max(v, pack.start[k] + pack.cheapest[caps[k]]);
      return v;
    };
    const double lo = std::max(pack.start[P - 1], least_drain);
    const double value =
        least_time(lo, lo + pack.cheapest[L] + above[0] + (p - 1) * transfer, fits, need);
    if (value < best) {
      best = value, best_n = n;
      late_forwards =
          late > 0 && placement(value, n) >= 0 && drain() >= value - kEps * std::max(1.0, value);
    }
  }
  if (!std::isfinite(best)) return {0.0, ""};
  return {
      best,
      "drain: the rank with the lowest top layer waits a microbatch's F through every layer "
      "and I back through the layers above it (2(p-1) transfers and one into each other rank "
      "holding a lower layer), then does m x B of its " +
          std::to_string(best_n) + " layer(s)" +
          (late_forwards ? " and the forwards the memory budget kept from running before" : "") +
          ", the others whole layers after their starts = " + detail::format_number(best)};
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
// of the microbatches run their round trips one after another. A microbatch
// whose first stage recomputes holds at least the stage's input for as long
// (then K_j counts stays of min(A_j, input)); one that may be offloaded can
// leave the device between its F and its backward, so the term is left out.
Term memory_term(const LayerProfile& profile, int p, int m, double transfer, double budget,
                 BoundMemoryActions actions) {
  const std::size_t L = profile.size();
  if (!std::isfinite(budget) || L == 0 || actions.offload) return {0.0, ""};
  const double input = profile.layers.front().input_size();
  double rest = 0;  // F + I of the layers after the first stage
  for (const Layer& l : profile.layers) rest += l.f + l.i();
  double best = std::numeric_limits<double>::infinity(), head = 0, back = 0, held = 0;
  std::size_t best_j = 0;
  for (std::size_t j = 1; j + static_cast<std::size_t>(p - 1) <= L; ++j) {
    const Layer& l = profile.layers[j - 1];
    head += l.f, back += l.b, held += l.activation, rest -= l.f + l.i();
    const double stay = actions.recompute ? std::min(held, input) : held;
    if (stay <= 0) return {0.0, ""};  // nothing held: no limit on microbatches in flight
    const double in_flight = std::floor(budget / stay + kEps);
    if (in_flight < 1) break;  // a first stage this long cannot fit: nor can longer ones
    const double trip = rest + back + 2.0 * (p - 1) * transfer;
    const double value = head + std::ceil(m / in_flight - kEps) * trip;
    if (value < best) best = value, best_j = j;
  }
  if (!std::isfinite(best)) return {0.0, ""};
  return {best, std::string("memory: the first stage's microbatches in flight within the budget, "
                            "each holding ") +
                    (actions.recompute ? "its activations or, recomputed, its input"
                                       : "its activations") +
                    " for a round trip (least over its first " + std::to_string(best_j) +
                    " layer(s)) = " + detail::format_number(best)};
}

}  // namespace

double makespan_lower_bound(const LayerProfile& profile, int pp_degree, int num_microbatches,
                            double transfer_time, std::string* reason, double memory_limit,
                            BoundMemoryActions actions) {
  const Term terms[] = {
      balance_term(profile, pp_degree, num_microbatches, transfer_time),
      layer_term(profile, pp_degree, num_microbatches, transfer_time),
      drain_term(profile, pp_degree, num_microbatches, transfer_time, memory_limit, actions),
      chain_term(profile, pp_degree, transfer_time),
      memory_term(profile, pp_degree, num_microbatches, transfer_time, memory_limit, actions)};
  const Term* best = &terms[0];
  for (const Term& t : terms)
    if (t.value > best->value + kEps) best = &t;
  if (reason) *reason = best->why;
  return best->value;
}

namespace {

// r (1 - q) + r2 q: a cost with quadratic part `quad` of `whole` at ratio r
// and squared ratio r2 (CostModel::square).
double grown(double whole, double quad, double r, double r2) {
  const double q = whole > 0 ? std::min(1.0, quad / whole) : 0.0;
  return whole * (r * (1.0 - q) + r2 * q);
}

// The transfer time of a microbatch at ratio r.
double transfer_at(const CostModel& c, double r) {
  return c.comm_latency + (c.comm_bandwidth > 0 && c.transfer_bytes > 0
                               ? c.transfer_bytes * r / c.comm_bandwidth
                               : 0.0);
}

// The layer as a microbatch of ratio r and squared ratio r2 costs it.
Layer at_ratio(const Layer& l, double r, double r2) {
  Layer x = l;
  x.f = grown(l.f, l.f_quad, r, r2);
  x.w = grown(l.w, l.w_quad, r, r2);
  x.b = grown(l.i(), l.i_quad(), r, r2) + x.w;
  x.activation = l.activation * r;
  x.input = l.input_size() * r;
  x.recompute = grown(l.recompute_time(), l.f_quad, r, r2);
  return x;
}

}  // namespace

double makespan_lower_bound(const LayerProfile& profile, int pp_degree, const CostModel& costs,
                            int num_microbatches, std::string* reason, double memory_limit,
                            BoundMemoryActions actions) {
  CostModel c = costs;
  if (profile.seq_len) c.restate_lengths(*profile.seq_len);
  if (!c.variable_lengths())
    return makespan_lower_bound(profile, pp_degree, num_microbatches, c.transfer_time(), reason,
                                memory_limit, actions);
  // Every cost grows with both ratios: the least of each over the
  // microbatches gives each microbatch's lower bounds, so the uniform bound
  // on them holds.
  const double shortest = *std::min_element(c.length_ratio.begin(), c.length_ratio.end());
  const double least_square = *std::min_element(c.square_ratio.begin(), c.square_ratio.end());
  LayerProfile low = profile;
  for (Layer& l : low.layers) l = at_ratio(l, shortest, least_square);
  std::string low_why;
  const double low_value = makespan_lower_bound(
      low, pp_degree, num_microbatches, transfer_at(c, shortest), &low_why, memory_limit, actions);
  // The busiest rank still does its share of the real work.
  double total = 0, heaviest = 0;
  for (const Layer& l : profile.layers) {
    double layer = 0;
    for (std::size_t k = 0; k < c.length_ratio.size(); ++k) {
      const Layer x = at_ratio(l, c.length_ratio[k], c.square_ratio[k]);
      layer += x.f + x.b;
    }
    total += layer;
    heaviest = std::max(heaviest, layer);
  }
  const double work = std::max(total / pp_degree, heaviest);
  // Every microbatch still crosses every layer and back: the costliest
  // chain of one.
  double chain = 0;
  for (std::size_t k = 0; k < c.length_ratio.size(); ++k) {
    double one = 2.0 * (pp_degree - 1) * transfer_at(c, c.length_ratio[k]);
    for (const Layer& l : profile.layers) {
      const Layer x = at_ratio(l, c.length_ratio[k], c.square_ratio[k]);
      one += x.f + x.i();
    }
    if (!profile.layers.empty())
      one += at_ratio(profile.layers.front(), c.length_ratio[k], c.square_ratio[k]).w;
    chain = std::max(chain, one);
  }
  if (chain > std::max(work, low_value) + kEps) {
    if (reason)
      *reason = "the costliest microbatch's F + I chain through every layer + first layer's W + "
                "2(p-1) transfers = " +
                detail::format_number(chain);
    return chain;
  }
  if (work > low_value + kEps) {
    if (reason)
      *reason =
          "busiest rank over the microbatches' lengths: max(total work / p, heaviest "
          "layer's work) = " +
          detail::format_number(work);
    return work;
  }
  if (reason) *reason = low_why + " (every microbatch at the shortest's costs)";
  return low_value;
}

}  // namespace pipeplan
