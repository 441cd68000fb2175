// Side-by-side comparison of schedules (`pipeplan compare`): one row per
// schedule and their order. Writers live in emit_sim.h.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

namespace pipeplan {

/// One schedule's row in a side-by-side comparison (`pipeplan compare`).
struct ComparisonRow {
  std::string schedule;
  int stages_per_rank = 0;
  std::vector<int> partition;        ///< layers per stage (with a layer profile)
  std::string skipped;               ///< why the shape was rejected ("" when it ran)
  std::vector<Diagnostic> problems;  ///< why the simulation failed, if it did
  double makespan = 0.0, bubble_fraction = 0.0;
  std::vector<RankStats> ranks;
  /// Largest peak over ranks, in whole-rank activation units.
  double peak_rank_activations() const;
  /// Largest peak_memory over ranks.
  double peak_memory() const;
};

/// Orders rows that ran by makespan (ties keep their order), then failed
/// simulations, then skipped schedules.
void sort_comparison(std::vector<ComparisonRow>& rows);

/// Why no schedule ran, or "" when one did: the reason every row shares
/// (e.g. costs beyond the limits), else "no schedule accepts pp P with M
/// microbatches[ and V stages per rank]".
std::string comparison_refusal(const std::vector<ComparisonRow>& rows, int pp_degree,
                               int num_microbatches, int stages_per_rank);

}  // namespace pipeplan
