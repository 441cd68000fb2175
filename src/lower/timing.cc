#include "lower/timing.h"

#include <algorithm>

#include "ir/deps.h"
#include "lower/producers.h"
#include "pipeplan/error.h"
#include "run/values.h"

namespace pipeplan::detail {

namespace {

std::string describe_wait(const run::ValueTimes& values, const Action& a) {
  auto name = [](ActionType t, int s, int mb) { return to_string(make(t, s, mb)); };
  switch (a.type) {
    case ActionType::F: return name(ActionType::F, a.stage - 1, a.microbatch);
    case ActionType::B:
    case ActionType::I:
      if (values.at({deps::Kind::Forward, a.stage, a.microbatch}) == run::kNotYet)
        return name(ActionType::F, a.stage, a.microbatch);
      return "the backward of stage " + std::to_string(a.stage + 1) + " microbatch " +
             std::to_string(a.microbatch);
    case ActionType::W: return name(ActionType::I, a.stage, a.microbatch);
    default: return "its producers";
  }
}

// time_compute() on the execution core: the compute-only model with the
// cost model's durations; every action gets the time its rank reaches it.
class ComputeTiming : public run::ComputeOnly<ComputeTiming> {
 public:
  static constexpr run::Order kOrder = run::Order::Queue;

  ComputeTiming(const Plan& plan, const CostModel& costs, TimingFields fields)
      : ComputeOnly(plan.meta),
        plan_(plan),
        values_(plan.meta, costs.transfer_time()),
        duration_(costs, plan.meta.num_stages()),
        with_start_(fields != TimingFields::End),
        with_end_(fields != TimingFields::Start) {}

  Timing time() {
    if (with_start_) t_.start.resize(plan_.ranks.size());
    if (with_end_) t_.end.resize(plan_.ranks.size());
    for (std::size_t r = 0; r < plan_.ranks.size(); ++r) {
      if (with_start_) t_.start[r].assign(plan_.ranks[r].size(), 0.0);
      if (with_end_) t_.end[r].assign(plan_.ranks[r].size(), 0.0);
    }
    start(plan_.ranks);
    run();
    for (int r = 0; r < num_ranks(); ++r) {
      const auto ru = static_cast<std::size_t>(r);
      if (pc(r) < plan_.ranks[ru].size()) {
        t_.complete = false;
        const Action& a = plan_.ranks[ru][pc(r)];
        if (!t_.stuck.empty()) t_.stuck += "; ";
        t_.stuck += "rank " + std::to_string(plan_.rank_ids[ru]) + " waits at " + to_string(a) +
                    " (index " + std::to_string(pc(r)) + ") for " + describe_wait(values_, a);
      }
    }
    return std::move(t_);
  }

 private:
  friend class run::Core<ComputeTiming>;
  friend class run::ComputeOnly<ComputeTiming>;

  double inputs(const Action& a) const { return values_.ready(a); }
  void produce(const Action& a, double end) { values_.produced(a, end); }
  double duration(const Action& a) const { return duration_(a); }
  void ran(int r, std::size_t i, const Action&, double start, double end) {
    if (with_start_) t_.start[static_cast<std::size_t>(r)][i] = start;
    if (with_end_) t_.end[static_cast<std::size_t>(r)][i] = end;
  }
  // SEND/RECV and pass-through actions take no time where the rank is.
  run::Step transfer(int r, std::size_t i, const Action& a) {
    ran(r, i, a, free_at(r), free_at(r));
    return run::Step::Next;
  }
  run::Step bookkeeping(int r, std::size_t i, const Action& a) { return transfer(r, i, a); }

  const Plan& plan_;
  run::ValueTimes values_;
  const Durations duration_;
  const bool with_start_, with_end_;
  Timing t_;
};

}  // namespace

Timing time_compute(const Plan& plan, const CostModel& costs, TimingFields fields) {
  return ComputeTiming(plan, costs, fields).time();
}

namespace {

// latest_starts() on the execution core: a run from the ends of the lists
// towards their starts. An action settles once its successor on its rank and
// the cross-rank consumers of what it makes have settled (same-rank
// consumers come later in the list, so they are bounded through the chain).
class LatestStarts : public run::Core<LatestStarts> {
 public:
  static constexpr run::Order kOrder = run::Order::Queue;
  static constexpr bool kBackward = true;

