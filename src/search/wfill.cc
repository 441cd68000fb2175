// W re-placement of the search (wfill.h). Times follow the compute-only
// simulator (run/values.h), as the list scheduler's do.
#include "search/wfill.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "run/values.h"
#include "search/tuning.h"

namespace pipeplan::detail {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

struct Rank {
  std::vector<Action> spine;  // F, B and I in their order
  std::size_t next = 0;
  std::deque<Action> pending;  // W whose I ran, oldest first
  double free = 0.0, live = 0.0, peak = 0.0;
  std::size_t left = 0;
};

}  // namespace

std::optional<GreedyOutcome> refill_weights(const Plan& compute, const StageTable& t, double budget,
                                            double slack) {
  const PlanMeta& meta = compute.meta;
  const std::size_t p = compute.ranks.size();
  run::ShapedValueTimes values(meta, t.transfer);
  std::vector<Rank> ranks(p);
  for (std::size_t r = 0; r < p; ++r)
    for (const Action& a : compute.ranks[r]) {
      if (a.type != ActionType::F && a.type != ActionType::B && a.type != ActionType::I &&
          a.type != ActionType::W)
        return std::nullopt;
      if (a.type != ActionType::W) ranks[r].spine.push_back(a);
      ++ranks[r].left;
    }
  GreedyOutcome out;
  out.plan.meta = meta;
  out.plan.rank_ids = compute.rank_ids;
  out.plan.ranks.resize(p);
  const auto dur = [&t](const Action& a) {
    const auto s = static_cast<std::size_t>(a.stage);
    return a.type == ActionType::F   ? t.f[s]
           : a.type == ActionType::B ? t.b[s]
           : a.type == ActionType::I ? t.i[s]
                                     : t.w[s];
  };
  const auto run_action = [&](std::size_t r, const Action& a, double start) {
    Rank& k = ranks[r];
    const double end = start + dur(a);
    const double mem = t.mem[static_cast<std::size_t>(a.stage)];
    k.free = end;
    if (a.type == ActionType::F) k.live += mem, k.peak = std::max(k.peak, k.live);
    if (a.type == ActionType::B || a.type == ActionType::W) k.live -= mem;
    if (a.type == ActionType::I) k.pending.push_back(make(ActionType::W, a.stage, a.microbatch));
    values.produced(a, end);
    out.makespan = std::max(out.makespan, end);
    out.plan.ranks[r].push_back(a);
    --k.left;
  };
  // A rank's next step: run its oldest W now, or its next action at `when`;
  // blocked while that action's input is not produced yet.
  struct Step {
    bool w = false, blocked = false;
    double when = kNever;
  };
  const auto step_of = [&](const Rank& k) {
    Step s;
    if (k.next >= k.spine.size()) return Step{true, false, k.free};
    const Action& a = k.spine[k.next];
    const double in = values.ready(a);
    if (!k.pending.empty()) {
      const double w_end = k.free + dur(k.pending.front());
      const bool tight = a.type == ActionType::F &&
                         k.live + t.mem[static_cast<std::size_t>(a.stage)] > budget + kEps;
      if (tight || (in != kNever && in + slack >= w_end - kEps)) return Step{true, false, k.free};
    }
    if (in == kNever) return Step{false, true, k.free};
    s.when = std::max(k.free, in);
    return s;
  };
  for (;;) {
    std::size_t pick = p, stuck = p;
    Step best;
    for (std::size_t r = 0; r < p; ++r) {
      if (ranks[r].left == 0) continue;
      const Step s = step_of(ranks[r]);
      if (s.blocked) {
        if (!ranks[r].pending.empty() && (stuck == p || ranks[r].free < ranks[stuck].free))
          stuck = r;
        continue;
      }
      if (pick == p || s.when < best.when - kEps) pick = r, best = s;
    }
    if (pick == p && stuck == p) break;
    if (pick == p) pick = stuck, best = Step{true, false, ranks[stuck].free};
    Rank& k = ranks[pick];
    if (best.w) {
      const Action w = k.pending.front();
      k.pending.pop_front();
      run_action(pick, w, k.free);
    } else {
      run_action(pick, k.spine[k.next++], best.when);
    }
  }
  for (const Rank& k : ranks) {
    if (k.left > 0) return std::nullopt;  // an input never came: the order deadlocks
    out.peak = std::max(out.peak, k.peak);
  }
  return out;
}

}  // namespace pipeplan::detail
