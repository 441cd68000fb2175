// Internal to src/search: local improvement of a compute-only plan that
// holds memory actions (docs/memory.md, "The search decides memory"), timed
// by the simulator itself, so RECOMPUTE time and the memory it holds count.
#pragma once

#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"
#include "search/context.h"

namespace pipeplan::detail {

struct Polished {
  Plan plan;
  double makespan = 0.0, peak = 0.0;
  int moves = 0;  ///< accepted moves (0: `plan` is the input)
};

/// Hill-climbs `plan` (compute-only, F/B/I/W and memory actions) within
/// `ctx.budget` (every rank's simulated device peak): drops each RECOMPUTE the
/// budget no longer needs when the makespan does not grow, and moves an
/// action into the idle stretch before an earlier position of its rank
/// (never past an action of its own stage and kind) when the makespan, or
/// else the sum of the ranks' finish times, drops. At most
/// `max_evaluations` plans are simulated, each counted in `ctx`; its clock
/// stops early.
Polished polish_memory(const Plan& plan, const SimOptions& options, long long max_evaluations,
                       SearchContext& ctx);

}  // namespace pipeplan::detail
