// Exhaustive branch and bound for tiny shapes (see exact.h).
#include "search/exact.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>

#include "run/values.h"
#include "search/greedy.h"
#include "search/tuning.h"

namespace pipeplan::detail {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

class Exact {
 public:
  Exact(const PlanMeta& meta, const StageTable& t, double budget, double incumbent,
        long long* nodes, const std::function<bool()>& expired)
      : expired_(expired),
        meta_(meta),
        t_(t),
        budget_(budget),
        best_(incumbent),
        nodes_(nodes),
        S_(meta.num_stages()),
        m_(meta.num_microbatches),
        p_(meta.pp_degree),
        values_(meta, t.transfer) {
    const auto n = static_cast<std::size_t>(S_ * m_);
    split_.assign(n, 0);
    f_end_.assign(n, 0.0);
    b_end_.assign(n, 0.0);
    order_.resize(static_cast<std::size_t>(p_));
    next_.assign(static_cast<std::size_t>(S_) * 3, 0);
    owner_.resize(static_cast<std::size_t>(S_));
    for (int s = 0; s < S_; ++s) owner_[static_cast<std::size_t>(s)] = meta.rank_of(s);
    free_.assign(static_cast<std::size_t>(p_), 0.0);
    live_ = remaining_ = free_;
    for (int s = 0; s < S_; ++s)
      remaining_[static_cast<std::size_t>(owner_[static_cast<std::size_t>(s)])] +=
          m_ * (t.f[static_cast<std::size_t>(s)] + t.b[static_cast<std::size_t>(s)]);
  }

  /// False when the node budget or the time ran out.
  bool run() {
    dfs(0.0, 0, 0.0);
    return !out_of_nodes_;
  }
  double best() const { return best_; }
  /// The orders of the best schedule found, when it beat the incumbent.
  std::optional<Plan> best_plan() const {
    if (best_order_.empty()) return std::nullopt;
    Plan plan;
    plan.meta = meta_;
    plan.ranks = best_order_;
    for (int r = 0; r < p_; ++r) plan.rank_ids.push_back(r);
    return plan;
  }

 private:
  std::size_t at(int s, int mb) const { return static_cast<std::size_t>(s * m_ + mb); }
  int& next(int s, int kind) { return next_[static_cast<std::size_t>(s * 3 + kind)]; }

