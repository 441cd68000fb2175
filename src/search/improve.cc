// Local improvement of per-rank compute orders (improve.h). Times follow the
// compute-only simulator exactly, as the list scheduler's do (values.h).
#include "search/improve.h"

#include <algorithm>
#include <functional>

#include "search/values.h"

namespace pipeplan::detail {
namespace {

constexpr double kEps = 1e-9;
// How far ahead of a position the actions pulled into it are looked for.
constexpr std::size_t kWindow = 16;

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

// The times of `ranks` (compute-only, F/B/I/W only); values hold when each
// value was produced afterwards.
OrderTimes time_ranks(const std::vector<std::vector<Action>>& ranks,
                      const StageTable& t, ValueTimes& values) {
  OrderTimes out;
  const std::size_t p = ranks.size();
  out.start.resize(p);
  std::vector<std::size_t> pos(p, 0);
  std::vector<double> free_at(p, 0.0), live(p, 0.0);
  for (std::size_t r = 0; r < p; ++r) out.start[r].assign(ranks[r].size(), 0.0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (std::size_t r = 0; r < p; ++r) {
      const auto& list = ranks[r];
      while (pos[r] < list.size()) {
        const Action& a = list[pos[r]];
        const double ready = values.ready(a);
        if (ready == kNotYet) break;
        const double start = std::max(free_at[r], ready);
        const double end = start + duration(a, t);
        values.produced(a, end);
        out.start[r][pos[r]] = start;
        free_at[r] = end;
        if (a.type != ActionType::W) out.earliness += end;
        const double mem = t.mem[static_cast<std::size_t>(a.stage)];
        if (a.type == ActionType::F) {
          live[r] += mem;
          out.peak = std::max(out.peak, live[r]);
        } else if (a.type == ActionType::B || a.type == ActionType::W) {
          live[r] -= mem;
        }
        ++pos[r];
        progress = true;
      }
    }
  }
  for (std::size_t r = 0; r < p; ++r)
    if (pos[r] < ranks[r].size()) return out;  // deadlock: ok stays false
  for (std::size_t r = 0; r < p; ++r) {
    out.makespan = std::max(out.makespan, free_at[r]);
    out.earliness += free_at[r];
  }
  out.finish = free_at;
  std::sort(out.finish.begin(), out.finish.end(), std::greater<double>());
  out.ok = true;
  return out;
}

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
  ValueTimes values(compute.meta, table.transfer);
  return time_ranks(compute.ranks, table, values);
}

std::optional<Improved> improve_orders(const Plan& compute, const StageTable& table, double budget,
                                       long long max_evaluations,
                                       const std::function<bool()>& expired, int* evaluations) {
  for (const auto& list : compute.ranks)
    for (const Action& a : list)
      if (!is_plain_compute(a.type)) return std::nullopt;
  const PlanMeta& meta = compute.meta;
  std::vector<std::vector<Action>> ranks = compute.ranks;
  ValueTimes values(meta, table.transfer);
  OrderTimes cur = time_ranks(ranks, table, values);
  if (!cur.ok || cur.peak > budget + kEps) return std::nullopt;
  ValueTimes cur_values = values;
  long long used = 0;
  int moves = 0;
  bool improved = true;
  while (improved && used < max_evaluations && !expired()) {
    improved = false;
    for (std::size_t r = 0; r < ranks.size() && used < max_evaluations; ++r) {
      auto& list = ranks[r];
      for (std::size_t i = 0; i + 1 < list.size() && used < max_evaluations; ++i) {
        const double i_end = cur.start[r][i] + duration(list[i], table);
        for (std::size_t j = i + 1; j < list.size() && j <= i + kWindow; ++j) {
          const Action a = list[j];
          // Never past an action of its own stage and kind (order per stage).
          bool blocked = false;
          for (std::size_t k = i; k < j && !blocked; ++k)
            blocked = list[k].stage == a.stage && list[k].type == a.type;
          if (blocked) break;
          // Only worth it if `a` could start before the action at i ends.
          if (!(cur_values.ready(a) < i_end - kEps)) continue;
          if (expired()) {  // a huge plan: every timing is costly
            used = max_evaluations;
            break;
          }
          std::rotate(list.begin() + static_cast<std::ptrdiff_t>(i),
                      list.begin() + static_cast<std::ptrdiff_t>(j),
                      list.begin() + static_cast<std::ptrdiff_t>(j + 1));
          ValueTimes trial_values(meta, table.transfer);
          OrderTimes trial = time_ranks(ranks, table, trial_values);
          ++used;
          if (evaluations) ++*evaluations;
          if (trial.ok && trial.peak <= budget + kEps && better(trial, cur)) {
            cur = std::move(trial);
            cur_values = std::move(trial_values);
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

}  // namespace pipeplan::detail
