// Internal to src/search: the memory decisions (docs/memory.md, docs/search.md).
// Given a compute order that may not fit the device budget, decide per
// (stage, microbatch) whether its activations are kept, offloaded to host
// (OFFLOAD after the forward, RELOAD ahead of the backward on the copy
// stream) or recomputed (RECOMPUTE right before the backward), so that every
// rank fits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/costs.h"
#include "pipeplan/ir.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"
#include "search/greedy.h"

namespace pipeplan::detail {

struct SearchContext;  // context.h

/// Which memory actions the search may use.
struct MemoryAllowed {
  bool recompute = true;
  bool offload = false;  ///< needs a host bandwidth
  bool any() const { return recompute || offload; }
};

/// Which recomputed (stage, microbatch) the fit picks first among those alive
/// where the budget is exceeded.
enum class RecomputeRule : std::uint8_t {
  Latest,    ///< the one whose backward comes last (frees the longest stretch)
  Cheapest,  ///< the least time added to the rank per unit of memory freed
};

/// How fit_memory decides.
struct FitStyle {
  RecomputeRule rule = RecomputeRule::Latest;
  /// A recomputed (stage, microbatch) of a split backward has its W moved
  /// right after its I, so it frees its activation at once instead of
  /// holding it until a deferred W.
  bool pull_w = false;
  /// A RECOMPUTE goes before the action ahead of its backward (when that is
  /// not its own F), so it runs while the rank waits for the gradient
  /// instead of delaying the backward once the gradient is there.
  bool early = false;
  /// With pull_w: offloaded (stage, microbatch)s have their W pulled too,
  /// and when Ws were pulled, the decisions are made again on the pulled
  /// order's own times (the copies were placed on times the pulls moved).
  bool retime = false;
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
/// the copy stream and its backward need not wait, else recomputed, the one
/// `style.rule` picks first. The times ignore what the inserted actions shift:
/// the caller simulates the result. nullopt when some rank cannot fit (or the
/// order holds other actions).
std::optional<MemoryFit> fit_memory(const Plan& compute, const StageTable& table,
                                    const CostModel& costs, double budget, MemoryAllowed allowed,
                                    FitStyle style = {});

/// A compute order whose memory the phase decides: a library schedule's, or
/// none (`order` empty) for the list scheduler to build one on `meta`.
struct MemorySeed {
  PlanMeta meta;       ///< with its partition
  SimOptions options;  ///< the stage costs of the partition, the copy stream
  Plan order;          ///< compute-only; empty ranks: list-schedule it
  std::string origin;
};

/// What recomputing adds to a rank whose one stage holds `activation` (and
/// keeps `input` when recomputed, taking `recompute` to run back) on a
/// 1F1B-like order (ZB-H1, 1F1B at v = 1) with `in_flight` microbatches
/// alive at once, m in all: one recomputed and being run back, the most it
/// can keep whole within `budget`, the rest at their input. 0 when all fit
/// whole; infinite when even that does not fit.
double recompute_tax(double activation, double input, double recompute, int in_flight, int m,
                     double budget);

/// The partition at v = 1 that minimises the largest rank's work (m x (F +
/// B)) plus its recompute_tax, rank r holding p - r microbatches at once.
/// nullopt when none fits, or when the problem is too large to solve so.
std::optional<Partition> recompute_balanced(const LayerProfile& profile, int p, int m,
                                            double budget);

/// A compute-only plan with memory actions that fits the budget.
struct MemoryCandidate {
  Plan plan;
  double makespan = 0.0, peak = 0.0;  ///< the compute-only run's
  std::string origin;
  double finish = 0.0;  ///< the sum of the ranks' finish times (a tie-break)
};

/// The memory-decision phase (memory_phase.cc): each seed's order (a library
/// one, or the list scheduler's at several budgets above `ctx.budget`, up to no
/// limit, with its knobs) gets its memory actions (fit_memory) and is
/// simulated; the best few orders are also fitted in the other FitStyles,
/// improved locally and refitted, have their partition refined on
/// `profile` (null: the partition is fixed) with their memory decided again
/// on each, and the best few plans are polished with their memory actions in
/// place (memory_polish.h). What fits `ctx.budget` comes back. `ctx`
/// counts the plans timed; its clock stops early.
std::vector<MemoryCandidate> memory_candidates(const std::vector<MemorySeed>& seeds,
                                               const LayerProfile* profile, MemoryAllowed allowed,
                                               SearchContext& ctx);

}  // namespace pipeplan::detail
