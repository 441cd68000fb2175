// Internal to the planner and its clients: memory actions inserted into one
// rank's list at positions of the original list, in the one order every
// inserter uses (memory_policy.cc, the search's memory decisions).
#pragma once

#include <cstddef>
#include <vector>

#include "pipeplan/ir.h"

namespace pipeplan::detail {

/// An OFFLOAD, RELOAD or RECOMPUTE to place right before or right after
/// the action at `index` of the original list.
struct MemoryInsert {
  std::size_t index = 0;
  bool after = false;
  Action action;
};

/// `list` with `inserts` placed. At one position: after an action, its
/// OFFLOAD comes first, then RELOADs; before an action, RELOADs come first,
/// then RECOMPUTEs (a RELOAD precedes the RECOMPUTE of the same stage and
/// microbatch). Otherwise inserts keep their given order.
std::vector<Action> with_memory_actions(const std::vector<Action>& list,
                                        std::vector<MemoryInsert> inserts);

}  // namespace pipeplan::detail
