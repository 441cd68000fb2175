// The planner entry points: a problem resolved once (Planner), the lowering
// a front end's choice makes of a schedule's own (the one nominal-latency
// rule), and the plan_* functions, each one of those calls.
#include <string>
#include <utility>

#include "pipeplan/error.h"
#include "pipeplan/planner.h"
#include "planner/families.h"

namespace pipeplan {

CostModel planning_costs(const CostModel& costs, const LoweringChoice& choice) {
  CostModel planned = costs;
  if (!choice.transfer_cost_stated && costs.transfer_time() == 0.0) {
    planned.comm_latency = kNominalLatency;
    planned.comm_bandwidth = 0.0;
  }
  return planned;
}

void check_lowering_choice(const LoweringChoice& choice) {
  if (choice.max_prefetch < 0)
    throw InputError("the prefetch cap must be >= 0 (0: no limit), got " +
                     std::to_string(choice.max_prefetch));
  // Receives right before their consumer: nothing to prefetch or search.
  if (choice.batch_p2p &&
      ((choice.mode && *choice.mode != LowerMode::Seed) || choice.max_prefetch > 0))
    throw InputError(
        "the batched lowering places each receive right before its consumer (the seed "
        "placement), so it does not combine with the latency-hiding lowering, the exact "
        "lowering or a prefetch cap; drop --lowering / --prefetch (Python: lowering=, "
        "prefetch=)");
}

namespace {

// Whether a latency-hiding lowering planning for `c` plans for the nominal
// costs (nominal_costs(): what it reads of them, compute and transfers).
bool plans_nominal(const CostModel& c) {
  const CostModel n = nominal_costs();
  return c.f == n.f && c.b == n.b && c.i == n.i && c.w == n.w && !c.overlap &&
         c.stage_scales.empty() && c.stage_recompute.empty() &&
         c.transfer_time() == n.transfer_time();
}

LowerOptions apply(LowerOptions o, const LoweringChoice& choice, const CostModel& costs) {
  check_lowering_choice(choice);
  if (choice.batch_p2p) {
    o.batch_p2p = true;
    o.mode = LowerMode::Seed;
  }
  if (choice.mode) o.mode = *choice.mode;
  o.max_prefetch = choice.max_prefetch;
  if (o.mode != LowerMode::Seed) o.costs = planning_costs(costs, choice);
  // A schedule's own one order per rank (registry.cc) is the latency-hiding
  // lowering's for the nominal costs, where it costs nothing under
  // rendezvous. Another mode, or stated costs, get per-pair orders (for
  // stated costs searched, which one order per rank would forgo), unless the
  // choice asks for serial safety.
  if (o.serial_safe && (o.mode != LowerMode::LatencyHiding || !plans_nominal(o.costs)))
    o.serial_safe = false;
  if (choice.serial_safe) o.serial_safe = true;
  return o;
}

}  // namespace

LowerOptions lower_options(const PlanMeta& meta, const LoweringChoice& choice,
                           const CostModel& costs) {
  return apply(schedule_lowering(meta), choice, costs);
}

Planner::Planner(const Problem& problem) : meta_(), info_(&find_schedule(problem.schedule)) {
  meta_ = detail::resolve_with(*info_, problem);
}

LowerOptions Planner::lowering(const LoweringChoice& choice, const CostModel& costs) const {
  return apply(detail::lowering_of(info_->lowering, meta_), choice, costs);
}

Plan Planner::compute_rank(int rank) const {
  if (rank < 0 || rank >= meta_.pp_degree) return keep_rank(Plan{meta_, {}, {}}, rank);
  Plan p;
  p.meta = meta_;
  p.rank_ids = {rank};
  p.ranks.push_back(info_->plan_rank(meta_, rank));
  if (meta_.forward_only) p.ranks.back() = forward_projection(p.ranks.back());
  return p;
}

Plan Planner::compute() const {
  Plan p;
  p.meta = meta_;
  for (int r = 0; r < meta_.pp_degree; ++r) {
    p.rank_ids.push_back(r);
    p.ranks.push_back(info_->plan_rank(meta_, r));
    if (meta_.forward_only) p.ranks.back() = forward_projection(p.ranks.back());
  }
  return p;
}

Plan Planner::plan(const LowerOptions& options) const { return lower(compute(), options); }

Plan Planner::plan_rank(int rank, const LowerOptions& options) const {
  // Lowering orders each pair's transfers by a whole-pipeline timing, so one
  // rank's program needs every rank's compute order: plan all, keep one.
  if (rank < 0 || rank >= meta_.pp_degree) return keep_rank(Plan{meta_, {}, {}}, rank);
  return keep_rank(plan(options), rank);
}

Plan plan_compute(const Problem& problem) { return Planner(problem).compute(); }

Plan plan_compute_rank(const Problem& problem, int rank) {
  return Planner(problem).compute_rank(rank);
}

Plan plan(const Problem& problem) {
  const Planner planner(problem);
  return planner.plan(planner.lowering());
}

Plan plan(const Problem& problem, const LowerOptions& options) {
  return Planner(problem).plan(options);
}

Plan plan(const Problem& problem, const LoweringChoice& choice, const CostModel& costs) {
  const Planner planner(problem);
  return planner.plan(planner.lowering(choice, costs));
}

Plan plan_rank(const Problem& problem, int rank) {
  const Planner planner(problem);
  return planner.plan_rank(rank, planner.lowering());
}

Plan plan_rank(const Problem& problem, int rank, const LowerOptions& options) {
  return Planner(problem).plan_rank(rank, options);
}

}  // namespace pipeplan
