// Side-by-side comparison of schedules (`pipeplan compare`, the Python
// module's compare()): every schedule on one shape, planned, lowered and
// simulated alike; one row per schedule and their order. Writers live in
// emit_sim.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/diagnostic.h"
#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"
#include "pipeplan/timeline.h"

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

/// A calibrated file times the stages of one measured layout; a comparison
/// needs one rank's share: the mean stage duration times the measured stages
/// per rank, for every schedule alike. Replaces the per-stage multipliers.
void use_rank_share(SimOptions& options, const StageCosts& file);

/// What `pipeplan compare` runs: one shape, the schedules named (every one in
/// the table when empty), stages_per_rank 0 = each schedule's default.
struct CompareRequest {
  int pp_degree = 4;
  int num_microbatches = 8;
  int stages_per_rank = 0;
  std::vector<std::string> schedules;
  /// A layer profile: each schedule splits this one model into its own
  /// p x v stages (balanced partition, in ComparisonRow::partition) and
  /// stages cost the sums of their layers; the options' compute costs are
  /// then unused and no 1/v rule applies.
  std::optional<LayerProfile> layers;
  /// How a skipped row's shape fix spells pp_degree, num_microbatches and
  /// stages_per_rank (ShapeError::message); the CLI says -p, -m, -v.
  std::string shape_names[3] = {"pp_degree", "num_microbatches", "stages_per_rank"};
  /// How each schedule is lowered: its own options with this choice applied
  /// (lower_options), a latency-hiding lowering planning for the costs the
  /// schedule is simulated with.
  LoweringChoice lowering;
  /// Memory actions inserted into every schedule's order (memory_policy.h);
  /// a row whose schedule lacks a stage the policy names is skipped.
  MemoryPolicy memory;
};

/// Plans and simulates each schedule. `options` cost one rank's share of the
/// model: a schedule with v stages per rank runs each stage at 1/v of them
/// (a routed schedule, DualPipe: each stage at p / (stages a route crosses)
/// of them, so every rank does m shares' work; with a layer profile it is a
/// skipped row, the profile splitting one copy of the model).
/// A schedule that rejects the shape (or whose stage costs do not fit) is a
/// skipped row; rows come back sorted (sort_comparison). Throws InputError
/// for an unknown schedule name.
std::vector<ComparisonRow> compare_schedules(const CompareRequest& request,
                                             const SimOptions& options);

/// Why no schedule ran, or "" when one did: the reason every row shares
/// (e.g. costs beyond the limits), else "no schedule accepts pp P with M
/// microbatches[ and V stages per rank]".
std::string comparison_refusal(const std::vector<ComparisonRow>& rows, int pp_degree,
                               int num_microbatches, int stages_per_rank);

}  // namespace pipeplan
