// The one timeline type: when each action of a plan ran, simulated or
// measured. simulate() produces one per run; a measured trace (trace.h)
// yields one per step. The SVG, Chrome-trace and text renderers draw it.
#pragma once

#include <vector>

namespace pipeplan {

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
  /// Most activation memory alive at once: the same count weighted by each
  /// stage's CostModel::memory (equal to peak_activations without a profile).
  double peak_memory = 0.0;
  /// Most receive buffers held at once: RECVs posted whose consumer has not
  /// started (a prefetched receive holds its buffer from its post).
  int peak_recv_buffers = 0;
};

/// When every action of one plan ran, and the values that moved. Times are
/// in the run's unit: cost units for a simulation, milliseconds for a
/// measured step (and for a simulation with calibrated costs).
struct Timeline {
  double makespan = 0.0;
  double bubble_fraction = 0.0;  ///< 1 - sum(busy) / (ranks x makespan)
  std::vector<RankStats> ranks;
  std::vector<std::vector<ActionTime>> times;  ///< parallel to plan.ranks
  std::vector<Transfer> transfers;             ///< ordered by (start, src)
};

}  // namespace pipeplan
