#include "lower/timing.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "ir/deps.h"
#include "lower/producers.h"
#include "pipeplan/error.h"

namespace pipeplan::detail {

namespace {

constexpr double kNotDone = -1.0;

// End times of F and of B/I per (stage, microbatch), -1 until done.
// `hop` is the transfer time, paid where neighbouring stages sit on
// different ranks (`cross[s]`: stages s and s+1 do).
struct DoneTable {
  int stages = 0, mbs = 0;
  std::vector<double> f_end, bi_end;
  std::vector<char> cross;
  double hop = 0.0;
  DoneTable(const PlanMeta& meta, double transfer)
      : stages(meta.num_stages()),
        mbs(meta.num_microbatches),
        f_end(static_cast<std::size_t>(stages) * mbs, kNotDone),
        bi_end(static_cast<std::size_t>(stages) * mbs, kNotDone),
        cross(static_cast<std::size_t>(std::max(stages, 1)), 0),
        hop(transfer) {
    for (int s = 0; s + 1 < stages; ++s)
      cross[static_cast<std::size_t>(s)] = meta.rank_of(s) != meta.rank_of(s + 1);
  }
  // When a value produced at `t` by stage s is usable by its neighbour
  // (stage s+1 for a forward value, s-1 for a gradient): `boundary` is the
  // lower of the two stages.
  double arrive(double t, int boundary) const {
    return t < 0 ? t : t + (cross[static_cast<std::size_t>(boundary)] ? hop : 0.0);
  }
  bool in_range(int s, int mb) const { return s >= 0 && s < stages && mb >= 0 && mb < mbs; }
  std::size_t at(int s, int mb) const { return static_cast<std::size_t>(s) * mbs + mb; }
};

// When value `v` is usable by an action of stage `reader`, or -1: a value
// crossing to another rank arrives one transfer after its producer ends.
double end_of(const DoneTable& d, const deps::Value& v, int reader) {
  if (!d.in_range(v.stage, v.microbatch)) return kNotDone;
  const std::size_t k = d.at(v.stage, v.microbatch);
  const double t = v.kind == deps::Kind::Forward ? d.f_end[k] : d.bi_end[k];
  return v.stage == reader ? t : d.arrive(t, std::min(v.stage, reader));
}

// Ready time of a compute action, or -1 when a producer has not run.
double ready_time(const DoneTable& d, const Action& a) {
  double t = 0.0;
  deps::for_each_input(a, d.stages, [&](const deps::Value& v, int reader) {
    const double e = t < 0 ? t : end_of(d, v, reader);
    t = e < 0 ? kNotDone : std::max(t, e);
  });
  return t;
}

std::string describe_wait(const DoneTable& d, const Action& a) {
  auto name = [](ActionType t, int s, int mb) { return to_string(make(t, s, mb)); };
  switch (a.type) {
    case ActionType::F: return name(ActionType::F, a.stage - 1, a.microbatch);
    case ActionType::B:
    case ActionType::I:
      if (d.in_range(a.stage, a.microbatch) && d.f_end[d.at(a.stage, a.microbatch)] < 0)
        return name(ActionType::F, a.stage, a.microbatch);
      return "the backward of stage " + std::to_string(a.stage + 1) + " microbatch " +
             std::to_string(a.microbatch);
    case ActionType::W: return name(ActionType::I, a.stage, a.microbatch);
    default: return "its producers";
  }
}

}  // namespace

Timing time_compute(const Plan& plan, const CostModel& costs, TimingFields fields) {
  const bool with_start = fields != TimingFields::End, with_end = fields != TimingFields::Start;
  const PlanMeta& meta = plan.meta;
  const int n_ranks = static_cast<int>(plan.ranks.size());
  DoneTable done(meta, costs.transfer_time());
  const Durations duration(costs, meta.num_stages());
  Timing t;
  if (with_start) t.start.resize(plan.ranks.size());
  if (with_end) t.end.resize(plan.ranks.size());
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    if (with_start) t.start[r].assign(plan.ranks[r].size(), 0.0);
    if (with_end) t.end[r].assign(plan.ranks[r].size(), 0.0);
  }
  std::vector<std::size_t> pc(plan.ranks.size(), 0);
  std::vector<double> free_at(plan.ranks.size(), 0.0);
  std::vector<char> queued(plan.ranks.size(), 1);
  std::deque<int> work;
  for (int r = 0; r < n_ranks; ++r) work.push_back(r);

  auto wake = [&](int stage) {
    if (stage < 0 || stage >= meta.num_stages()) return;
    int r = meta.rank_of(stage);
    if (r < n_ranks && !queued[static_cast<std::size_t>(r)]) {
      queued[static_cast<std::size_t>(r)] = 1;
      work.push_back(r);
    }
  };

  while (!work.empty()) {
    const int r = work.front();
    work.pop_front();
    const auto ru = static_cast<std::size_t>(r);
    queued[ru] = 0;
    const auto& list = plan.ranks[ru];
    while (pc[ru] < list.size()) {
      const Action& a = list[pc[ru]];
      double ready = is_compute(a.type) ? ready_time(done, a) : 0.0;
      if (ready < 0) break;  // woken again when a producer finishes
      double s = std::max(free_at[ru], ready);
      double e = s + duration(a);
      if (with_start) t.start[ru][pc[ru]] = s;
      if (with_end) t.end[ru][pc[ru]] = e;
      free_at[ru] = e;
      deps::for_each_output(a, [&](const deps::Value& v) {
        if (done.in_range(v.stage, v.microbatch)) {
          const std::size_t k = done.at(v.stage, v.microbatch);
          (v.kind == deps::Kind::Forward ? done.f_end : done.bi_end)[k] = e;
        }
        wake(deps::consumer_stage(v));
      });
      ++pc[ru];
    }
  }
  for (int r = 0; r < n_ranks; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    if (pc[ru] < plan.ranks[ru].size()) {
      t.complete = false;
      const Action& a = plan.ranks[ru][pc[ru]];
      if (!t.stuck.empty()) t.stuck += "; ";
      t.stuck += "rank " + std::to_string(plan.rank_ids[ru]) + " waits at " + to_string(a) +
                 " (index " + std::to_string(pc[ru]) + ") for " + describe_wait(done, a);
    }
  }
  return t;
}

}  // namespace pipeplan::detail

