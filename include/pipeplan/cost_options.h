// The simulator's cost options as users give them (the CLI's --cost,
// --stage-costs, --comm, --bytes and --model; the Python module's keywords),
// and the side-by-side comparison of schedules built on them
// (`pipeplan compare`). One home, so every front end means the same thing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/compare.h"
#include "pipeplan/lower.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"

namespace pipeplan {

/// Cost options as text, each empty/unset when not given.
struct CostOptions {
  std::string cost;                                  ///< "F=1,B=2,..." (parse_cost_spec)
  std::optional<std::string> stage_costs;            ///< contents of a stage-costs file
  std::string stage_costs_source = "<stage-costs>";  ///< its name in messages
  std::string comm;                                  ///< "LATENCY[,BANDWIDTH]"
  double bytes = 0;                                  ///< size of every transfer
  /// The copy stream of memory actions (docs/memory.md): activation units
  /// per time unit (a positive number; "" = infinite) and the latency of
  /// each copy ("" = 0).
  std::string host_bw, host_latency;
  std::string model = "rendezvous";  ///< rendezvous | eager | serial
  /// Put before an option's name in messages: "" names them as the library
  /// and the Python keywords do ("comm latency 'x' ..."); the CLI sets "--".
  std::string name_prefix;
};

/// The SimOptions the options describe. A calibrated stage-costs file
/// (absolute durations) sets the base costs to 1 (`cost` multiplies them) and
/// brings its transfer cost unless `comm`/`bytes` say otherwise. Throws
/// InputError naming the option ("comm latency 'x' is not a non-negative
/// number", with `name_prefix` in front). `file`, when given, receives the stage-costs
/// file as read.
SimOptions make_sim_options(const CostOptions& options, StageCosts* file = nullptr);

/// The lowering choices a front end offers: the CLI's --lowering, --prefetch
/// and --serial-safe, the Python keywords lowering=, prefetch= and
/// serial_safe=.
struct LoweringChoice {
  std::optional<LowerMode> mode;  ///< unset: the schedule's own (schedule_lowering)
  int max_prefetch = 0;           ///< LowerOptions::max_prefetch; 0: no limit
  bool serial_safe = false;       ///< true forces it; false keeps the schedule's
};

/// How to lower a plan of `meta`: the schedule's own options
/// (schedule_lowering; the general rule for a custom plan) with `choice`
/// applied. A latency-hiding lowering plans for `costs`; when they make
/// transfers free and the user gave no transfer cost (`comm_given` false:
/// no --comm / comm=), for kNominalLatency per transfer instead. Throws
/// InputError for a negative prefetch cap.
LowerOptions make_lower_options(const PlanMeta& meta, const LoweringChoice& choice,
                                const CostModel& costs, bool comm_given);

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
  /// How each schedule is lowered: its own options (schedule_lowering) with
  /// these overrides. A latency-hiding lowering plans for the costs the
  /// schedule is simulated with (kNominalLatency per transfer when those
  /// make transfers free).
  std::optional<LowerMode> lowering;
  int max_prefetch = 0;
  bool serial_safe = false;
};

/// Plans and simulates each schedule. `options` cost one rank's share of the
/// model: a schedule with v stages per rank runs each stage at 1/v of them.
/// A schedule that rejects the shape (or whose stage costs do not fit) is a
/// skipped row; rows come back sorted (sort_comparison). Throws InputError
/// for an unknown schedule name.
std::vector<ComparisonRow> compare_schedules(const CompareRequest& request,
                                             const SimOptions& options);

}  // namespace pipeplan
