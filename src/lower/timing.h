// Internal: a cost-model run of a compute-only order, used by lower(). A
// value crossing ranks arrives its transfer time after its producer ends; a
// compute starts when its rank is free and its inputs arrived (the eager
// bound of any lowering of the order).
#pragma once

#include <string>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"

namespace pipeplan::detail {

/// Start/end of every compute action (comm and pass-through actions get the
/// time their rank reaches them and zero duration).
struct Timing {
  std::vector<std::vector<double>> start, end;  ///< [rank][index]; end may be empty
  bool complete = true;                         ///< false: some rank got stuck
  std::string stuck;  ///< when !complete: "rank R waits at A for P; ..."
};

/// Runs every rank of a whole plan in order. Linear in the number of actions.
/// Cross-rank data dependencies are those of ir/deps.h (docs/semantics.md); RECVs
/// are ignored and a cross-rank value takes costs.transfer_time(). `with_end`
/// false leaves `end` empty (the seed lowering needs start times only).
Timing time_compute(const Plan& plan, const CostModel& costs, bool with_end = true);

/// Throws PlanRejected (a plan that cannot run: exit 1) with one
/// "compute-cycle" diagnostic naming the stuck ranks when `timing` did not
/// complete; returns otherwise.
void refuse_if_stuck(const Timing& timing);

}  // namespace pipeplan::detail

namespace pipeplan::detail {

/// The latest start of every compute action that keeps `timing`'s makespan,
/// with each rank's order and the cross-rank transfer time fixed ([rank]
/// [index]; non-compute actions get their successor's). Along a rank's list
/// it increases strictly when durations are positive, and it is never
/// before the action's start in `timing`. Precondition: `timing` is the
/// complete run of the same plan and costs, with end times. Linear.
std::vector<std::vector<double>> latest_starts(const Plan& plan, const CostModel& costs,
                                               const Timing& timing);

}  // namespace pipeplan::detail
