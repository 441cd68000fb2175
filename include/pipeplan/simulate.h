// simulate(): a cost-model run of a plan -> timeline, makespan, bubble,
// per-rank busy time and peak live activations. See docs/simulator.md.
// Costs: costs.h (reading them: io.h); writing results: emit_sim.h.
#pragma once

#include <vector>

#include "pipeplan/costs.h"
#include "pipeplan/ir.h"
#include "pipeplan/verify.h"

namespace pipeplan {

struct SimOptions {
  CostModel costs;
  Transport transport = Transport::Rendezvous;
};

/// When an action ran. Compute: its run interval. SEND/RECV: from the moment
/// the rank posted it to its completion. Pass-through: zero-length at post.
struct ActionTime {
  double start = 0.0, end = 0.0;
};

/// One boundary value moving between ranks. For plans with comms, `src` is
/// the SEND and `dst` the RECV; for compute-only plans both are computes.
/// `producer`/`consumer` are the compute indices on src/dst rank (-1: none).
struct Transfer {
  int src_rank = 0, src_index = 0, dst_rank = 0, dst_index = 0;
  int producer = -1, consumer = -1;
  double start = 0.0, end = 0.0;  ///< when the data was moving
};

/// Per-rank outcome. idle = makespan - busy.
struct RankStats {
  int rank = 0;
  double busy = 0.0, idle = 0.0, first_start = 0.0, last_end = 0.0;
  /// Most (stage, microbatch) activations alive at once, each counted from
  /// its F until its B (or its W when the backward is split).
  int peak_activations = 0;
  /// The same in whole-rank units: peak_activations / stages_per_rank.
  double peak_rank_activations = 0.0;
};

struct SimResult {
  /// Empty when every rank reached the end of its list and every transfer
  /// completed; otherwise why not (bad actions, deadlock, mismatched pairs).
  std::vector<Diagnostic> problems;
  bool ok() const { return problems.empty(); }
  /// True when the plan had no SEND/RECV and data moved implicitly.
  bool compute_only = false;
  double makespan = 0.0;
  double bubble_fraction = 0.0;  ///< 1 - sum(busy) / (ranks x makespan)
  std::vector<RankStats> ranks;
  std::vector<std::vector<ActionTime>> times;  ///< parallel to plan.ranks
  std::vector<Transfer> transfers;             ///< ordered by (start, src)
};

/// Runs each rank's list in order on one compute stream per rank; SEND/RECV
/// are posted when the rank reaches them and complete per `options.transport`;
/// a compute waits for the values it consumes. A compute-only plan moves each
/// cross-rank value as soon as it is produced (+ transfer time), with no
/// transport model. Linear time; never hangs: a deadlock is a problem in the
/// result. Precondition: the plan is whole; else throws InputError.
SimResult simulate(const Plan& plan, const SimOptions& options = {});

}  // namespace pipeplan