namespace pipeplan::detail {

std::vector<std::vector<double>> latest_starts(const Plan& plan, const CostModel& costs,
                                               const Timing& timing,
                                               const ProducerIndex& producers) {
  const PlanMeta& meta = plan.meta;
  const int S = meta.num_stages();
  const std::size_t n_ranks = plan.ranks.size();
  double makespan = 0.0;
  for (std::size_t r = 0; r < n_ranks; ++r)
    for (double e : timing.end[r]) makespan = std::max(makespan, e);
  const double hop = costs.transfer_time();
  std::vector<double> hop_after(static_cast<std::size_t>(std::max(S, 1)), 0.0);  // stages s, s+1
  std::vector<std::size_t> rank_of(static_cast<std::size_t>(std::max(S, 1)), 0);
  for (int s = 0; s < S; ++s) {
    rank_of[static_cast<std::size_t>(s)] = static_cast<std::size_t>(meta.rank_of(s));
    if (s + 1 < S)
      hop_after[static_cast<std::size_t>(s)] = meta.rank_of(s) != meta.rank_of(s + 1) ? hop : 0.0;
  }
  const Durations duration(costs, S);

  std::vector<std::vector<double>> ls(n_ranks);
  for (std::size_t r = 0; r < n_ranks; ++r) ls[r].assign(plan.ranks[r].size(), 0.0);
  std::vector<std::size_t> left(n_ranks);  // actions not yet settled: [0, left)
  for (std::size_t r = 0; r < n_ranks; ++r) left[r] = plan.ranks[r].size();
  std::vector<char> queued(n_ranks, 1);
  std::deque<std::size_t> work;
  for (std::size_t r = 0; r < n_ranks; ++r) work.push_back(r);
  auto wake = [&](int stage) {
    if (stage < 0 || stage >= S) return;
    const std::size_t r = rank_of[static_cast<std::size_t>(stage)];
    if (r < n_ranks && !queued[r]) {
      queued[r] = 1;
      work.push_back(r);
    }
  };
  // The latest finish a produced value allows: its consumer's latest start
  // (the consumer of Forward(s) produces Forward(s+1), that of Grad(s)
  // produces Grad(s-1)) less the transfer; kNotDone while it is unsettled.
  auto bound_by = [&](int stage, std::int32_t consumer, double hop_to, double lf) {
    if (consumer < 0) return lf;
    const std::size_t r = rank_of[static_cast<std::size_t>(stage)];
    if (r >= n_ranks || static_cast<std::size_t>(consumer) >= ls[r].size()) return lf;
    if (static_cast<std::size_t>(consumer) < left[r]) return kNotDone;
    return std::min(lf, ls[r][static_cast<std::size_t>(consumer)] - hop_to);
  };
  auto after_forward = [&](int s, int mb, double lf) {
    if (s < 0 || s + 1 >= S) return lf;
    return bound_by(s + 1, producers.forward(s + 1, mb), hop_after[static_cast<std::size_t>(s)],
                    lf);
  };
  auto after_backward = [&](int s, int mb, double lf) {
    if (s <= 0 || s >= S) return lf;
    return bound_by(s - 1, producers.grad(s - 1, mb), hop_after[static_cast<std::size_t>(s - 1)],
                    lf);
  };
  while (!work.empty()) {
    const std::size_t r = work.front();
    work.pop_front();
    queued[r] = 0;
    const auto& list = plan.ranks[r];
    while (left[r] > 0) {
      const std::size_t i = left[r] - 1;
      const Action& a = list[i];
      double lf = i + 1 < list.size() ? ls[r][i + 1] : makespan;
      // Same-rank consumers come later in the list, so they are settled
      // and bounded through the chain above; cross-rank ones are looked up.
      if (a.type == ActionType::F || a.type == ActionType::OverlapFB)
        lf = after_forward(a.stage, a.microbatch, lf);
      if (lf != kNotDone && (a.type == ActionType::B || a.type == ActionType::I))
        lf = after_backward(a.stage, a.microbatch, lf);
      if (lf != kNotDone && a.type == ActionType::OverlapFB)
        lf = after_backward(a.sub_stage, a.sub_microbatch, lf);
      if (lf == kNotDone) break;  // woken when that consumer settles
      ls[r][i] = lf - duration(a);
      --left[r];
      if (a.type == ActionType::F || a.type == ActionType::OverlapFB) wake(a.stage - 1);
      if (a.type == ActionType::B || a.type == ActionType::I) wake(a.stage + 1);
      if (a.type == ActionType::OverlapFB) wake(a.sub_stage + 1);
    }
  }
  return ls;
}

void refuse_if_stuck(const Timing& timing) {
  if (timing.complete) return;
  const std::string why =
      "the compute order cannot complete (cyclic wait across ranks): " + timing.stuck;
  throw PlanRejected("lower: " + why, {Diagnostic{"compute-cycle", -1, -1, "", why}});
}

}  // namespace pipeplan::detail
