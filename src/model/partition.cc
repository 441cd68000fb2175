// Contiguous layer partitions and the stage cost model they induce.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

#include "model/split.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/profile.h"

namespace pipeplan {

double layer_work(const LayerProfile& profile, int begin, int end) {
  double sum = 0;
  for (int l = begin; l < end; ++l) {
    const Layer& x = profile.layers[static_cast<std::size_t>(l)];
    sum += x.f + x.b;
  }
  return sum;
}

Partition balanced_partition(const LayerProfile& profile, int num_stages) {
  return detail::split_min_max(profile, num_stages, detail::SplitBy::Work);
}

namespace detail {
namespace {

// Prefix sums of the per-layer cost; a stage of layers [b, e) costs
// P[e] - P[b]. Rounding keeps that difference monotone (more layers never
// cost less), which is all the greedy arguments below need.
class Prefix {
 public:
  Prefix(const LayerProfile& profile, SplitBy by) : p_(profile.size() + 1, 0.0) {
    for (std::size_t l = 0; l < profile.size(); ++l) {
      const Layer& x = profile.layers[l];
      p_[l + 1] = p_[l] + (by == SplitBy::Work ? x.f + x.b : x.activation);
    }
  }
  int layers() const { return static_cast<int>(p_.size()) - 1; }
  double cost(int b, int e) const {
    return p_[static_cast<std::size_t>(e)] - p_[static_cast<std::size_t>(b)];
  }
  double at(int e) const { return p_[static_cast<std::size_t>(e)]; }
  /// The largest e in [b, hi] with cost(b, e) <= m (galloping: time by log
  /// of the answer's distance).
  int reach(int b, int hi, double m) const {
    int good = b, step = 1;
    while (good + step <= hi && cost(b, good + step) <= m) good += step, step *= 2;
    for (step /= 2; step > 0; step /= 2)
      if (good + step <= hi && cost(b, good + step) <= m) good += step;
    return good;
  }
  /// The smallest b in [lo, e] with cost(b, e) <= m.
  int reach_back(int e, int lo, double m) const {
    int good = e, step = 1;
    while (good - step >= lo && cost(good - step, e) <= m) good -= step, step *= 2;
    for (step /= 2; step > 0; step /= 2)
      if (good - step >= lo && cost(good - step, e) <= m) good -= step;
    return good;
  }

