// Internal to src/search: the one tolerance and every tuning constant of the
// search, each with what it decides. Work limits are counts (plans x actions
// per plan), never seconds, so a result does not depend on the machine; the
// time limit only cuts work short.
#pragma once

#include <cstddef>

#include "search/memory.h"

namespace pipeplan::detail {

// The one tolerance: two times or memory sizes closer than this are equal.
constexpr double kEps = 1e-9;

// -- The clock (context.h) --

// Actions of a lowered plan per (stage, microbatch), at most: F, B (or I
// and W) and four SEND/RECV.
constexpr double kActionsPerCell = 7;
// What one candidate costs per action before any is measured: about a
// fifth of the 2-core development machine's (plan, lower, simulate, verify),
// so only work no machine finishes in time is refused up front.
constexpr double kFastSecondsPerAction = 1e-7;
// The share of the time limit held back for the memory decisions (step 3c)
// when memory actions are allowed: the phases before it stop earlier, so a
// loaded machine still decides memory where orders do not fit.
constexpr double kMemoryShare = 0.3;
// The share of the time limit the memory decisions leave to the finalists
// (step 4): they stop at 90% of the limit.
constexpr double kFinalShare = 0.1;

// -- Work limits shared by the phases --

// The fewest plans a local step may evaluate, however large the plan.
constexpr long long kLeastEvaluations = 100;

// The limits of one local step (local improvement, partition refinement,
// polish), wherever it runs: how many of the best orders it starts from, and
// what each start may spend.
struct StepLimits {
  std::size_t starts;  ///< the best (distinct) orders or plans it starts from
  long long work;      ///< plans evaluated x actions per plan, per start (0: no such limit)
  int rounds;          ///< boundary moves, per start (0: no such limit)
};

// -- Compute-only candidates (candidates.cc) --

// The partition refinement of the best list-scheduled seeds.
constexpr StepLimits kClimb{3, 0, 64};
// The local improvement of the best orders of the pool.
constexpr StepLimits kImprove{6, 8000000, 0};
// Split orders whose W passes are placed anew (the best of the pool).
constexpr std::size_t kRefillSeeds = 8;
// Of those, the best that the local improvement starts from too.
constexpr std::size_t kImproveRefilled = 2;
// How far ahead of a position the local improvement looks for actions to
// pull into it (improve.cc).
constexpr std::size_t kImproveWindow = 16;

// -- Finalists (finalists.cc, refine.cc) --

// How many of the best distinct candidates are lowered and verified.
constexpr std::size_t kFinalists = 6;
// The partition refinement of the fastest library plans that fit (their
// order and lowering kept).
constexpr StepLimits kLibraryRefine{2, 0, 48};

// -- The exact search (exact.cc) --

// The most branch-and-bound nodes visited (the time limit comes first).
constexpr long long kExactNodeBudget = 100'000'000;
// The largest shapes it is asked about: (stage, microbatch) pairs and layers.
constexpr int kTinyPairs = 16, kTinyLayers = 8;

// -- The memory decisions (memory_phase.cc, memory_polish.cc) --

// The budgets the list scheduler builds orders for: more memory than there
// is, which the memory actions then recover (x budget; 0: no limit).
constexpr double kVirtualBudgets[] = {1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 0.0};
// The budgets of the paced orders (GreedyKnobs::pace), as kVirtualBudgets.
constexpr double kPacedBudgets[] = {1.5, 0.0};
// The paces of those orders.
constexpr double kPaces[] = {1.0, 1.1, 1.2};
// The styles an order is fitted in: every order in the first that fits it,
// the best few distinct orders in all of them (each a candidate).
constexpr FitStyle kFitStyles[] = {
    {RecomputeRule::Latest, true, true}, {RecomputeRule::Cheapest, true, true},
    {RecomputeRule::Latest, false},      {RecomputeRule::Cheapest, false},
    {RecomputeRule::Latest, true},       {RecomputeRule::Cheapest, true}};
// How many of the best distinct orders are fitted in every style.
constexpr std::size_t kRestyled = 8;
// The styles deciding again after the pulls (FitStyle::retime), tried last.
constexpr FitStyle kRetimeStyles[] = {{RecomputeRule::Latest, true, false, true},
                                      {RecomputeRule::Cheapest, true, false, true}};
// How many of the best distinct orders are fitted in the retime styles.
constexpr std::size_t kRetimed = 8;
// How many of the best retimed candidates are polished (as kMemoryPolish).
constexpr std::size_t kRetimePolished = 1;
// The local improvement of the best distinct orders (half the search's own
// work: each improved order is fitted again).
constexpr StepLimits kMemoryImprove{4, 4000000, 0};
// The partition refinement of the best distinct orders, their memory
// decided again on each.
constexpr StepLimits kMemoryRefine{3, 0, 24};
// The polish of the best candidates with their memory actions in place.
constexpr StepLimits kMemoryPolish{8, 400000, 0};
// How far behind an idle stretch the polish looks for actions to pull into
// it (memory_polish.cc).
constexpr std::size_t kPolishWindow = 12;

}  // namespace pipeplan::detail