  void dfs(double last_start, int last_rank, double makespan) {
    if (out_of_nodes_) return;
    if (++*nodes_ > kExactNodeBudget || ((*nodes_ & 4095) == 0 && expired_())) {
      out_of_nodes_ = true;
      return;
    }
    double bound = makespan;
    bool left = false;
    for (int r = 0; r < p_; ++r) {
      const auto R = static_cast<std::size_t>(r);
      // Everything placed later starts at or after last_start (the order of
      // generation), so a rank idle now cannot use the time before it.
      if (remaining_[R] > kEps)
        bound = std::max(bound, std::max(free_[R], last_start) + remaining_[R]);
      left = left || remaining_[R] > kEps;
    }
    if (bound >= best_ - kEps || chain_bound(last_start) >= best_ - kEps) return;
    bool any = false;
    for (int s = 0; s < S_; ++s)
      any = any || next(s, 0) < m_ || next(s, 1) < m_ || pending_w(s) >= 0;
    if (!any) {
      best_ = makespan;  // bound < best_: strictly better
      best_order_ = order_;
      return;
    }
    (void)left;
    for (int s = 0; s < S_; ++s) {
      const int r = owner_[static_cast<std::size_t>(s)];
      const auto R = static_cast<std::size_t>(r);
      const auto k = static_cast<std::size_t>(s);
      // F
      if (int mb = next(s, 0); mb < m_ && live_[R] + t_.mem[k] <= budget_ + kEps) {
        const Action f = make(ActionType::F, s, mb);
        const double in = values_.ready(f);
        if (in != kNever) {
          const double start = std::max(free_[R], in);
          if (canonical(start, r, last_start, last_rank)) {
            const double end = start + t_.f[k], keep_free = free_[R];
            values_.produced(f, end), free_[R] = end, live_[R] += t_.mem[k];
            remaining_[R] -= t_.f[k], ++next(s, 0), f_end_[at(s, mb)] = end;
            order_[R].push_back(f);
            dfs(start, r, std::max(makespan, end));
            order_[R].pop_back();
            --next(s, 0), remaining_[R] += t_.f[k];
            live_[R] -= t_.mem[k], free_[R] = keep_free, values_.unproduce(f);
          }
        }
      }
      // B or I
      if (int mb = next(s, 1); mb < m_) {
        const double in = values_.ready(make(ActionType::B, s, mb));  // I reads the same
        if (in != kNever) {
          const double start = std::max(free_[R], in);
          if (canonical(start, r, last_start, last_rank)) {
            for (int split = 0; split < 2; ++split) {
              const double dur = split ? t_.i[k] : t_.b[k];
              const double end = start + dur, keep_free = free_[R];
              const Action bwd = make(split ? ActionType::I : ActionType::B, s, mb);
              values_.produced(bwd, end), free_[R] = end, remaining_[R] -= dur;
              split_[at(s, mb)] = static_cast<char>(split);
              if (!split) live_[R] -= t_.mem[k];
              ++next(s, 1), b_end_[at(s, mb)] = end;
              order_[R].push_back(bwd);
              dfs(start, r, std::max(makespan, end));
              order_[R].pop_back();
              --next(s, 1);
              if (!split) live_[R] += t_.mem[k];
              split_[at(s, mb)] = 0;
              remaining_[R] += dur, free_[R] = keep_free, values_.unproduce(bwd);
            }
          }
        }
      }
      // W of the oldest split backward (W runs in microbatch order per stage)
      if (int mb = pending_w(s); mb >= 0) {
        const double start = std::max(free_[R], values_.ready(make(ActionType::W, s, mb)));
        if (canonical(start, r, last_start, last_rank)) {
          const double end = start + t_.w[k], keep_free = free_[R];
          free_[R] = end, remaining_[R] -= t_.w[k], live_[R] -= t_.mem[k];
          split_[at(s, mb)] = 2;
          order_[R].push_back(make(ActionType::W, s, mb));
          dfs(start, r, std::max(makespan, end));
          order_[R].pop_back();
          split_[at(s, mb)] = 1;
          live_[R] += t_.mem[k], remaining_[R] += t_.w[k], free_[R] = keep_free;
        }
      }
    }
  }

  // A bound on every completion of this node, ignoring that ranks run one
  // action at a time except for what they run already: an action not yet
  // placed starts no earlier than the last start generated, its rank's free
  // time, its inputs' (earliest) ends plus the transfer between ranks, and
  // the end of its stage's previous microbatch of the same kind (same rank);
  // a backward takes at least I, and its stage's W still follows.
  double chain_bound(double last_start) {
    double bound = 0.0;
    const auto floor = [&](int s) {
      return std::max(last_start,
                      free_[static_cast<std::size_t>(owner_[static_cast<std::size_t>(s)])]);
    };
    const auto lag = [&](int a, int b) {
      return owner_[static_cast<std::size_t>(a)] == owner_[static_cast<std::size_t>(b)]
                 ? 0.0
                 : t_.transfer;
    };
    for (int s = 0; s < S_; ++s)
      for (int mb = next(s, 0); mb < m_; ++mb) {
        double start = floor(s);
        if (s > 0) start = std::max(start, f_end_[at(s - 1, mb)] + lag(s - 1, s));
        if (mb > 0) start = std::max(start, f_end_[at(s, mb - 1)]);
        f_end_[at(s, mb)] = start + t_.f[static_cast<std::size_t>(s)];
      }
    for (int s = S_ - 1; s >= 0; --s)
      for (int mb = next(s, 1); mb < m_; ++mb) {
        double start = std::max(floor(s), f_end_[at(s, mb)]);
        if (s + 1 < S_) start = std::max(start, b_end_[at(s + 1, mb)] + lag(s + 1, s));
        if (mb > 0) start = std::max(start, b_end_[at(s, mb - 1)]);
        b_end_[at(s, mb)] = start + t_.i[static_cast<std::size_t>(s)];
        const auto k = static_cast<std::size_t>(s);
        bound = std::max(bound, start + std::min(t_.b[k], t_.i[k] + t_.w[k]));
      }
    return bound;
  }