 private:
  std::vector<double> p_;
};

// Whether `parts` stages, each at most m, can cover the layers: the greedy
// split (each stage as long as m allows) needs the fewest stages.
bool fits(const Prefix& p, int parts, double m) {
  const int n = p.layers();
  int b = 0;
  for (int k = 0; k < parts && b < n; ++k) {
    const int e = p.reach(b, n, m);
    if (e == b) return false;  // one layer alone exceeds m
    b = e;
  }
  return b == n;
}

// The least m for which fits(): the bottleneck, exactly (a bisection over
// the order of non-negative doubles, which their bit patterns share).
double bottleneck(const Prefix& p, int parts) {
  auto bits = [](double x) {
    std::uint64_t u = 0;
    std::memcpy(&u, &x, sizeof u);
    return u;
  };
  auto value = [](std::uint64_t u) {
    double x = 0;
    std::memcpy(&x, &u, sizeof x);
    return x;
  };
  std::uint64_t lo = 0, hi = bits(p.cost(0, p.layers()));  // hi fits: one stage holds all
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (fits(p, parts, value(mid))) hi = mid;
    else lo = mid + 1;
  }
  return value(lo);
}

// Where stage s (1-based) may end when every stage costs at most `limit`:
// [lo[s], hi[s]], both ascending in s. hi from the greedy split packing
// stages to the left, lo from the one packing them to the right; every
// stage keeps a layer.
struct Windows {
  std::vector<int> lo, hi;
};

Windows windows(const Prefix& p, int S, double limit) {
  const int n = p.layers();
  Windows w;
  w.lo.assign(static_cast<std::size_t>(S) + 1, 0);
  w.hi.assign(static_cast<std::size_t>(S) + 1, 0);
  int e = 0;
  for (int s = 1; s <= S; ++s) {
    e = p.reach(e, n, limit);
    w.hi[static_cast<std::size_t>(s)] = std::min(e, n - (S - s));
  }
  int b = n;
  w.lo[static_cast<std::size_t>(S)] = n;
  for (int s = S - 1; s >= 0; --s) {
    b = p.reach_back(b, 0, limit);
    w.lo[static_cast<std::size_t>(s)] = std::max(b, s);
  }
  w.hi[0] = 0;
  return w;
}

// Evening by share, for profiles whose slack makes the exact evening too
// costly: stage s ends where the prefix is nearest s/S of the total,
// within the bottleneck's limits. O(S log n).
Partition split_by_share(const Prefix& p, int S, double limit, const Windows& w) {
  const int n = p.layers();
  Partition counts(static_cast<std::size_t>(S));
  int b = 0;
  for (int s = 1; s <= S; ++s) {
    int e = n;
    if (s < S) {
      const int lo = std::max(w.lo[static_cast<std::size_t>(s)], b + 1);
      const int hi = std::min(w.hi[static_cast<std::size_t>(s)], p.reach(b, n, limit));
      const double target = p.at(n) * s / S;
      // First e in [lo, hi] with P[e] >= target, or its left neighbour if nearer.
      int x = lo, y = hi;
      while (x < y) {
        const int mid = x + (y - x) / 2;
        if (p.at(mid) < target) x = mid + 1;
        else y = mid;
      }
      e = x;
      if (e > lo && target - p.at(e - 1) <= p.at(e) - target) --e;
    }
    counts[static_cast<std::size_t>(s) - 1] = e - b;
    b = e;
  }
  return counts;
}

// Exact evening: among splits with every stage <= limit, the least sum of
// squared stage costs (ties: the earliest start of the later stage, as a
// left-to-right scan finds it). A DP over the windows only; per stage, the
// leftmost best start is monotone in the end (squared sums of a monotone
// prefix are Monge), so divide and conquer finds every row's in
// O(W log W). Nullopt when `expired` fires.
std::optional<Partition> split_least_squares(const Prefix& p, int S, double limit, const Windows& w,
                                             const std::function<bool()>& expired) {
  const double inf = std::numeric_limits<double>::infinity();
  // Row s holds e in [w.lo[s], w.hi[s]]: value and chosen start.
  std::vector<std::size_t> offset(static_cast<std::size_t>(S) + 2, 0);
  for (int s = 0; s <= S; ++s)
    offset[static_cast<std::size_t>(s) + 1] =
        offset[static_cast<std::size_t>(s)] +
        static_cast<std::size_t>(w.hi[static_cast<std::size_t>(s)] -
                                 w.lo[static_cast<std::size_t>(s)] + 1);
  std::vector<double> sq(offset.back(), inf);
  std::vector<int> from(offset.back(), -1);
  auto cell = [&](int s, int e) {
    return offset[static_cast<std::size_t>(s)] +
           static_cast<std::size_t>(e - w.lo[static_cast<std::size_t>(s)]);
  };
  sq[cell(0, 0)] = 0.0;
  for (int s = 1; s <= S; ++s) {
    if (expired && expired()) return std::nullopt;
    const int plo = w.lo[static_cast<std::size_t>(s) - 1],
              phi = w.hi[static_cast<std::size_t>(s) - 1];
    // Row s from row s - 1: e's best start, searched in [blo, bhi].
    std::vector<std::array<int, 4>> todo = {
        {w.lo[static_cast<std::size_t>(s)], w.hi[static_cast<std::size_t>(s)], plo, phi}};
    while (!todo.empty()) {
      const auto [elo, ehi, blo, bhi] = todo.back();
      todo.pop_back();
      if (elo > ehi) continue;
      const int e = elo + (ehi - elo) / 2;
      const int first = std::max(blo, p.reach_back(e, plo, limit));
      const int last = std::min(bhi, e - 1);
      double best = inf;
      int arg = -1;
      for (int b = first; b <= last; ++b) {
        const double prev = sq[cell(s - 1, b)];
        if (prev == inf) continue;
        const double c = p.cost(b, e);
        const double v = prev + c * c;
        if (v < best) best = v, arg = b;
      }
      sq[cell(s, e)] = best;
      from[cell(s, e)] = arg;
      // Leftmost best starts ascend with e: the halves search either side.
      todo.push_back({elo, e - 1, blo, arg < 0 ? bhi : arg});
      todo.push_back({e + 1, ehi, arg < 0 ? blo : arg, bhi});
    }
  }
  Partition counts(static_cast<std::size_t>(S));
  int e = p.layers();
  for (int s = S; s >= 1; --s) {
    const int b = from[cell(s, e)];
    if (b < 0) return std::nullopt;  // rounding broke a window: evening by share instead
    counts[static_cast<std::size_t>(s) - 1] = e - b;
    e = b;
  }
  return counts;
}

// Rows times the log of their width above this (about 0.2 s and 200 MB):
// evening by share.
constexpr double kExactEveningWork = 1 << 24;

}  // namespace

// The least possible maximum stage cost M (exact), then, among splits with
// every stage <= M, the least sum of squares (so the remaining stages are as
// even as the bottleneck allows).
Partition split_min_max(const LayerProfile& profile, int num_stages, SplitBy by,
                        const std::function<bool()>& expired) {
  const int n = static_cast<int>(profile.size());
  if (num_stages < 1) throw InputError("a partition needs at least one stage");
  if (n < num_stages)
    throw ShapeError("the layer profile has " + std::to_string(n) + " layers, fewer than the " +
                     std::to_string(num_stages) + " stages of the plan (each stage needs a layer)");
  const Prefix p(profile, by);
  const double m = bottleneck(p, num_stages);
  const double limit = m * (1 + 1e-12) + 1e-12;
  const Windows w = windows(p, num_stages, limit);
  double work = 0;
  for (int s = 1; s <= num_stages; ++s) {
    const double width =
        w.hi[static_cast<std::size_t>(s)] - w.lo[static_cast<std::size_t>(s)] + 1.0;
    work += width * (1 + std::log2(width));
  }
  if (work <= kExactEveningWork)
    if (auto exact = split_least_squares(p, num_stages, limit, w, expired)) return *exact;
  return split_by_share(p, num_stages, limit, w);
}

namespace {

// The load of each rank under `meta`'s mapping, by prefix sums.
std::vector<double> rank_loads(const Prefix& p, const PlanMeta& meta, const Partition& part) {
  std::vector<double> load(static_cast<std::size_t>(meta.pp_degree), 0.0);
  int layer = 0;
  for (std::size_t s = 0; s < part.size(); ++s) {
    load[static_cast<std::size_t>(meta.rank_of(static_cast<int>(s)))] +=
        p.cost(layer, layer + part[s]);
    layer += part[s];
  }
  return load;
}

}  // namespace

Partition split_rank_balanced(const LayerProfile& profile, const PlanMeta& meta,
                              const std::function<bool()>& expired) {
  Partition part = split_min_max(profile, meta.num_stages(), SplitBy::Work, expired);
  const Prefix p(profile, SplitBy::Work);
  std::vector<double> load = rank_loads(p, meta, part);
  double best = *std::max_element(load.begin(), load.end());
  // Moving boundary b changes stages b and b + 1 only: two ranks' loads.
  auto starts = [&] {
    std::vector<int> at(part.size() + 1, 0);
    for (std::size_t s = 0; s < part.size(); ++s) at[s + 1] = at[s] + part[s];
    return at;
  };
  std::vector<int> at = starts();
  for (int round = 0; round < 4 * static_cast<int>(profile.size()); ++round) {
    if (expired && expired()) break;
    bool improved = false;
    for (std::size_t b = 0; b + 1 < part.size() && !improved; ++b)
      for (int dir : {-1, 1}) {
        if (part[b] + dir < 1 || part[b + 1] - dir < 1) continue;
        const int ra = meta.rank_of(static_cast<int>(b)),
                  rb = meta.rank_of(static_cast<int>(b) + 1);
        const int mid = at[b + 1] + dir;
        std::vector<double> next = load;
        next[static_cast<std::size_t>(ra)] += p.cost(at[b], mid) - p.cost(at[b], at[b + 1]);
        next[static_cast<std::size_t>(rb)] += p.cost(mid, at[b + 2]) - p.cost(at[b + 1], at[b + 2]);
        const double top = *std::max_element(next.begin(), next.end());
        if (top < best - 1e-12) {
          part[b] += dir;
          part[b + 1] -= dir;
          at[b + 1] = mid;
          load = rank_loads(p, meta, part);  // fresh sums: no drift from the deltas
          best = *std::max_element(load.begin(), load.end());
          improved = true;
          break;
        }
      }
    if (!improved) break;
  }
  return part;
}

double rank_footprint(const LayerProfile& profile, const PlanMeta& meta) {
  std::vector<double> mem(static_cast<std::size_t>(meta.pp_degree), 0.0);
  int layer = 0;
  for (std::size_t s = 0; s < meta.partition.size(); ++s) {
    double a = 0;
    for (int k = 0; k < meta.partition[s]; ++k, ++layer)
      a += profile.layers[static_cast<std::size_t>(layer)].activation;
    mem[static_cast<std::size_t>(meta.rank_of(static_cast<int>(s)))] += a;
  }
  return *std::max_element(mem.begin(), mem.end());
}

}  // namespace detail

