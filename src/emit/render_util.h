// Internal: helpers shared by the SVG, Chrome-trace and text renderers.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"
#include "ir/numbers.h"

namespace pipeplan::detail {

/// Position of `stage` among a rank's local stages (meta.stages_of(rank)).
inline int local_chunk(const std::vector<int>& stages, int stage) {
  for (std::size_t c = 0; c < stages.size(); ++c)
    if (stages[c] == stage) return static_cast<int>(c);
  return 0;
}

/// Renderers draw a finished simulation of this very plan.
inline void require_rendered(const Plan& plan, const SimResult& result) {
  if (!result.ok())
    throw InputError("cannot draw a plan whose simulation failed (" +
                     result.problems.front().message + ")");
  if (result.times.size() != plan.ranks.size())
    throw InternalError("render: the simulation result does not belong to this plan");
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    if (result.times[r].size() != plan.ranks[r].size())
      throw InternalError("render: the simulation result does not belong to this plan");
}

}  // namespace pipeplan::detail
