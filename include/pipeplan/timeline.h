// The one timeline type: when each action of a plan ran, simulated or
// measured. simulate() produces one per run; a measured trace (trace.h)
// yields one per step. The SVG, Chrome-trace and text renderers draw it.
#pragma once

#include <vector>

namespace pipeplan {

/// When an action ran. Compute (RECOMPUTE included): its run interval.
/// OFFLOAD/RELOAD: their run on the rank's copy stream. SEND/RECV: from the
/// moment the rank posted it to its completion. Pass-through: zero-length
/// at post.
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
  /// Most activation memory on the device at once: the same count weighted
  /// by each stage's CostModel::memory (equal to peak_activations without a
  /// profile). With memory actions, over time (docs/memory.md): a
  /// recomputed (stage, microbatch) keeps its input from its F and its
  /// activation from its RECOMPUTE until its backward ends; an offloaded one
  /// leaves the device when its OFFLOAD ends and is back from its RELOAD's
  /// start.
  double peak_memory = 0.0;
  /// Most memory OFFLOADs hold on the host at once (from an OFFLOAD's start
  /// to its RELOAD's end); 0 without memory actions.
  double peak_host_memory = 0.0;
  /// Time the rank's copy stream is busy with OFFLOAD/RELOAD.
  double copy_busy = 0.0;
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
