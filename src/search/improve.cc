// Local improvement of per-rank compute orders (improve.h). Times follow the
// compute-only simulator exactly, as the list scheduler's do: each order is
// timed on the execution core (run/values.h).
#include "search/improve.h"

#include <algorithm>

#include "run/values.h"

namespace pipeplan::detail {
namespace {

double duration(const Action& a, const StageTable& t) {
  const auto s = static_cast<std::size_t>(a.stage);
  switch (a.type) {
    case ActionType::F: return t.f[s];
    case ActionType::B: return t.b[s];
    case ActionType::I: return t.i[s];
    default: return t.w[s];
  }
}

bool is_plain_compute(ActionType t) {
  return t == ActionType::F || t == ActionType::B || t == ActionType::I || t == ActionType::W;
}

// The timing of compute-only orders of F, B, I and W on the execution core,
// in sweeps over the ranks (the order the earliness sums are taken in);
// one per search, reused for every order it times.
class OrderTiming : public run::ComputeOnly<OrderTiming> {
 public:
  static constexpr run::Order kOrder = run::Order::Sweep;

  OrderTiming(const PlanMeta& meta, const StageTable& t) : ComputeOnly(meta), t_(t) {}

  // The times of `ranks`; `values` holds when each value was produced
  // afterwards. `out` and `values` are overwritten (their storage is reused).
  void time(const std::vector<std::vector<Action>>& ranks, run::ShapedValueTimes& values,
            OrderTimes& out) {
    values.reset();
    values_ = &values;
    const std::size_t p = ranks.size();
    out.ok = false;
    out.makespan = out.peak = 0.0;
    out.start.resize(p);
    rows_.resize(p);
    for (std::size_t r = 0; r < p; ++r) {
      out.start[r].resize(ranks[r].size());
      rows_[r] = out.start[r].data();
    }
    live_.assign(p, 0.0);
    earliness_ = peak_ = 0.0;
    start(ranks);
    run();
    out.earliness = earliness_;
    out.peak = peak_;
    out.finish.resize(p);
    for (std::size_t r = 0; r < p; ++r) out.finish[r] = free_at(static_cast<int>(r));
    for (std::size_t r = 0; r < p; ++r)
      if (pc(static_cast<int>(r)) < ranks[r].size()) return;  // deadlock: ok stays false
    for (std::size_t r = 0; r < p; ++r) {
      out.makespan = std::max(out.makespan, out.finish[r]);
      out.earliness += out.finish[r];
    }
    std::sort(out.finish.begin(), out.finish.end(), std::greater<double>());
    out.ok = true;
  }

 private:
  friend class run::Core<OrderTiming>;
  friend class run::ComputeOnly<OrderTiming>;

  double inputs(const Action& a) const { return values_->ready(a); }
  void produce(const Action& a, double end) { values_->produced(a, end); }
  double duration(const Action& a) const { return pipeplan::detail::duration(a, t_); }
  void ran(int r, std::size_t i, const Action& a, double start, double end) {
    const auto ru = static_cast<std::size_t>(r);
    rows_[ru][i] = start;
    if (a.type != ActionType::W) earliness_ += end;
    const double mem = t_.mem[static_cast<std::size_t>(a.stage)];
    if (a.type == ActionType::F) {
      live_[ru] += mem;
      peak_ = std::max(peak_, live_[ru]);
    } else if (a.type == ActionType::B || a.type == ActionType::W) {
      live_[ru] -= mem;
    }
  }

  const StageTable& t_;
  run::ShapedValueTimes* values_ = nullptr;
  std::vector<double*> rows_;  // each rank's start times
  std::vector<double> live_;
  double earliness_ = 0.0, peak_ = 0.0;
};

// Lexicographic: the ranks' finish times, latest first, then earliness.
bool better(const OrderTimes& a, const OrderTimes& b) {
  for (std::size_t r = 0; r < a.finish.size(); ++r) {
    if (a.finish[r] < b.finish[r] - kEps) return true;
    if (a.finish[r] > b.finish[r] + kEps) return false;
  }
  return a.earliness < b.earliness - kEps;
}

}  // namespace

std::optional<OrderTimes> time_orders(const Plan& compute, const StageTable& table) {
  for (const auto& list : compute.ranks)
    for (const Action& a : list)
      if (!is_plain_compute(a.type)) return std::nullopt;
  run::ShapedValueTimes values(compute.meta, table.transfer);
  OrderTimes out;
  OrderTiming(compute.meta, table).time(compute.ranks, values, out);
  return out;
}

std::optional<Improved> improve_orders(const Plan& compute, const StageTable& table, Budget budget,
                                       long long max_evaluations, SearchContext& ctx) {
  for (const auto& list : compute.ranks)
    for (const Action& a : list)
      if (!is_plain_compute(a.type)) return std::nullopt;
  const PlanMeta& meta = compute.meta;
  std::vector<std::vector<Action>> ranks = compute.ranks;
  run::ShapedValueTimes cur_values(meta, table.transfer), trial_values(meta, table.transfer);
  OrderTimes cur, trial;
  OrderTiming timing(meta, table);
  timing.time(ranks, cur_values, cur);
  if (!cur.ok || !budget.fits(cur.peak)) return std::nullopt;
  long long used = 0;
  int moves = 0;
  bool improved = true;
  while (improved && used < max_evaluations && !ctx.expired()) {
    improved = false;
    for (std::size_t r = 0; r < ranks.size() && used < max_evaluations; ++r) {
      auto& list = ranks[r];
      for (std::size_t i = 0; i + 1 < list.size() && used < max_evaluations; ++i) {
        const double i_end = cur.start[r][i] + duration(list[i], table);
        for (std::size_t j = i + 1; j < list.size() && j <= i + kImproveWindow; ++j) {
          const Action a = list[j];
          // Never past an action of its own stage and kind (order per stage).
          bool blocked = false;
          for (std::size_t k = i; k < j && !blocked; ++k)
            blocked = list[k].stage == a.stage && list[k].type == a.type;
          if (blocked) break;
          // Only worth it if `a` could start before the action at i ends.
          if (!(cur_values.ready(a) < i_end - kEps)) continue;
          if (ctx.expired()) {  // a huge plan: every timing is costly
            used = max_evaluations;
            break;
          }
          std::rotate(list.begin() + static_cast<std::ptrdiff_t>(i),
                      list.begin() + static_cast<std::ptrdiff_t>(j),
                      list.begin() + static_cast<std::ptrdiff_t>(j + 1));
          timing.time(ranks, trial_values, trial);
          ++used;
          ++ctx.evaluations;
          if (trial.ok && budget.fits(trial.peak) && better(trial, cur)) {
            std::swap(cur, trial);
            std::swap(cur_values, trial_values);
            ++moves;
            improved = true;
            break;
          }
          std::rotate(list.begin() + static_cast<std::ptrdiff_t>(i),
                      list.begin() + static_cast<std::ptrdiff_t>(i + 1),
                      list.begin() + static_cast<std::ptrdiff_t>(j + 1));
          if (used >= max_evaluations) break;
        }
      }
    }
  }
  if (moves == 0) return std::nullopt;
  Improved out;
  out.plan = compute;
  out.plan.ranks = std::move(ranks);
  out.makespan = cur.makespan;
  out.peak = cur.peak;
  out.moves = moves;
  return out;
}

std::optional<Improved> improve_within(const Plan& compute, const StageTable& table, Budget budget,
                                       long long work, SearchContext& ctx) {
  return improve_orders(compute, table, budget, evaluations_within(work, compute), ctx);
}

}  // namespace pipeplan::detail
