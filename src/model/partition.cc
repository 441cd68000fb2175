// Contiguous layer partitions and the stage cost model they induce.
#include <algorithm>
#include <cmath>
#include <limits>

#include "pipeplan/error.h"
#include "pipeplan/profile.h"
#include "model/split.h"

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

// Two passes of one DP over prefix sums: the least possible maximum stage
// cost M, then, among splits with every stage <= M, the least sum of squares
// (so the remaining stages are as even as the bottleneck allows).
Partition split_min_max(const LayerProfile& profile, int num_stages, SplitBy by) {
  const int n = static_cast<int>(profile.size());
  if (num_stages < 1) throw InputError("a partition needs at least one stage");
  if (n < num_stages)
    throw ShapeError("the layer profile has " + std::to_string(n) + " layers, fewer than the " +
                     std::to_string(num_stages) + " stages of the plan (each stage needs a layer)");
  std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
  for (int l = 0; l < n; ++l)
    prefix[static_cast<std::size_t>(l) + 1] =
        prefix[static_cast<std::size_t>(l)] +
        (by == SplitBy::Work ? layer_work(profile, l, l + 1)
                             : profile.layers[static_cast<std::size_t>(l)].activation);
  auto cost = [&](int b, int e) {
    return prefix[static_cast<std::size_t>(e)] - prefix[static_cast<std::size_t>(b)];
  };
  const double inf = std::numeric_limits<double>::infinity();
  const auto S = static_cast<std::size_t>(num_stages), N = static_cast<std::size_t>(n);
  // best[s][e]: stages 0..s-1 over layers [0, e).
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(N + 1, inf));
  best[0][0] = 0;
  for (std::size_t s = 1; s <= S; ++s)
    for (std::size_t e = s; e + (S - s) <= N; ++e)
      for (std::size_t b = s - 1; b < e; ++b)
        if (best[s - 1][b] < inf)
          best[s][e] = std::min(
              best[s][e], std::max(best[s - 1][b], cost(static_cast<int>(b), static_cast<int>(e))));
  const double limit = best[S][N] * (1 + 1e-12) + 1e-12;
  std::vector<std::vector<double>> sq(S + 1, std::vector<double>(N + 1, inf));
  std::vector<std::vector<int>> from(S + 1, std::vector<int>(N + 1, -1));
  sq[0][0] = 0;
  for (std::size_t s = 1; s <= S; ++s)
    for (std::size_t e = s; e + (S - s) <= N; ++e)
      for (std::size_t b = s - 1; b < e; ++b) {
        const double c = cost(static_cast<int>(b), static_cast<int>(e));
        if (sq[s - 1][b] == inf || c > limit) continue;
        const double v = sq[s - 1][b] + c * c;
        if (v < sq[s][e]) sq[s][e] = v, from[s][e] = static_cast<int>(b);
      }
  Partition counts(S);
  std::size_t e = N;
  for (std::size_t s = S; s >= 1; --s) {
    const auto b = static_cast<std::size_t>(from[s][e]);
    counts[s - 1] = static_cast<int>(e - b);
    e = b;
  }
  return counts;
}

namespace {
double busiest_rank(const LayerProfile& profile, const PlanMeta& meta, const Partition& part) {
  std::vector<double> load(static_cast<std::size_t>(meta.pp_degree), 0.0);
  int layer = 0;
  for (std::size_t s = 0; s < part.size(); ++s) {
    load[static_cast<std::size_t>(meta.rank_of(static_cast<int>(s)))] +=
        layer_work(profile, layer, layer + part[s]);
    layer += part[s];
  }
  return *std::max_element(load.begin(), load.end());
}
}  // namespace

Partition split_rank_balanced(const LayerProfile& profile, const PlanMeta& meta) {
  Partition part = split_min_max(profile, meta.num_stages(), SplitBy::Work);
  double best = busiest_rank(profile, meta, part);
  for (int round = 0; round < 4 * static_cast<int>(profile.size()); ++round) {
    bool improved = false;
    for (std::size_t b = 0; b + 1 < part.size() && !improved; ++b)
      for (int dir : {-1, 1}) {
        Partition next = part;
        next[b] += dir;
        next[b + 1] -= dir;
        if (next[b] < 1 || next[b + 1] < 1) continue;
        const double load = busiest_rank(profile, meta, next);
        if (load < best - 1e-12) {
          best = load, part = next, improved = true;
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
  c.stage_memory.assign(partition.size(), 0.0);
  int layer = 0;
  for (std::size_t s = 0; s < partition.size(); ++s) {
    StageScale scale{0, 0, 0, 0};
    for (int k = 0; k < partition[s]; ++k, ++layer) {
      const Layer& x = profile.layers[static_cast<std::size_t>(layer)];
      scale.f += x.f;
      scale.b += x.b;
      scale.i += x.i();
      scale.w += x.w;
      c.stage_memory[s] += x.activation;
    }
    c.stage_scales[static_cast<int>(s)] = scale;
  }
  return c;
}

Partition partition_for(const LayerProfile& profile, const PlanMeta& meta) {
  if (meta.partition.empty()) return balanced_partition(profile, meta.num_stages());
  check_partition(profile, meta.partition, meta.num_stages());
  return meta.partition;
}

}  // namespace pipeplan
