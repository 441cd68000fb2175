// Internal to src/search: what the steps of one search share: the memory
// budget, the clock, the count of plans evaluated and the cost model. One
// value, passed by reference to every step that reads or counts them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <limits>

#include "pipeplan/costs.h"
#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"
#include "search/tuning.h"

namespace pipeplan::detail {

/// The highest peak device memory over the ranks of a run.
inline double max_peak(const SimResult& r) {
  double peak = 0.0;
  for (const RankStats& s : r.ranks) peak = std::max(peak, s.peak_memory);
  return peak;
}

/// A per-rank device memory budget, and what fits it (within kEps).
struct Budget {
  double limit = std::numeric_limits<double>::infinity();
  bool fits(double peak) const { return peak <= limit + kEps; }
  /// Every rank of `r` within the budget.
  bool fits(const SimResult& r) const { return fits(max_peak(r)); }
};

/// The time limit, and what work of n actions is expected to take (the rate
/// of the largest candidate measured so far): a candidate that would end past
/// the limit is not started, so the limit holds within the work the search
/// must do to answer at all.
class Clock {
 public:
  explicit Clock(double limit)
      : limit_(limit), phase_limit_(limit), start_(std::chrono::steady_clock::now()) {}
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  bool expired() const { return elapsed() > phase_limit_; }
  /// Keeps the last `share` of the limit for a later phase: until release(),
  /// expired() and affords() answer for the rest.
  void hold_back(double share) { phase_limit_ = limit_ * (1.0 - share); }
  void release() { phase_limit_ = limit_; }
  /// Whether work on `actions` actions should end within the limit (false
  /// marks the search time-limited).
  bool affords(double actions) {
    const bool fits = elapsed() + actions * rate_ <= phase_limit_;
    limited_ = limited_ || !fits;
    return fits;
  }
  /// The limit passed, or work was left out to keep it.
  bool limited() const { return limited_ || expired(); }
  /// `actions` actions of candidate work took `seconds`.
  void observe(double actions, double seconds) {
    if (actions < largest_) return;
    largest_ = actions;
    rate_ = std::max(kFastSecondsPerAction, seconds / std::max(1.0, actions));
  }

 private:
  double limit_, phase_limit_;
  std::chrono::steady_clock::time_point start_;
  double rate_ = kFastSecondsPerAction;
  double largest_ = 0;
  bool limited_ = false;
};

/// One search's shared state: the budget every candidate must fit, the
/// clock, the plans built, timed or simulated so far
/// (SearchResult::candidates) and the cost model of the transfers.
struct SearchContext {
  explicit SearchContext(double time_limit) : clock(time_limit) {}
  Budget budget;
  Clock clock;
  int evaluations = 0;
  CostModel comm;
  bool expired() const { return clock.expired(); }
};

/// The actions of `plan`, plus one (a plan's size as the work limits count it).
inline std::size_t actions_of(const Plan& plan) {
  std::size_t n = 1;
  for (const auto& list : plan.ranks) n += list.size();
  return n;
}

/// The plans a local step on `plan` may evaluate within `work` (plans x
/// actions per plan), kLeastEvaluations at least: a count, not a time, so
/// the result is deterministic.
inline long long evaluations_within(long long work, const Plan& plan) {
  return std::max<long long>(kLeastEvaluations, work / static_cast<long long>(actions_of(plan)));
}

}  // namespace pipeplan::detail
