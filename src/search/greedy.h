// Internal to src/search: the stage cost table the search works on and the
// list scheduler that builds compute orders from it.
#pragma once

#include <optional>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"

namespace pipeplan::detail {

/// Per-stage durations and activation sizes, read once from a CostModel.
struct StageTable {
  std::vector<double> f, b, i, w, mem;
  double transfer = 0.0;
};
StageTable stage_table(const CostModel& costs, int num_stages);

/// How the list scheduler breaks ties between ready work.
struct GreedyKnobs {
  bool split = false;          ///< backward as I then W (W fills idle time)
  bool forward_first = false;  ///< a ready F beats a ready backward while memory allows
  /// Admit a microbatch to a rank only when its forwards on every local
  /// stage fit (never starves a later stage; needs more memory).
  bool reserve = false;
  double memory_scale = 1.0;  ///< use only this fraction of the budget for forwards
  /// Paced admission: the scheduler releases the first stage's forward of
  /// microbatch j at (j - burst) x pace x the busiest rank's work per
  /// microbatch (F + B of its stages), so microbatches enter at the rate the
  /// pipeline drains them and each rank holds about as many as one round
  /// trip takes, not as many as the budget allows. It shapes the order only:
  /// where the scheduler idled a rank for a release, the plan's own times
  /// (the simulator's) start the forward as soon as the rank is free, and
  /// the outcome's makespan and peak are those times'. 0: no pacing.
  double pace = 0.0;
  int burst = 0;  ///< microbatches admitted before the pacing starts
};

struct GreedyOutcome {
  Plan plan;              ///< compute-only
  double makespan = 0.0;  ///< the compute-only simulator's makespan of `plan`
  double peak = 0.0;      ///< max over ranks of peak activation memory
};

/// Event-driven list scheduling: whenever a rank is free it runs, among the
/// work whose inputs are there (microbatches in order per stage), the most
/// urgent: a backward (B or I), else a forward that fits the memory budget,
/// else a deferred W; otherwise it waits for the next input. nullopt when
/// the budget leaves every rank waiting (no forward fits and nothing else
/// can run).
std::optional<GreedyOutcome> list_schedule(const PlanMeta& meta, const StageTable& table,
                                           double memory_limit, const GreedyKnobs& knobs);

}  // namespace pipeplan::detail