  // The oldest microbatch of stage s whose I ran and whose W did not; -1: none.
  int pending_w(int s) const {
    for (int mb = 0; mb < m_; ++mb)
      if (split_[at(s, mb)] == 1) return mb;
    return -1;
  }

  static bool canonical(double start, int rank, double last_start, int last_rank) {
    if (start > last_start + kEps) return true;
    return start > last_start - kEps && rank >= last_rank;
  }

  const std::function<bool()>& expired_;
  const PlanMeta& meta_;
  const StageTable& t_;
  double budget_, best_;
  long long* nodes_;
  int S_, m_, p_;
  bool out_of_nodes_ = false;
  run::ShapedValueTimes values_;
  std::vector<double> free_, live_, remaining_;
  std::vector<char> split_;
  // End times of placed F and backward actions (beyond them: chain_bound's
  // scratch), and the orders built so far.
  std::vector<double> f_end_, b_end_;
  std::vector<std::vector<Action>> order_, best_order_;
  std::vector<int> next_, owner_;
};

void compositions(int layers, int parts, Partition& cur, std::vector<Partition>& out) {
  if (parts == 1) {
    cur.push_back(layers);
    out.push_back(cur);
    cur.pop_back();
    return;
  }
  for (int k = 1; k <= layers - (parts - 1); ++k) {
    cur.push_back(k);
    compositions(layers - k, parts - 1, cur, out);
    cur.pop_back();
  }
}

}  // namespace

bool exact_is_tiny(const LayerProfile& profile, const SearchOptions& o) {
  return profile.size() <= static_cast<std::size_t>(kTinyLayers) &&
         o.pp_degree * o.num_microbatches * 2 <= kTinyPairs;
}

ExactResult exact_search(const LayerProfile& profile, const SearchOptions& o, double budget,
                         double search_value, const std::function<bool()>& expired, Plan* plan) {
  ExactResult res;
  res.search_value = search_value;
  double best = search_value;
  bool complete = true;
  CostModel comm;
  comm.comm_latency = o.comm.comm_latency;
  comm.comm_bandwidth = o.comm.comm_bandwidth;
  comm.transfer_bytes = o.comm.transfer_bytes;
  for (int mapping = 0; mapping < 2 && complete; ++mapping)
    for (int v = mapping == 0 ? 1 : 2; v <= o.max_stages_per_rank && complete; ++v) {
      const int S = o.pp_degree * v;
      if (S * o.num_microbatches > kTinyPairs || static_cast<std::size_t>(S) > profile.size())
        continue;
      // The V mapping only up to the largest v the search may use for it.
      if (mapping == 1 && o.max_v_stages_per_rank > 0 && v > o.max_v_stages_per_rank) continue;
      res.max_stages_per_rank = std::max(res.max_stages_per_rank, v);
      std::vector<Partition> parts;
      Partition cur;
      compositions(static_cast<int>(profile.size()), S, cur, parts);
      for (const Partition& part : parts) {
        PlanMeta meta;
        meta.pp_degree = o.pp_degree;
        meta.num_microbatches = o.num_microbatches;
        meta.stages_per_rank = v;
        meta.mapping = mapping == 0 ? StageMapping::Loop : StageMapping::V;
        const StageTable table = stage_table(stage_costs(profile, part, comm), S);
        Exact e(meta, table, budget, best, &res.nodes, expired);
        complete = e.run();
        if (e.best() < best - kEps) {
          best = e.best();
          if (plan) {
            *plan = *e.best_plan();
            plan->meta.schedule = "search";
            plan->meta.partition = part;
          }
        }
        if (!complete) break;
      }
    }
  res.complete = complete;
  res.optimum = best;
  return res;
}

}  // namespace pipeplan::detail
