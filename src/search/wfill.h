// Internal to src/search: re-placing the weight-gradient passes (W) of a
// compute-only order, keeping every rank's F, B and I where they are.
#pragma once

#include <optional>

#include "pipeplan/ir.h"
#include "search/greedy.h"

namespace pipeplan::detail {

/// Re-times `compute` with its W passes placed anew (each rank keeps its F,
/// B and I in order; a rank's pending W run oldest first). A rank with a W
/// pending runs it when its next action would not fit the budget otherwise,
/// when that action's input lands no earlier than the W would end less
/// `slack` (the W fills the wait, delaying it by at most `slack`), or when
/// nothing else is left; otherwise it runs that action as soon as its input
/// is there. nullopt when `compute` holds other actions or cannot finish.
std::optional<GreedyOutcome> refill_weights(const Plan& compute, const StageTable& table,
                                            double budget, double slack);

}  // namespace pipeplan::detail