  LatestStarts(const Plan& plan, const CostModel& costs, const Timing& timing,
               const ProducerIndex& producers)
      : plan_(plan),
        producers_(producers),
        n_ranks_(plan.ranks.size()),
        S_(plan.meta.num_stages()),
        duration_(costs, S_),
        hop_after_(static_cast<std::size_t>(std::max(S_, 1)), 0.0),
        rank_of_(static_cast<std::size_t>(std::max(S_, 1)), 0) {
    for (std::size_t r = 0; r < plan.ranks.size(); ++r)
      for (double e : timing.end[r]) makespan_ = std::max(makespan_, e);
    const double hop = costs.transfer_time();
    for (int s = 0; s < S_; ++s) {
      rank_of_[static_cast<std::size_t>(s)] = static_cast<std::size_t>(plan.meta.rank_of(s));
      if (s + 1 < S_)
        hop_after_[static_cast<std::size_t>(s)] =
            plan.meta.rank_of(s) != plan.meta.rank_of(s + 1) ? hop : 0.0;
    }
  }

  std::vector<std::vector<double>> latest() {
    ls_.resize(plan_.ranks.size());
    for (std::size_t r = 0; r < plan_.ranks.size(); ++r) ls_[r].assign(plan_.ranks[r].size(), 0.0);
    start(plan_.ranks);
    run();
    return std::move(ls_);
  }

 private:
  friend class run::Core<LatestStarts>;

  // Every action settles alike, whatever its role: on entry.
  run::Step enter(int r, std::size_t i, const Action& a) { return settle(r, i, a); }

  void wake_stage(int stage) {
    if (stage < 0 || stage >= S_) return;
    const std::size_t r = rank_of_[static_cast<std::size_t>(stage)];
    if (r < n_ranks_) wake(static_cast<int>(r));
  }
  // The latest finish a produced value allows: its consumer's latest start
  // (the consumer of Forward(s) produces Forward(s+1), that of Grad(s)
  // produces Grad(s-1)) less the transfer; kNotDone while it is unsettled.
  double bound_by(int stage, std::int32_t consumer, double hop_to, double lf) const {
    if (consumer < 0) return lf;
    const std::size_t r = rank_of_[static_cast<std::size_t>(stage)];
    if (r >= n_ranks_ || static_cast<std::size_t>(consumer) >= ls_[r].size()) return lf;
    if (static_cast<std::size_t>(consumer) < pc(static_cast<int>(r))) return kNotDone;
    return std::min(lf, ls_[r][static_cast<std::size_t>(consumer)] - hop_to);
  }
  double after_forward(int s, int mb, double lf) const {
    if (s < 0 || s + 1 >= S_) return lf;
    return bound_by(s + 1, producers_.forward(s + 1, mb), hop_after_[static_cast<std::size_t>(s)],
                    lf);
  }
  double after_backward(int s, int mb, double lf) const {
    if (s <= 0 || s >= S_) return lf;
    return bound_by(s - 1, producers_.grad(s - 1, mb), hop_after_[static_cast<std::size_t>(s - 1)],
                    lf);
  }

  run::Step settle(int r, std::size_t i, const Action& a) {
    std::vector<double>& ls = ls_[static_cast<std::size_t>(r)];
    double lf = i + 1 < ls.size() ? ls[i + 1] : makespan_;
    if (a.type == ActionType::F || a.type == ActionType::OverlapFB)
      lf = after_forward(a.stage, a.microbatch, lf);
    if (lf != kNotDone && (a.type == ActionType::B || a.type == ActionType::I))
      lf = after_backward(a.stage, a.microbatch, lf);
    if (lf != kNotDone && a.type == ActionType::OverlapFB)
      lf = after_backward(a.sub_stage, a.sub_microbatch, lf);
    if (lf == kNotDone) return run::Step::Wait;  // woken when that consumer settles
    ls[i] = lf - duration_(a);
    if (a.type == ActionType::F || a.type == ActionType::OverlapFB) wake_stage(a.stage - 1);
    if (a.type == ActionType::B || a.type == ActionType::I) wake_stage(a.stage + 1);
    if (a.type == ActionType::OverlapFB) wake_stage(a.sub_stage + 1);
    return run::Step::Next;
  }

  static constexpr double kNotDone = -1.0;
  const Plan& plan_;
  const ProducerIndex& producers_;
  const std::size_t n_ranks_;
  const int S_;
  const Durations duration_;
  double makespan_ = 0.0;
  std::vector<double> hop_after_;  // stages s, s+1
  std::vector<std::size_t> rank_of_;
  std::vector<std::vector<double>> ls_;
};

}  // namespace

std::vector<std::vector<double>> latest_starts(const Plan& plan, const CostModel& costs,
                                               const Timing& timing,
                                               const ProducerIndex& producers) {
  return LatestStarts(plan, costs, timing, producers).latest();
}

void refuse_if_stuck(const Timing& timing) {
  if (timing.complete) return;
  const std::string why =
      "the compute order cannot complete (cyclic wait across ranks): " + timing.stuck;
  throw PlanRejected("lower: " + why, {Diagnostic{"compute-cycle", -1, -1, "", why}});
}

}  // namespace pipeplan::detail
