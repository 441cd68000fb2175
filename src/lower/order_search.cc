// The local search and the exact search over pair orders (order_search.h).
//
// Why only swaps on a critical path: in the pair-stream run, swapping
// adjacent X, Y on a pair (X first) moves Y to where X started or to Y's
// release, and X after Y. Along a critical path that does not enter Y from
// X through the stream, no start gets earlier (its nodes wait for the same
// things, or X moved later), so that path still spans the makespan. A swap
// that shortens the makespan therefore lies on every critical path, in
// particular on the one traced: a round that tries those and finds none
// better has proved a local optimum.
#include "lower/order_search.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

namespace pipeplan::detail {
namespace {

// One unit of work per action and per transfer a run goes through.
std::size_t run_units(const PairTransfers& in) {
  std::size_t n = in.n_transfers();
  for (const auto& list : in.plan->ranks) n += list.size();
  return n;
}

// How much the lowering searches, in units of work (run_units: a run of the
// whole plan costs one unit per action and transfer). By default a plan of
// up to kLocalUnits units gets the local search, up to kLocalWork units of
// it, and one of up to kExactUnits also the exact search, up to kExactWork;
// LowerMode::Exact raises every limit. Each limit is a constant, so the
// lowering stays linear: a plan past a size limit gets no search of that
// kind, and no search runs past its work limit.
struct Limits {
  std::size_t local_units, local_work, exact_units, exact_work;
};
constexpr Limits kDefaultLimits{std::size_t{1} << 15, std::size_t{1} << 21, std::size_t{1} << 15,
                                std::size_t{1} << 22};
constexpr Limits kExactLimits{std::size_t{1} << 20, std::size_t{1} << 24, std::size_t{1} << 16,
                              std::size_t{1} << 28};

// Relative tolerance of "shorter": sums of the same durations in another
// order may differ in their last bits.
bool shorter(double a, double b) { return a < b - 1e-9 * std::max(1.0, b); }

// ---- the local search --------------------------------------------------

// A swap of the transfers at positions k and k + 1 of pair p's order.
struct Swap {
  std::uint32_t pair;
  std::size_t k;
};

// The swaps on one critical path of `run` (the chain of tight waits back
// from the compute that ends last), earliest first: every transfer on the
// path that waited for the one before it on its stream.
std::vector<Swap> critical_swaps(const OrderRun& run, const StreamOrders& orders,
                                 const std::vector<std::uint32_t>& pos) {
  const PairTransfers& in = run.input();
  const Plan& plan = *in.plan;
  std::vector<Swap> out;
  int r = 0;
  for (int q = 1; q < static_cast<int>(plan.ranks.size()); ++q)
    if (run.rank_end(q) > run.rank_end(r)) r = q;
  const auto& last = plan.ranks[static_cast<std::size_t>(r)];
  std::size_t i = last.size();
  while (i > 0 && !is_compute(last[i - 1].type)) --i;
  if (i == 0) return out;
  --i;
  bool at_compute = true;
  std::uint32_t z = 0;
  for (std::size_t guard = 0; guard < 4 * run_units(in); ++guard) {
    if (at_compute) {
      const auto& list = plan.ranks[static_cast<std::size_t>(r)];
      const double s = run.started(r, i);
      if (!(s > 0.0)) break;
      std::size_t j = i;
      while (j > 0 && !is_compute(list[j - 1].type)) --j;
      if (j > 0 && run.started(r, j - 1) + run.duration(list[j - 1]) == s) {
        i = j - 1;  // waited for its rank
        continue;
      }
      bool found = false;
      deps::for_each_input(list[i], in.ends, [&](const deps::Value& v, int reader) {
        if (found || v.stage == reader || plan.meta.rank_of(v.stage) == r) return;
        const std::int32_t id = in.carrying(v);
        if (id >= 0 && run.sent_at(static_cast<std::uint32_t>(id)) + run.hop() == s) {
          z = static_cast<std::uint32_t>(id);
          found = true;
        }
      });
      if (!found) break;
      at_compute = false;  // waited for a transfer
      continue;
    }
    const Xfer& x = in.xfer(z);
    if (run.sent_at(z) == run.release(z)) {  // waited for its producer
      at_compute = true;
      r = x.src;
      i = static_cast<std::size_t>(x.producer);
      continue;
    }
    const std::uint32_t p = in.pair_of[z];
    const std::size_t k = pos[z];
    if (k == 0) break;
    out.push_back({p, k - 1});  // waited for the one before it on its stream
    z = orders[p][k - 1] >> 1;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void swap_at(StreamOrders& orders, std::vector<std::uint32_t>& pos, const Swap& s) {
  auto& order = orders[s.pair];
  std::swap(order[s.k], order[s.k + 1]);
  pos[order[s.k] >> 1] = static_cast<std::uint32_t>(s.k);
  pos[order[s.k + 1] >> 1] = static_cast<std::uint32_t>(s.k + 1);
}

// ---- the exact search --------------------------------------------------

// The exact search's run: where a stream decides between more than one
// transfer it stops (at_choice()) until choose() picks one. A stream
// deciding at t (free, with a transfer released) may take any transfer
// released before t + the transfer time: the first to arrive could not end
// earlier, so waiting for any other would only delay it (an active
// schedule; every other order is no faster than one of these).
class BranchRun : public StreamRun<BranchRun> {
 public:
  BranchRun(const PairTransfers& in, const CostModel& costs) : StreamRun(in, costs) {
    const auto n = static_cast<std::size_t>(in.n_pairs());
    pending_.resize(n);
    key_.assign(n, kNotYet);
    order_.resize(n);
    taken_.assign(in.n_transfers(), 0);
  }
  /// Starts the run; resume() runs it to its first choice.
  void go() { begin(); }
  /// Runs until the next choice or the end (at a choice: choose() first).
  void resume() { run(); }
  bool at_choice() const { return !choices_.empty(); }
  std::size_t n_choices() const { return choices_.size(); }
  void choose(std::size_t k) {
    const std::uint32_t id = choices_[k];
    choices_.clear();
    take(choice_pair_, id);
  }
  StreamOrders& orders() { return order_; }

  /// Which transfers are decided, as a hash (equal sets, equal hashes).
  std::uint64_t decided() const { return decided_; }
  /// What the rest of the run depends on besides the decided set (which
  /// fixes every rank's position): when each rank and stream is free, when
  /// each transfer released and not decided was released, and when each
  /// decided one whose consumer has not run arrived. Of two runs with the
  /// same decided set, one whose signature is nowhere later is never slower.
  void signature(std::vector<double>& out) const {
    out.clear();
    for (int r = 0; r < num_ranks(); ++r) out.push_back(rank_end(r));
    for (int p = 0; p < input().n_pairs(); ++p) out.push_back(pair_free(p));
    for (std::uint32_t id = 0; id < input().n_transfers(); ++id) {
      const Xfer& x = input().xfer(id);
      if (taken_[id]) {
        if (pc(x.dst) <= static_cast<std::size_t>(x.consumer)) out.push_back(arrival(id));
      } else if (release(id) != kNotYet) {
        out.push_back(release(id));
      }
    }
  }

  /// A lower bound on every completion of this partial order: relaxes this
  /// run (the transfers not decided yet wait only for their stream's last
  /// decided one) and runs it to the end; each stream must still carry its
  /// undecided transfers one at a time, each followed by its tail (`tail`,
  /// per transfer: the longest chain of work its consumer starts), which
  /// bounds the makespan as one machine does (the preemptive schedule that
  /// serves the longest tail first, from the relaxed releases).
  double lower_bound(const std::vector<double>& tail) {
    relaxed_ = true;
    floor_.resize(pending_.size());
    carried_.assign(pending_.size(), {});
    choices_.clear();
    for (std::size_t p = 0; p < pending_.size(); ++p) {
      floor_[p] = pair_free(static_cast<int>(p));
      for (std::uint32_t id : pending_[p]) send_relaxed(id);
      pending_[p].clear();
    }
    run();
    double bound = makespan();
    for (std::size_t p = 0; p < carried_.size(); ++p)
      bound = std::max(bound, one_machine(carried_[p], floor_[p], tail));
    return bound;
  }

 private:
  friend class run::Core<BranchRun>;
  friend class StreamRun<BranchRun>;

  void send_relaxed(std::uint32_t id) {
    const std::size_t p = input().pair_of[id];
    carried_[p].push_back(id);
    send(id, std::max(release(id), floor_[p]));
  }
  // The preemptive one-machine bound of transfers `ids` on a stream free
  // from `from`: the longest tail first, preempted when one with a longer
  // tail is released.
  double one_machine(std::vector<std::uint32_t>& ids, double from,
                     const std::vector<double>& tail) const {
    std::sort(ids.begin(), ids.end(),
              [&](std::uint32_t a, std::uint32_t b) { return release(a) < release(b); });
    std::vector<std::pair<double, double>> ready;  // (tail, time left): a max-heap by tail
    double t = from, bound = 0.0;
    std::size_t i = 0;
    while (i < ids.size() || !ready.empty()) {
      if (ready.empty()) t = std::max(t, release(ids[i]));
      for (; i < ids.size() && release(ids[i]) <= t; ++i) {
        ready.push_back({tail[ids[i]], hop()});
        std::push_heap(ready.begin(), ready.end());
      }
      const double next = i < ids.size() ? release(ids[i]) : kNotYet;
      auto& top = ready.front();
      if (t + top.second <= next) {
        t += top.second;
        bound = std::max(bound, t + top.first);
        std::pop_heap(ready.begin(), ready.end());
        ready.pop_back();
      } else {
        top.second -= next - t;
        t = next;
      }
    }
    return bound;
  }
  double decides_at(std::size_t p) const {
    if (pending_[p].empty()) return kNotYet;
    double first = kNotYet;
    for (std::uint32_t id : pending_[p]) first = std::min(first, release(id));
    return std::max(first, pair_free(static_cast<int>(p)));
  }
  void schedule(std::size_t p) {
    const double t = decides_at(p);
    if (t < key_[p]) {
      key_[p] = t;
      decisions_.push_back({t, static_cast<int>(p)});
      std::push_heap(decisions_.begin(), decisions_.end(), std::greater<>());
    }
  }
  void released(std::uint32_t id, double) {
    if (relaxed_) return send_relaxed(id);
    const std::size_t p = input().pair_of[id];
    pending_[p].push_back(id);
    schedule(p);
  }
  void take(std::size_t p, std::uint32_t id) {
    taken_[id] = 1;
    std::uint64_t z = (id + 1) * 0x9E3779B97F4A7C15ull;  // splitmix64 of the id
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    decided_ ^= z ^ (z >> 31);
    auto& pend = pending_[p];
    pend.erase(std::find(pend.begin(), pend.end(), id));
    const Xfer& x = input().xfer(id);
    order_[p].push_back(id << 1 | (x.src < x.dst ? 1u : 0u));
    send(id, std::max(pair_free(static_cast<int>(p)), release(id)));
    schedule(p);
  }

  int stalled() {
    if (relaxed_ || at_choice()) return -1;
    while (!decisions_.empty()) {
      std::pop_heap(decisions_.begin(), decisions_.end(), std::greater<>());
      const auto [t, pi] = decisions_.back();
      decisions_.pop_back();
      const auto p = static_cast<std::size_t>(pi);
      if (t != key_[p]) continue;  // a stale entry
      key_[p] = kNotYet;
      for (std::uint32_t id : pending_[p])
        if (release(id) <= t || release(id) < t + hop()) choices_.push_back(id);
      const auto& xs = *input().xfers;
      std::sort(choices_.begin(), choices_.end(),
                [&](std::uint32_t a, std::uint32_t b) { return deadline_first(xs[a], xs[b]); });
      if (choices_.size() > 1) {
        choice_pair_ = p;
        return -1;  // the search chooses
      }
      const std::uint32_t id = choices_.front();
      choices_.clear();
      take(p, id);
      const int dst = input().xfer(id).dst;
      if (runnable(dst)) return dst;
    }
    return -1;
  }

  std::vector<std::vector<std::uint32_t>> pending_;  // per pair: released, not taken
  std::vector<double> key_;                          // per pair: its live decision's time
  std::vector<std::pair<double, int>> decisions_;    // a min-heap of (time, pair)
  std::vector<std::uint32_t> choices_;               // at a choice: by deadline
  std::size_t choice_pair_ = 0;
  StreamOrders order_;
  std::vector<char> taken_;  // per transfer: decided
  std::uint64_t decided_ = 0;
  bool relaxed_ = false;
  std::vector<double> floor_;  // relaxed: per pair, its decided transfers' end
  std::vector<std::vector<std::uint32_t>> carried_;  // relaxed: per pair, the undecided
};

// Depth first, the earliest-deadline choice first; a choice point keeps
// its state until its last child, which takes it over.
class Exact {
 public:
  Exact(const PairTransfers& in, const CostModel& costs, StreamOrders orders, double makespan,
        std::size_t budget)
      : in_(in), costs_(costs), unit_(run_units(in)), budget_(budget) {
    best_.orders = std::move(orders);
    best_.makespan = makespan;
    tails();
  }

  SearchedOrders search() {
    BranchRun root(in_, costs_);
    root.go();
    best_.work += unit_;
    descend(std::move(root));
    while (!stack_.empty() && !exhausted_) {
      Frame& f = stack_.back();
      if (f.next == f.node.n_choices() || !shorter(f.bound, best_.makespan)) {
        stack_.pop_back();
        continue;
      }
      const std::size_t k = f.next++;
      if (f.next == f.node.n_choices()) {
        BranchRun child = std::move(f.node);
        stack_.pop_back();
        child.choose(k);
        descend(std::move(child));
      } else {
        BranchRun child = f.node;
        child.choose(k);
        descend(std::move(child));
      }
    }
    best_.proved = !exhausted_;
    return std::move(best_);
  }

 private:
  struct Frame {
    BranchRun node;  // at a choice
    double bound;
    std::size_t next = 0;
  };

  // Each transfer's tail: the longest chain of computes and transfers from
  // its consumer's start to the end, whatever the pair orders (a run's
  // start order lists every producer before its consumers).
  void tails() {
    const Plan& plan = *in_.plan;
    OrderRun run(in_, costs_);
    run.go(best_.orders);
    struct At {
      double start;
      int rank;
      std::size_t index;
    };
    std::vector<At> computes;
    for (std::size_t r = 0; r < plan.ranks.size(); ++r)
      for (std::size_t i = 0; i < plan.ranks[r].size(); ++i)
        if (is_compute(plan.ranks[r][i].type))
          computes.push_back({run.started(static_cast<int>(r), i), static_cast<int>(r), i});
    std::sort(computes.begin(), computes.end(),
              [](const At& a, const At& b) { return a.start > b.start; });
    std::vector<std::vector<double>> from(plan.ranks.size());  // per compute: its tail
    std::vector<double> after(plan.ranks.size(), 0.0);  // per rank: the tail of its next compute
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) from[r].assign(plan.ranks[r].size(), 0.0);
    tail_.assign(in_.n_transfers(), 0.0);
    for (const At& c : computes) {
      const Action& a = plan.ranks[static_cast<std::size_t>(c.rank)][c.index];
      double longest = after[static_cast<std::size_t>(c.rank)];
      deps::for_each_output(a, [&](const deps::Value& v) {
        if (static_cast<unsigned>(v.stage) >= static_cast<unsigned>(in_.stages) ||
            static_cast<unsigned>(v.microbatch) >= static_cast<unsigned>(in_.mbs))
          return;
        const std::int32_t id = in_.carrying(v);
        if (id < 0) return;
        const Xfer& x = in_.xfer(static_cast<std::uint32_t>(id));
        const double q =
            from[static_cast<std::size_t>(x.dst)][static_cast<std::size_t>(x.consumer)];
        tail_[static_cast<std::size_t>(id)] = q;
        longest = std::max(longest, run.hop() + q);
      });
      from[static_cast<std::size_t>(c.rank)][c.index] = run.duration(a) + longest;
      after[static_cast<std::size_t>(c.rank)] = from[static_cast<std::size_t>(c.rank)][c.index];
    }
  }

  // Whether a choice point already seen with the same decided transfers
  // was nowhere later (then this one is no better); else it is noted.
  bool dominated(const BranchRun& node) {
    node.signature(sig_);
    std::vector<double>& seen = seen_[node.decided()];
    const std::size_t n = sig_.size();
    for (std::size_t at = 0; at + n <= seen.size(); at += n) {
      std::size_t i = 0;
      while (i < n && seen[at + i] <= sig_[i]) ++i;
      if (i == n) return true;
    }
    if (seen_size_ + n <= kSeenLimit) {
      seen.insert(seen.end(), sig_.begin(), sig_.end());
      seen_size_ += n;
    }
    return false;
  }

  // Runs a node that just chose to its next choice; a leaf may be better.
  void descend(BranchRun node) {
    if (best_.work > budget_) {
      exhausted_ = true;
      return;
    }
    node.resume();
    best_.work += 2 * unit_;
    if (!node.at_choice()) {
      const double m = node.makespan();
      if (shorter(m, best_.makespan)) {
        best_.makespan = m;
        best_.orders = std::move(node.orders());
      }
      return;
    }
    if (dominated(node)) return;
    BranchRun relaxed = node;
    const double bound = relaxed.lower_bound(tail_);
    if (!shorter(bound, best_.makespan)) return;
    stack_.push_back({std::move(node), bound, 0});
  }

  const PairTransfers& in_;
  const CostModel& costs_;
  const std::size_t unit_, budget_;
  std::vector<double> tail_;  // per transfer
  SearchedOrders best_;
  bool exhausted_ = false;
  std::vector<Frame> stack_;
  static constexpr std::size_t kSeenLimit = std::size_t{1} << 23;  // doubles: 64 MiB
  std::unordered_map<std::uint64_t, std::vector<double>> seen_;    // decided set -> signatures
  std::size_t seen_size_ = 0;
  std::vector<double> sig_;
};

}  // namespace

SearchedOrders improve_orders(const PairTransfers& in, const CostModel& costs, StreamOrders orders,
                              std::size_t budget) {
  SearchedOrders out;
  const std::size_t unit = run_units(in);
  std::vector<std::uint32_t> pos(in.n_transfers(), 0);
  for (const auto& order : orders)
    for (std::size_t k = 0; k < order.size(); ++k)
      pos[order[k] >> 1] = static_cast<std::uint32_t>(k);
  OrderRun runs[2] = {OrderRun(in, costs), OrderRun(in, costs)};
  int current = 0;  // runs[current]: the run of `orders`; the other one tries a swap
  runs[current].go(orders);
  out.work = unit;
  double best = runs[current].makespan();
  while (true) {
    bool better = false;
    for (const Swap& s : critical_swaps(runs[current], orders, pos)) {
      if (out.work + unit > budget) {
        out.orders = std::move(orders);
        out.makespan = best;
        return out;
      }
      swap_at(orders, pos, s);
      OrderRun& trial = runs[1 - current];
      trial.go(orders);
      out.work += unit;
      if (shorter(trial.makespan(), best)) {
        best = trial.makespan();
        current = 1 - current;
        better = true;
        break;
      }
      swap_at(orders, pos, s);
    }
    if (!better) break;
  }
  out.orders = std::move(orders);
  out.makespan = best;
  out.proved = true;
  return out;
}

SearchedOrders exact_orders(const PairTransfers& in, const CostModel& costs, StreamOrders orders,
                            double makespan, std::size_t budget) {
  return Exact(in, costs, std::move(orders), makespan, budget).search();
}

SearchedOrders search_orders(const PairTransfers& in, const CostModel& costs, StreamOrders orders,
                             double makespan, double bound, bool exact,
                             const std::function<StreamOrders()>& other) {
  using Orders = LowerReport::Orders;
  SearchedOrders out;
  out.orders = std::move(orders);
  out.makespan = makespan;
  out.verdict = Orders::Bound;
  if (!shorter(bound, makespan)) return out;
  const Limits& limits = exact ? kExactLimits : kDefaultLimits;
  const std::size_t units = run_units(in);
  out.verdict = Orders::Limited;
  if (units > limits.local_units) return out;
  if (other) {
    StreamOrders start = other();
    if (!start.empty()) {
      OrderRun run(in, costs);
      run.go(start);
      if (shorter(run.makespan(), out.makespan)) {
        out.orders = std::move(start);
        out.makespan = run.makespan();
        if (!shorter(bound, out.makespan)) {
          out.verdict = Orders::Bound;
          return out;
        }
      }
    }
  }
  SearchedOrders local = improve_orders(in, costs, std::move(out.orders), limits.local_work);
  local.verdict = !shorter(bound, local.makespan) ? Orders::Bound
                  : local.proved                  ? Orders::Local
                                                  : Orders::Limited;
  if (local.verdict == Orders::Bound || units > limits.exact_units) return local;
  SearchedOrders best = exact_orders(in, costs, local.orders, local.makespan,
                                     limits.exact_work - std::min(limits.exact_work, local.work));
  best.work += local.work;
  if (best.proved) best.verdict = shorter(bound, best.makespan) ? Orders::Optimal : Orders::Bound;
  else best.verdict = shorter(best.makespan, local.makespan) ? Orders::Limited : local.verdict;
  return best;
}

}  // namespace pipeplan::detail
