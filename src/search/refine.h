// Internal to src/search: moving layers across stage boundaries of a fixed
// plan while that shortens it.
#pragma once

#include <optional>

#include "pipeplan/ir.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"
#include "search/context.h"

namespace pipeplan::detail {

struct Refined {
  Plan plan;  ///< the input plan with a better meta.partition
  double makespan = 0.0, peak = 0.0;
};

/// Hill-climbs `plan`'s partition (its actions stay as they are): one layer
/// moves across one boundary at a time, kept when the simulated makespan
/// under `options` (costs from the profile, comm from options.costs) drops
/// and every rank's peak memory stays within `ctx.budget`. nullopt when no
/// move helps. `ctx` counts the simulations; its clock stops early.
std::optional<Refined> refine_partition(const Plan& plan, const LayerProfile& profile,
                                        const SimOptions& options, SearchContext& ctx);

}  // namespace pipeplan::detail
