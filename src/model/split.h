// Internal: the partitions of a layer profile beyond the balanced one, which
// the search starts from (profile.h holds the public ones).
#pragma once

#include <functional>

#include "pipeplan/ir.h"
#include "pipeplan/profile.h"

namespace pipeplan::detail {

enum class SplitBy { Work, Memory };

/// The contiguous split into `num_stages` stages minimising the largest
/// stage's F + B (Work) or activation (Memory), exactly; among those the
/// least sum of squared stage costs. Time O(n log) for the bottleneck plus
/// the evening's O(sum of window widths x log); when that would exceed
/// ~1.7e7 steps or `expired` fires, the remaining stages are evened by
/// share instead (ends nearest s/S of the total, the bottleneck kept).
Partition split_min_max(const LayerProfile& profile, int num_stages, SplitBy by,
                        const std::function<bool()>& expired = {});

/// Starting from the balanced split, moves single boundaries while that
/// lowers the busiest rank's total work under `meta`'s mapping (v > 1
/// gives a rank several stages, so even stages need not mean even ranks).
/// Stops early when `expired` fires.
Partition split_rank_balanced(const LayerProfile& profile, const PlanMeta& meta,
                              const std::function<bool()>& expired = {});

/// The most activation memory a rank of `meta` (with meta.partition) holds
/// for one microbatch: no plan of this split peaks lower.
double rank_footprint(const LayerProfile& profile, const PlanMeta& meta);

}  // namespace pipeplan::detail
