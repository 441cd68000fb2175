// Partition hill climbing for a fixed plan (refine.h).
#include "search/refine.h"

#include <algorithm>

namespace pipeplan::detail {

std::optional<Refined> refine_partition(const Plan& plan, const LayerProfile& profile,
                                        const SimOptions& options, double budget,
                                        const std::function<bool()>& expired, int* evaluations) {
  constexpr double kEps = 1e-9;
  constexpr int kMaxRounds = 48;
  auto run = [&](const Partition& part, double* peak) -> std::optional<double> {
    SimOptions o = options;
    o.costs = stage_costs(profile, part, options.costs);
    ++*evaluations;
    const SimResult r = simulate(plan, o);
    if (!r.ok()) return std::nullopt;
    *peak = 0;
    for (const RankStats& s : r.ranks) *peak = std::max(*peak, s.peak_memory);
    if (*peak > budget + kEps) return std::nullopt;
    return r.makespan;
  };
  Partition part = plan.meta.partition;
  double peak = 0;
  const std::optional<double> start = run(part, &peak);
  if (!start) return std::nullopt;
  double best = *start;
  bool any = false;
  for (int round = 0; round < kMaxRounds && !expired(); ++round) {
    bool improved = false;
    for (std::size_t b = 0; b + 1 < part.size() && !improved; ++b)
      for (int dir : {-1, 1}) {
        Partition next = part;
        next[b] += dir;
        next[b + 1] -= dir;
        if (next[b] < 1 || next[b + 1] < 1) continue;
        double p = 0;
        const std::optional<double> m = run(next, &p);
        if (m && *m < best - kEps) {
          best = *m, part = next, peak = p, improved = any = true;
          break;
        }
      }
    if (!improved) break;
  }
  if (!any) return std::nullopt;
  Refined out{plan, best, peak};
  out.plan.meta.partition = part;
  return out;
}

}  // namespace pipeplan::detail
