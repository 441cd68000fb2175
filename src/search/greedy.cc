// The list scheduler of the search (see greedy.h). Times follow the
// simulator's compute-only model exactly: a compute starts when its rank is
// free and its inputs are there (run/values.h: ir/deps.h's rules, a cross-rank
// value arriving `transfer` after it was produced); so the makespan it
// reports is the one simulate() gives the compute-only plan.
#include "search/greedy.h"

#include <algorithm>
#include <limits>

#include "run/values.h"
#include "search/improve.h"
#include "search/tuning.h"

namespace pipeplan::detail {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

enum Kind : int { kF = 0, kBwd = 1, kW = 2 };

struct Local {  // one stage of a rank: the next microbatch of each kind
  int stage = 0;
  int next[3] = {0, 0, 0};
};

}  // namespace

StageTable stage_table(const CostModel& c, int num_stages) {
  StageTable t;
  const auto n = static_cast<std::size_t>(num_stages);
  t.f.resize(n), t.b.resize(n), t.i.resize(n), t.w.resize(n), t.mem.resize(n);
  // With microbatches of different lengths (docs/lengths.md) the heuristics
  // order by the mean microbatch's durations and budget by the largest
  // activation; the plans they build are then timed exactly by simulate().
  const int n_mb = std::max<int>(1, static_cast<int>(c.length_ratio.size()));
  for (int s = 0; s < num_stages; ++s) {
    const auto k = static_cast<std::size_t>(s);
    for (int mb = 0; mb < n_mb; ++mb) {
      t.f[k] += c.duration(make(ActionType::F, s, mb)) / n_mb;
      t.b[k] += c.duration(make(ActionType::B, s, mb)) / n_mb;
      t.i[k] += c.duration(make(ActionType::I, s, mb)) / n_mb;
      t.w[k] += c.duration(make(ActionType::W, s, mb)) / n_mb;
      t.mem[k] = std::max(t.mem[k], c.memory(s, mb));
    }
  }
  double transfer = 0.0;
  for (int mb = 0; mb < n_mb; ++mb) transfer += c.transfer_time(mb) / n_mb;
  t.transfer = c.length_ratio.empty() ? c.transfer_time() : transfer;
  return t;
}

