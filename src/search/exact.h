// Internal to src/search: the exhaustive search for tiny shapes.
#pragma once

#include <functional>

#include "pipeplan/search.h"

namespace pipeplan::detail {

/// Whether exact_search() can be asked about (profile, options): at most 8
/// layers and p x m <= 8, so that v = 1 and v = 2 (at most 16 (stage,
/// microbatch) pairs) are both covered.
bool exact_is_tiny(const LayerProfile& profile, const SearchOptions& options);

/// Branch and bound over every (mapping, v, partition) with at most 16
/// (stage, microbatch) pairs (ExactResult::max_stages_per_rank says which v
/// that covered) and, for each, every
/// semi-active schedule of F, B or I+W per (stage, microbatch) with
/// microbatches in order per stage and kind, in the compute-only model,
/// keeping each rank's peak memory <= budget. Schedules are generated in
/// (start, rank) order, so each is met once; a node is cut when its ranks'
/// remaining work cannot beat the incumbent. `search_value` (the search's
/// compute-only makespan, a plan in that space) is the first incumbent.
/// `expired` stops it early (the result is then incomplete). When a schedule
/// faster than `search_value` is found (complete or not), `plan` (if given)
/// receives the fastest one's compute-only orders, its partition recorded.
ExactResult exact_search(const LayerProfile& profile, const SearchOptions& options, double budget,
                         double search_value, const std::function<bool()>& expired,
                         Plan* plan = nullptr);

}  // namespace pipeplan::detail