void check_partition(const LayerProfile& profile, const Partition& partition, int num_stages) {
  if (partition.size() != static_cast<std::size_t>(num_stages))
    throw InputError("the partition has " + std::to_string(partition.size()) +
                     " stages, but the plan has " + std::to_string(num_stages));
  long long total = 0;
  for (std::size_t s = 0; s < partition.size(); ++s) {
    if (partition[s] < 1)
      throw InputError("the partition gives stage " + std::to_string(s) + " " +
                       std::to_string(partition[s]) + " layers (every stage needs at least one)");
    total += partition[s];
  }
  if (total != static_cast<long long>(profile.size()))
    throw InputError("the partition covers " + std::to_string(total) +
                     " layers, but the layer profile has " + std::to_string(profile.size()));
}

CostModel stage_costs(const LayerProfile& profile, const Partition& partition,
                      const CostModel& base) {
  CostModel c = base;
  c.f = c.b = c.i = c.w = 1.0;  // the per-stage sums carry the whole cost
  c.stage_scales.clear();
  c.stage_quadratic.clear();
  c.stage_memory.assign(partition.size(), 0.0);
  c.stage_recompute.assign(partition.size(), 0.0);
  c.stage_input.assign(partition.size(), 0.0);
  int layer = 0;
  for (std::size_t s = 0; s < partition.size(); ++s) {
    StageScale scale{0, 0, 0, 0}, quad{0, 0, 0, 0};
    // A recomputing stage keeps its first layer's input.
    if (static_cast<std::size_t>(layer) < profile.size())
      c.stage_input[s] = profile.layers[static_cast<std::size_t>(layer)].input_size();
    for (int k = 0; k < partition[s]; ++k, ++layer) {
      const Layer& x = profile.layers[static_cast<std::size_t>(layer)];
      c.stage_recompute[s] += x.recompute_time();
      scale.f += x.f;
      scale.b += x.b;
      scale.i += x.i();
      scale.w += x.w;
      quad.f += x.f_quad;
      quad.b += x.b_quad;
      quad.i += x.i_quad();
      quad.w += x.w_quad;
      c.stage_memory[s] += x.activation;
    }
    c.stage_scales[static_cast<int>(s)] = scale;
    if (quad.f > 0 || quad.b > 0 || quad.w > 0) {
      const auto fraction = [](double part, double whole) {
        return whole > 0 ? std::min(1.0, part / whole) : 0.0;
      };
      c.stage_quadratic[static_cast<int>(s)] = {fraction(quad.f, scale.f),
                                                fraction(quad.b, scale.b),
                                                fraction(quad.i, scale.i),
                                                fraction(quad.w, scale.w)};
    }
  }
  // The profile's costs are those of a microbatch of its stated length.
  if (profile.seq_len) c.restate_lengths(*profile.seq_len);
  return c;
}

