#include "lower/timing.h"

#include <algorithm>
#include <deque>
#include <limits>

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
      : stages(meta.num_stages()), mbs(meta.num_microbatches),
        f_end(static_cast<std::size_t>(stages) * mbs, kNotDone),
        bi_end(static_cast<std::size_t>(stages) * mbs, kNotDone),
        cross(static_cast<std::size_t>(std::max(stages, 1)), 0), hop(transfer) {
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

// Time at which the inputs of a forward of (s, mb) are ready, or -1.
double forward_ready(const DoneTable& d, int s, int mb) {
  if (s == 0) return 0.0;
  return d.in_range(s - 1, mb) ? d.arrive(d.f_end[d.at(s - 1, mb)], s - 1) : kNotDone;
}

// Time at which the inputs of a backward (B or I) of (s, mb) are ready, or -1.
double backward_ready(const DoneTable& d, int s, int mb) {
  if (!d.in_range(s, mb)) return kNotDone;
  double t = d.f_end[d.at(s, mb)];
  if (t < 0) return kNotDone;
  if (s + 1 < d.stages) {
    double g = d.arrive(d.bi_end[d.at(s + 1, mb)], s);
    if (g < 0) return kNotDone;
    t = std::max(t, g);
  }
  return t;
}

// Ready time of a compute action, or -1 when a producer has not run.
double ready_time(const DoneTable& d, const Action& a) {
  switch (a.type) {
    case ActionType::F: return forward_ready(d, a.stage, a.microbatch);
    case ActionType::B:
    case ActionType::I: return backward_ready(d, a.stage, a.microbatch);
    case ActionType::W:
      return d.in_range(a.stage, a.microbatch) ? d.bi_end[d.at(a.stage, a.microbatch)] : kNotDone;
    case ActionType::OverlapFB: {
      double f = forward_ready(d, a.stage, a.microbatch);
      double b = backward_ready(d, a.sub_stage, a.sub_microbatch);
      return (f < 0 || b < 0) ? kNotDone : std::max(f, b);
    }
    default: return 0.0;
  }
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

Timing time_compute(const Plan& plan, const CostModel& costs, bool with_end) {
  const PlanMeta& meta = plan.meta;
  const int n_ranks = static_cast<int>(plan.ranks.size());
  DoneTable done(meta, costs.transfer_time());
  Timing t;
  t.start.resize(plan.ranks.size());
  if (with_end) t.end.resize(plan.ranks.size());
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    t.start[r].assign(plan.ranks[r].size(), 0.0);
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
      double e = s + costs.duration(a);
      t.start[ru][pc[ru]] = s;
      if (with_end) t.end[ru][pc[ru]] = e;
      free_at[ru] = e;
      auto finish_f = [&](int st, int mb) {
        if (done.in_range(st, mb)) done.f_end[done.at(st, mb)] = e;
        wake(st + 1);
      };
      auto finish_bi = [&](int st, int mb) {
        if (done.in_range(st, mb)) done.bi_end[done.at(st, mb)] = e;
        wake(st - 1);
      };
      if (a.type == ActionType::F) finish_f(a.stage, a.microbatch);
      if (a.type == ActionType::B || a.type == ActionType::I) finish_bi(a.stage, a.microbatch);
      if (a.type == ActionType::OverlapFB) {
        finish_f(a.stage, a.microbatch);
        finish_bi(a.sub_stage, a.sub_microbatch);
      }
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
