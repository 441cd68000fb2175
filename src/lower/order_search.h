// Internal: better pair orders for the latency-hiding lowering where its
// deadline run misses the eager bound (latency.cc): a local search over
// swaps of adjacent transfers on a pair, and an exact branch and bound over
// every pair's order. Both compare orders by the pair-stream run's makespan
// (stream_run.h), which is the simulated rendezvous makespan of the plan
// lowered with those orders.
#pragma once

#include <cstddef>
#include <functional>

#include "lower/stream_run.h"
#include "pipeplan/lower.h"

namespace pipeplan::detail {

/// Orders a search returns, with their makespan and what was shown.
struct SearchedOrders {
  StreamOrders orders;
  double makespan = 0.0;
  /// improve_orders: no single swap of adjacent transfers on a pair
  /// shortens the makespan (a local optimum). exact_orders: no pair orders
  /// at all do (the optimum).
  bool proved = false;
  std::size_t work = 0;  ///< actions and transfers the runs went through
  LowerReport::Orders verdict = LowerReport::Orders::Unsearched;  ///< search_orders()
};

/// The lowering's search: the deadline run's `orders` (makespan
/// `makespan`) where they reach the eager `bound`; else the local search's
/// and, on small plans (all plans up to a larger size with `exact`), the
/// exact search's from there. Where the local search runs, it starts from
/// the faster of `orders` and `other()` (another order of every pair's
/// transfers, or empty when there is none; called only then). Work is
/// bounded by size (order_search.cc's limits); `verdict` says what was shown.
SearchedOrders search_orders(const PairTransfers& in, const CostModel& costs, StreamOrders orders,
                             double makespan, double bound, bool exact,
                             const std::function<StreamOrders()>& other);

/// First-improvement local search from `orders`: a swap of two adjacent transfers X, Y on a pair can shorten
/// the makespan only if every critical path enters Y from X through the
/// stream (Y waited for X, not for its producer), so each round tries just
/// the swaps on one critical path of the current run and keeps the first
/// that shortens it. Stops at a local optimum (proved) or before `budget`
/// units of work (one unit per action and transfer a run goes through).
SearchedOrders improve_orders(const PairTransfers& in, const CostModel& costs, StreamOrders orders,
                              std::size_t budget);

/// Branch and bound over the pair orders (active schedules: whenever a
/// stream decides, any transfer released before the first one could arrive
/// may go next), from the incumbent `orders` (makespan `makespan`), each
/// partial order bounded by the run where the transfers still undecided
/// only wait for their stream's last decided one, and by each stream
/// carrying them back to back. Proved when the search completed within
/// `budget` units of work; otherwise the best orders found.
SearchedOrders exact_orders(const PairTransfers& in, const CostModel& costs, StreamOrders orders,
                            double makespan, std::size_t budget);

}  // namespace pipeplan::detail