Partition partition_for(const LayerProfile& profile, const PlanMeta& meta) {
  // A routed plan (DualPipe) holds the model more than once: its stages are
  // not one split of the profile's layers.
  if (meta.has_routes())
    throw InputError(limits::excerpt(meta.schedule) +
                     ": its microbatches cross a route of the stages (each direction holds the "
                     "whole model), so a layer profile's one split of the layers does not cost "
                     "it; give per-stage costs instead (--cost, --stage-costs: a stage is one "
                     "rank's share of one copy)");
  if (meta.partition.empty()) return balanced_partition(profile, meta.num_stages());
  check_partition(profile, meta.partition, meta.num_stages());
  return meta.partition;
}

LayerProfile stage_cost_profile(const StageCosts& file, const std::string& source) {
  if (!file.absolute)
    throw InputError(source +
                     ": a file of cost multipliers gives no stage's duration; search needs "
                     "measured durations (a stage-costs file written by pipeplan calibrate, "
                     "\"absolute\": true)");
  if (file.stages.empty()) throw InputError(source + ": the file lists no stage");
  LayerProfile profile;
  int expected = 0;
  for (const auto& [stage, d] : file.stages) {
    if (stage != expected)
      throw InputError(source + ": stage " + std::to_string(expected) +
                       " is missing (the stages must be 0.." +
                       std::to_string(file.stages.rbegin()->first) + " without a gap)");
    ++expected;
    Layer layer;
    layer.name = "stage" + std::to_string(stage);
    layer.f = d.f;
    layer.b = d.b;
    layer.w = d.i + d.w > 0 ? d.b * (d.w / (d.i + d.w)) : 0.0;
    layer.activation = 1.0;
    profile.layers.push_back(std::move(layer));
  }
  return profile;
}

}  // namespace pipeplan