std::optional<GreedyOutcome> list_schedule(const PlanMeta& meta, const StageTable& t,
                                           double memory_limit, const GreedyKnobs& knobs) {
  const int p = meta.pp_degree, m = meta.num_microbatches, S = meta.num_stages();
  run::ShapedValueTimes values(meta, t.transfer);
  std::vector<int> owner(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s) owner[static_cast<std::size_t>(s)] = meta.rank_of(s);
  const auto type_of = [&knobs](int kind) {
    return kind == kF    ? ActionType::F
           : kind == kW  ? ActionType::W
           : knobs.split ? ActionType::I
                         : ActionType::B;
  };

  std::vector<std::vector<Local>> locals(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    for (int s : meta.stages_of(r))
      locals[static_cast<std::size_t>(r)].push_back(Local{s, {0, 0, 0}});
  std::vector<double> free_at(static_cast<std::size_t>(p), 0.0), live(free_at), peak(free_at);
  // Reservations: memory promised to admitted microbatches' later local
  // stages, and what one microbatch needs on all of a rank's stages.
  std::vector<double> reserved(free_at), footprint(free_at);
  std::vector<int> first_stage(static_cast<std::size_t>(p), 0);
  for (int r = 0; r < p; ++r) {
    const auto R = static_cast<std::size_t>(r);
    first_stage[R] = locals[R].front().stage;
    for (const Local& l : locals[R]) {
      footprint[R] += t.mem[static_cast<std::size_t>(l.stage)];
      first_stage[R] = std::min(first_stage[R], l.stage);
    }
  }
  // Memory the rank must have free to run F of `stage` now.
  auto f_need = [&](std::size_t R, int stage) {
    if (!knobs.reserve) return live[R] + t.mem[static_cast<std::size_t>(stage)];
    return stage == first_stage[R] ? live[R] + reserved[R] + footprint[R] : 0.0;
  };
  std::vector<std::size_t> left(static_cast<std::size_t>(p), 0);
  const int kinds = knobs.split ? 3 : 2;
  for (int r = 0; r < p; ++r)
    left[static_cast<std::size_t>(r)] = locals[static_cast<std::size_t>(r)].size() *
                                        static_cast<std::size_t>(m) *
                                        static_cast<std::size_t>(kinds);
  // Paced admission (GreedyKnobs::pace): the busiest rank's work per microbatch.
  double period = 0.0;
  if (knobs.pace > 0) {
    std::vector<double> work(static_cast<std::size_t>(p), 0.0);
    for (int s = 0; s < S; ++s) {
      const auto k = static_cast<std::size_t>(s);
      work[static_cast<std::size_t>(owner[k])] += t.f[k] + t.b[k];
    }
    period = knobs.pace * *std::max_element(work.begin(), work.end());
  }
  const double fwd_limit = memory_limit * knobs.memory_scale + kEps;
  const double hard_limit = memory_limit + kEps;

  GreedyOutcome out;
  out.plan.meta = meta;
  out.plan.rank_ids.resize(static_cast<std::size_t>(p));
  out.plan.ranks.resize(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    out.plan.rank_ids[static_cast<std::size_t>(r)] = r;
    out.plan.ranks[static_cast<std::size_t>(r)].reserve(left[static_cast<std::size_t>(r)]);
  }

  // When (stage, kind)'s next microbatch could start; kNever: not yet known
  // or nothing left.
  auto ready = [&](const Local& l, int kind) -> double {
    const int mb = l.next[kind];
    if (mb >= m) return kNever;
    const double at = values.ready(make(type_of(kind), l.stage, mb));
    if (kind != kF || l.stage != 0 || period <= 0 || at == kNever) return at;
    return std::max(at, (mb - knobs.burst) * period);
  };

  struct Choice {
    double time = kNever;
    int local = -1, kind = -1;
  };
  // The rank's next decision: its time and what it runs then.
  auto decide = [&](int r) -> Choice {
    const auto R = static_cast<std::size_t>(r);
    double earliest = kNever;
    struct Cand {
      double t;
      int local, kind, mb, stage;
    };
    Cand cands[64];
    int n = 0;
    std::vector<Cand> many;
    const auto& ls = locals[R];
    for (int li = 0; li < static_cast<int>(ls.size()); ++li)
      for (int kind = 0; kind < kinds; ++kind) {
        const double tr = ready(ls[static_cast<std::size_t>(li)], kind);
        if (tr == kNever) continue;
        if (kind == kF && f_need(R, ls[static_cast<std::size_t>(li)].stage) > hard_limit) continue;
        const Cand c{tr, li, kind, ls[static_cast<std::size_t>(li)].next[kind],
                     ls[static_cast<std::size_t>(li)].stage};
        if (n < 64) cands[n++] = c;
        else many.push_back(c);
        earliest = std::min(earliest, tr);
      }
    if (earliest == kNever) return {};
    const double now = std::max(free_at[R], earliest);
    Choice best;
    // Rank of a ready candidate: lower is more urgent.
    auto urgency = [&](const Cand& c) -> std::pair<int, long long> {
      int cls;
      const bool f_fits = f_need(R, c.stage) <= fwd_limit;
      if (c.kind == kBwd) cls = knobs.forward_first ? 1 : 0;
      else if (c.kind == kF) cls = f_fits ? (knobs.forward_first ? 0 : 1) : 3;
      else cls = 2;
      // Oldest microbatch first; among equals the deeper stage (finishes it).
      return {cls, static_cast<long long>(c.mb) * (S + 1) + (S - c.stage)};
    };
    std::pair<int, long long> best_key{99, 0};
    auto consider = [&](const Cand& c) {
      if (c.t > now + kEps) return;
      const auto k = urgency(c);
      if (k < best_key) best_key = k, best = Choice{now, c.local, c.kind};
    };
    for (int k = 0; k < n; ++k) consider(cands[k]);
    for (const Cand& c : many) consider(c);
    return best;
  };

  std::size_t remaining = 0;
  for (std::size_t x : left) remaining += x;
  std::vector<Choice> choice(static_cast<std::size_t>(p));
  std::vector<char> stale(static_cast<std::size_t>(p), 1);
  while (remaining > 0) {
    int pick = -1;
    for (int r = 0; r < p; ++r) {
      const auto R = static_cast<std::size_t>(r);
      if (left[R] == 0) continue;
      if (stale[R]) choice[R] = decide(r), stale[R] = 0;
      if (choice[R].local < 0) continue;
      if (pick < 0 || choice[R].time < choice[static_cast<std::size_t>(pick)].time - kEps) pick = r;
    }
    if (pick < 0) return std::nullopt;  // every rank waits: the budget starves a forward
    const auto R = static_cast<std::size_t>(pick);
    const Choice c = choice[R];
    Local& l = locals[R][static_cast<std::size_t>(c.local)];
    const int s = l.stage, mb = l.next[c.kind]++;
    const auto k = static_cast<std::size_t>(s);
    const ActionType type = type_of(c.kind);
    const double dur = c.kind == kF   ? t.f[k]
                       : c.kind == kW ? t.w[k]
                       : knobs.split  ? t.i[k]
                                      : t.b[k];
    const double end = c.time + dur;
    free_at[R] = end;
    out.makespan = std::max(out.makespan, end);
    values.produced(make(type, s, mb), end);
    if (c.kind == kF) {
      if (knobs.reserve) reserved[R] += s == first_stage[R] ? footprint[R] - t.mem[k] : -t.mem[k];
      live[R] += t.mem[k];
      peak[R] = std::max(peak[R], live[R]);
    } else if (c.kind == kBwd) {
      if (!knobs.split) live[R] -= t.mem[k];
    } else {
      live[R] -= t.mem[k];
    }
    out.plan.ranks[R].push_back(make(type, s, mb));
    --left[R];
    --remaining;
    // Finishing work changes what the neighbours of this stage may run.
    stale[R] = 1;
    if (s > 0) stale[static_cast<std::size_t>(owner[k - 1])] = 1;
    if (s + 1 < S) stale[static_cast<std::size_t>(owner[k + 1])] = 1;
  }
  for (double x : peak) out.peak = std::max(out.peak, x);
  if (period > 0) {
    // A paced forward the scheduler held back while its rank idled starts
    // earlier in the plan's own times (nothing in a plan waits for a
    // clock): report those.
    const std::optional<OrderTimes> times = time_orders(out.plan, t);
    if (!times || !times->ok) return std::nullopt;
    out.makespan = times->makespan;
    out.peak = times->peak;
  }
  return out;
}

}  // namespace pipeplan::detail
