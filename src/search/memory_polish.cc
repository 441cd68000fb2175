// Local improvement of plans with memory actions (memory_polish.h).
#include "search/memory_polish.h"

#include <algorithm>

namespace pipeplan::detail {
namespace {

struct Score {
  bool ok = false;
  double makespan = 0.0, finish = 0.0, peak = 0.0;
  std::vector<std::vector<ActionTime>> times;
};

bool is_copy(const Action& a) {
  return a.type == ActionType::Offload || a.type == ActionType::Reload;
}

bool better(const Score& a, const Score& b) {
  if (a.makespan < b.makespan - kEps) return true;
  return a.makespan <= b.makespan + kEps && a.finish < b.finish - kEps;
}

class Polisher {
 public:
  Polisher(const Plan& plan, const SimOptions& options, long long max_evaluations,
           SearchContext& ctx)
      : plan_(plan), options_(options), left_(max_evaluations), ctx_(ctx) {
    cur_ = score();
  }

  Polished run() {
    Polished out;
    if (!cur_.ok) {
      out.plan = plan_;
      return out;
    }
    bool again = true;
    while (again && !stop()) {
      again = drop_recomputes();
      again = pull_into_gaps() || again;
    }
    out.makespan = cur_.makespan, out.peak = cur_.peak, out.moves = moves_;
    out.plan = std::move(plan_);
    return out;
  }

 private:
  bool stop() const { return left_ <= 0 || ctx_.expired(); }

  Score score() {
    --left_;
    ++ctx_.evaluations;
    Score s;
    SimResult r = simulate(plan_, options_);
    if (!r.ok()) return s;
    s.peak = max_peak(r);
    if (!ctx_.budget.fits(s.peak)) return s;
    for (const RankStats& st : r.ranks) s.finish += st.last_end;
    s.ok = true;
    s.makespan = r.makespan;
    s.times = std::move(r.times);
    return s;
  }

  // Each RECOMPUTE the budget does not need (the makespan not growing) goes.
  bool drop_recomputes() {
    bool any = false;
    for (auto& list : plan_.ranks)
      for (std::size_t i = 0; i < list.size() && !stop(); ++i) {
        if (list[i].type != ActionType::Recompute) continue;
        const Action a = list[i];
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
        Score s = score();
        if (s.ok && s.makespan <= cur_.makespan + kEps) {
          cur_ = std::move(s);
          ++moves_, any = true;
          --i;
          continue;
        }
        list.insert(list.begin() + static_cast<std::ptrdiff_t>(i), a);
      }
    return any;
  }

  // An action moves into the idle stretch before position i of its rank.
  bool pull_into_gaps() {
    bool any = false;
    for (std::size_t r = 0; r < plan_.ranks.size(); ++r) {
      auto& list = plan_.ranks[r];
      double compute_end = 0.0;  // the end of the last compute before i
      for (std::size_t i = 0; i + 1 < list.size() && !stop(); ++i) {
        if (is_copy(list[i])) continue;
        const auto& t = cur_.times[r];
        const bool idle = t[i].start > compute_end + kEps;
        compute_end = t[i].end;
        if (!idle) continue;
        for (std::size_t j = i + 1; j < list.size() && j <= i + kPolishWindow && !stop(); ++j) {
          const Action a = list[j];
          if (is_copy(a)) continue;
          bool blocked = false;
          for (std::size_t k = i; k < j && !blocked; ++k)
            blocked = (list[k].stage == a.stage && list[k].type == a.type) ||
                      (list[k].stage == a.stage && list[k].microbatch == a.microbatch);
          if (blocked) break;
          std::rotate(list.begin() + static_cast<std::ptrdiff_t>(i),
                      list.begin() + static_cast<std::ptrdiff_t>(j),
                      list.begin() + static_cast<std::ptrdiff_t>(j + 1));
          Score s = score();
          if (s.ok && better(s, cur_)) {
            cur_ = std::move(s);
            ++moves_, any = true;
            compute_end = cur_.times[r][i].end;
            break;
          }
          std::rotate(list.begin() + static_cast<std::ptrdiff_t>(i),
                      list.begin() + static_cast<std::ptrdiff_t>(i + 1),
                      list.begin() + static_cast<std::ptrdiff_t>(j + 1));
        }
      }
    }
    return any;
  }

  Plan plan_;
  const SimOptions& options_;
  long long left_;
  SearchContext& ctx_;
  Score cur_;
  int moves_ = 0;
};

}  // namespace

Polished polish_memory(const Plan& plan, const SimOptions& options, long long max_evaluations,
                       SearchContext& ctx) {
  return Polisher(plan, options, max_evaluations, ctx).run();
}

}  // namespace pipeplan::detail
