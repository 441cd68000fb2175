// Internal to src/search: local improvement of a compute-only plan's
// per-rank orders (pulling ready work into idle time) under a memory budget.
#pragma once

#include <optional>

#include "pipeplan/ir.h"
#include "search/context.h"
#include "search/greedy.h"

namespace pipeplan::detail {

/// Times of a compute-only plan of F, B, I and W in the simulator's
/// compute-only model (run/values.h), and each rank's peak activation memory.
struct OrderTimes {
  bool ok = false;  ///< false: an input is never produced (deadlock)
  double makespan = 0.0;
  /// Tie-break toward earlier work: the sum of every F, B and I end time
  /// (what other ranks wait for) plus each rank's finish time.
  double earliness = 0.0;
  double peak = 0.0;                       ///< max over ranks
  std::vector<double> finish;              ///< each rank's finish time, latest first
  std::vector<std::vector<double>> start;  ///< per rank, per position
};
/// nullopt when the plan holds actions other than F, B, I and W.
std::optional<OrderTimes> time_orders(const Plan& compute, const StageTable& table);

struct Improved {
  Plan plan;  ///< compute-only
  double makespan = 0.0, peak = 0.0;
  int moves = 0;  ///< accepted moves
};

/// Hill-climbs `compute`'s per-rank orders: an action moves to an earlier
/// position on its rank when its inputs are there before the action now in
/// that position ends (it can fill idle time or overtake a deferred W), never
/// past an action of its own stage and kind; the move is kept when the
/// makespan drops, or stays and the earliness drops, and every rank's peak
/// stays within `budget`. At most `max_evaluations` plans are timed (a fixed
/// number, so the result is deterministic), each counted in `ctx`; its clock
/// stops early. nullopt when no move was kept or the plan has other actions.
std::optional<Improved> improve_orders(const Plan& compute, const StageTable& table, Budget budget,
                                       long long max_evaluations, SearchContext& ctx);

/// improve_orders() with as many evaluations as `work` (plans timed x actions
/// per plan) allows on `compute` (evaluations_within): how every phase of
/// the search improves an order, each with its own work limit.
std::optional<Improved> improve_within(const Plan& compute, const StageTable& table, Budget budget,
                                       long long work, SearchContext& ctx);

}  // namespace pipeplan::detail
