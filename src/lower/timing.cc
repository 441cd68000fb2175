#include "lower/timing.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "ir/deps.h"

namespace pipeplan::detail {

double ComputeCosts::of(const Action& a) const {
  switch (a.type) {
    case ActionType::F: return f;
    case ActionType::B: return b;
    case ActionType::I: return i;
    case ActionType::W: return w;
    case ActionType::OverlapFB: return f + b;
    default: return 0.0;
  }
}

namespace {

constexpr double kNotDone = -1.0;

// End times of F and of B/I per (stage, microbatch), -1 until done.
struct DoneTable {
  int stages = 0, mbs = 0;
  std::vector<double> f_end, bi_end;
  DoneTable(int s, int m)
      : stages(s), mbs(m), f_end(static_cast<std::size_t>(s) * m, kNotDone),
        bi_end(static_cast<std::size_t>(s) * m, kNotDone) {}
  bool in_range(int s, int mb) const { return s >= 0 && s < stages && mb >= 0 && mb < mbs; }
  std::size_t at(int s, int mb) const { return static_cast<std::size_t>(s) * mbs + mb; }
};

double end_of(const DoneTable& d, const deps::Value& v) {
  if (!d.in_range(v.stage, v.microbatch)) return kNotDone;
  const std::size_t k = d.at(v.stage, v.microbatch);
  return v.kind == deps::Kind::Forward ? d.f_end[k] : d.bi_end[k];
}

// Ready time of a compute action, or -1 when a producer has not run.
double ready_time(const DoneTable& d, const Action& a) {
  double t = 0.0;
  deps::for_each_input(a, d.stages, [&](const deps::Value& v, int) {
    const double e = t < 0 ? t : end_of(d, v);
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

Timing time_compute(const Plan& plan, const ComputeCosts& costs, bool with_end) {
  const PlanMeta& meta = plan.meta;
  const int n_ranks = static_cast<int>(plan.ranks.size());
  DoneTable done(meta.num_stages(), meta.num_microbatches);
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
      double e = s + costs.of(a);
      t.start[ru][pc[ru]] = s;
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
