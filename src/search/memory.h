// Internal to src/search: the memory decisions (docs/memory.md, docs/search.md).
// Given a compute order that may not fit the device budget, decide per
// (stage, microbatch) whether its activations are kept, offloaded to host
// (OFFLOAD after the forward, RELOAD ahead of the backward on the copy
// stream) or recomputed (RECOMPUTE right before the backward), so that every
// rank fits.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/costs.h"
#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"
#include "search/greedy.h"

namespace pipeplan::detail {

/// Which memory actions the search may use.
struct MemoryAllowed {
  bool recompute = true;
  bool offload = false;  ///< needs a host bandwidth
  bool any() const { return recompute || offload; }
};

struct MemoryFit {
  Plan plan;  ///< compute-only, with the memory actions inserted
  int recomputed = 0, offloaded = 0;
};

/// Decides the memory actions of `compute` (F, B, I and W only; none yet)
/// with `costs` (the stage costs: activation and input sizes, recompute and
/// copy times) on the times of its compute-only run: per rank, while device
/// memory exceeds `budget` at some moment, one (stage, microbatch) alive
/// then leaves the device: offloaded when both copies fit idle stretches of
/// the copy stream and its backward need not wait, else recomputed; the one
/// whose backward comes last first. The times ignore what the inserted
/// actions shift: the caller simulates the result. nullopt when some rank
/// cannot fit (or the order holds other actions).
std::optional<MemoryFit> fit_memory(const Plan& compute, const StageTable& table,
                                    const CostModel& costs, double budget, MemoryAllowed allowed);

/// A compute order whose memory the phase decides: a library schedule's, or
/// none (`order` empty) for the list scheduler to build one on `meta`.
struct MemorySeed {
  PlanMeta meta;       ///< with its partition
  SimOptions options;  ///< the stage costs of the partition, the copy stream
  Plan order;          ///< compute-only; empty ranks: list-schedule it
  std::string origin;
};

/// A compute-only plan with memory actions that fits the budget.
struct MemoryCandidate {
  Plan plan;
  double makespan = 0.0, peak = 0.0;  ///< the compute-only run's
  std::string origin;
};

/// The memory-decision phase: each seed's order (a library one, or the list
/// scheduler's at several budgets above `budget`, up to no limit, with its
/// knobs) gets its memory actions (fit_memory) and is simulated; what fits
/// `budget` comes back. `evaluations` counts the plans timed; `expired`
/// stops early.
std::vector<MemoryCandidate> memory_candidates(const std::vector<MemorySeed>& seeds, double budget,
                                               MemoryAllowed allowed,
                                               const std::function<bool()>& expired,
                                               int* evaluations);

}  // namespace pipeplan::detail
