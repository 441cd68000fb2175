// Partition hill climbing for a fixed plan (refine.h).
#include "search/refine.h"

#include "search/climb.h"

namespace pipeplan::detail {

std::optional<Refined> refine_partition(const Plan& plan, const LayerProfile& profile,
                                        const SimOptions& options, SearchContext& ctx) {
  auto run = [&](const Partition& part, double* peak) -> std::optional<double> {
    SimOptions o = options;
    o.costs = stage_costs(profile, part, options.costs);
    ++ctx.evaluations;
    const SimResult r = simulate(plan, o);
    if (!r.ok()) return std::nullopt;
    *peak = max_peak(r);
    if (!ctx.budget.fits(*peak)) return std::nullopt;
    return r.makespan;
  };
  Partition part = plan.meta.partition;
  double peak = 0;
  const std::optional<double> start = run(part, &peak);
  if (!start) return std::nullopt;
  double best = *start;
  const auto stop = [&] { return ctx.expired(); };
  const auto keep = [&](const Partition& next) {
    double p = 0;
    const std::optional<double> m = run(next, &p);
    if (!m || *m >= best - kEps) return false;
    best = *m, peak = p;
    return true;
  };
  if (climb_partition(part, kLibraryRefine.rounds, stop, keep) == 0) return std::nullopt;
  Refined out{plan, best, peak};
  out.plan.meta.partition = part;
  return out;
}

}  // namespace pipeplan::detail
