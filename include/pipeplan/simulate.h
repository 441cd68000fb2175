// simulate(): a cost-model run of a plan -> timeline, makespan, bubble,
// per-rank busy time and peak live activations. See docs/simulator.md.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/timeline.h"
#include "pipeplan/verify.h"

namespace pipeplan {

/// Per-stage multipliers of the action-type costs (1 = the base cost).
struct StageScale {
  double f = 1.0, b = 1.0, i = 1.0, w = 1.0;
  friend bool operator==(const StageScale& a, const StageScale& b) {
    return a.f == b.f && a.b == b.b && a.i == b.i && a.w == b.w;
  }
};

/// Durations of compute actions and transfers, in one abstract time unit.
struct CostModel {
  double f = 1.0, b = 2.0, i = 1.0, w = 1.0;
  /// OVERLAP_F_B duration; unset means F(fwd stage) + B(bwd stage).
  std::optional<double> overlap;
  /// Stage -> multipliers; stages not listed use 1.
  std::map<int, StageScale> stage_scales;
  double comm_latency = 0.0;
  double comm_bandwidth = 0.0;  ///< bytes per time unit; 0 = infinite
  double transfer_bytes = 0.0;  ///< size of every transfer

  /// Duration of a compute action (0 for SEND/RECV and pass-through types).
  double duration(const Action& a) const;
  /// latency + bytes / bandwidth (just latency when either is 0).
  double transfer_time() const;
};

/// Parses "F=1,B=2,I=1,W=1,OVERLAP_F_B=2.5" (keys case-insensitive, "O" is
/// short for OVERLAP_F_B) into `base`. When B is absent it defaults to I+W;
/// when only B is given, I = W = B/2. Throws InputError naming the bad item.
CostModel parse_cost_spec(std::string_view spec, CostModel base = {});

/// Parses a stage-costs file: CSV rows "stage,F,B,I,W" or "stage,SCALE"
/// (optional header, '#' comments), or JSON {"stages":[{"stage":0,"scale":2,
/// "F":..}]}. Throws InputError "<source>:<line>: ..." on bad content.
std::map<int, StageScale> parse_stage_costs(std::string_view text,
                                            const std::string& source = "<stage-costs>");

/// A stage-costs file as read. One written by `pipeplan calibrate` holds
/// absolute durations ("absolute": true, in `time_unit`), the stage layout
/// they were measured on and the measured transfer cost.
struct StageCosts {
  std::map<int, StageScale> stages;
  bool absolute = false;
  std::string time_unit;     ///< "ms" for calibrated files
  int stages_per_rank = 0;   ///< layout measured on (0: not stated)
  std::optional<double> comm_latency, comm_bandwidth, transfer_bytes;
};
/// parse_stage_costs plus the calibrated fields; throws InputError.
StageCosts read_stage_costs(std::string_view text, const std::string& source = "<stage-costs>");
/// The cost model of a stage-costs file on its own: for an absolute file,
/// base costs F = B = I = W = 1 (so each stage's values are its durations)
/// and the file's transfer cost; else the defaults with its multipliers.
CostModel cost_model_of(const StageCosts& file);

struct SimOptions {
  CostModel costs;
  Transport transport = Transport::Rendezvous;
};

/// A simulation: the timeline of one step (timeline.h), and whether it ran.
struct SimResult : Timeline {
  /// Empty when every rank reached the end of its list and every transfer
  /// completed; otherwise why not (bad actions, deadlock, mismatched pairs).
  std::vector<Diagnostic> problems;
  bool ok() const { return problems.empty(); }
  /// True when the plan had no SEND/RECV and data moved implicitly.
  bool compute_only = false;
};

/// Runs each rank's list in order on one compute stream per rank; SEND/RECV
/// are posted when the rank reaches them and complete per `options.transport`;
/// a compute waits for the values it consumes. A compute-only plan moves each
/// cross-rank value as soon as it is produced (+ transfer time), with no
/// transport model. Linear time; never hangs: a deadlock is a problem in the
/// result. Precondition: the plan is whole; else throws InputError.
SimResult simulate(const Plan& plan, const SimOptions& options = {});

/// Human-readable summary: makespan, bubble, one row per rank.
void write_sim_text(const Plan& plan, const SimOptions& options, const SimResult& result,
                    std::ostream& out);
/// JSON summary {"format":"pipeplan.simulation","version":1,"makespan":..,
/// "bubble_fraction":..,"ranks":[..],..}; problems listed when not ok.
void write_sim_json(const Plan& plan, const SimOptions& options, const SimResult& result,
                    std::ostream& out);

/// One schedule's row in a side-by-side comparison (`pipeplan compare`).
struct ComparisonRow {
  std::string schedule;
  int stages_per_rank = 0;
  std::string skipped;               ///< why the shape was rejected ("" when it ran)
  std::vector<Diagnostic> problems;  ///< why the simulation failed, if it did
  double makespan = 0.0, bubble_fraction = 0.0;
  std::vector<RankStats> ranks;
  /// Largest peak over ranks, in whole-rank activation units.
  double peak_rank_activations() const;
};

/// Orders rows that ran by makespan (ties keep their order), then failed
/// simulations, then skipped schedules.
void sort_comparison(std::vector<ComparisonRow>& rows);
/// The comparison as a table; `costs` is what each schedule's rank share
/// costs (see docs/simulator.md on how v divides it).
void write_compare_text(int pp_degree, int num_microbatches, const SimOptions& options,
                        const std::vector<ComparisonRow>& rows, std::ostream& out);
/// {"format":"pipeplan.compare","version":1,"results":[..],"skipped":[..]}.
void write_compare_json(int pp_degree, int num_microbatches, const SimOptions& options,
                        const std::vector<ComparisonRow>& rows, std::ostream& out);

}  // namespace pipeplan
