// Internal: the pair-stream runs of the latency-hiding lowering, timed
// policies of the execution core (run/core.h). A compute-only order runs
// under the planning costs; every value crossing ranks goes through its rank
// pair's one stream, which carries one transfer at a time (the rendezvous
// model, NCCL point-to-point): a transfer starts once its producer ended and
// the stream is free, in the order the stream is given, and its consumer
// starts once it arrived. With each receive posted as early as that order
// allows (latency.cc), this is the rendezvous simulation of the lowered plan.
//
//   OrderRun     each stream takes its transfers in given orders: the
//                simulated makespan the local search compares orders by
//   BranchRun    the exact search's run (order_search.cc): it stops where a
//                stream has more than one transfer it could take next
//
// The lowering's first order, earliest deadline first, comes from the same
// run written as a plain event loop (pair_order.h), which large plans take
// at a fraction of the core's cost. BranchRun decides in time order: the
// core runs every rank as far as its inputs allow, and when no rank can
// move, stalled() takes the next transfer of the pair whose stream decides
// first. Then every transfer released by that time is known: a rank still
// waiting needs a transfer not decided yet, which arrives at least a
// transfer time later.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "ir/deps.h"
#include "lower/latency.h"
#include "lower/timing.h"
#include "pipeplan/costs.h"
#include "pipeplan/ir.h"
#include "run/core.h"

namespace pipeplan::detail {

/// Each pair's transfers in the order its stream takes them: transfer id
/// << 1 | 1 when it goes from the lower rank to the higher (<< 1 otherwise).
using StreamOrders = std::vector<std::vector<std::uint32_t>>;

/// A compute-only plan's transfers by rank pair, as the runs read them (the
/// lowering's tables, by pointer).
struct PairTransfers {
  using Ids = std::vector<std::uint32_t>;
  const Plan* plan = nullptr;
  const std::vector<Xfer>* xfers = nullptr;
  /// Per pair: the ids of its two directions (from the lower rank up, from
  /// the higher rank down), each in producer order; either may be empty.
  std::vector<const Ids*> up, down;
  std::vector<std::uint32_t> pair_of;  ///< per transfer id
  /// Per (stage, microbatch) of the sending stage (stage * mbs + mb): the id
  /// of the transfer carrying its forward output / its gradient, or -1.
  const std::vector<std::int32_t>* tid_f = nullptr;
  const std::vector<std::int32_t>* tid_b = nullptr;
  int stages = 0, mbs = 0;
  deps::Ends ends{0};  ///< the microbatches' routes (deps::Ends(meta))

  int n_pairs() const { return static_cast<int>(up.size()); }
  std::size_t n_transfers() const { return xfers->size(); }
  const Xfer& xfer(std::uint32_t id) const { return (*xfers)[id]; }
  /// The transfer carrying value `v` off its stage's rank, or -1.
  std::int32_t carrying(const deps::Value& v) const {
    const auto& tid = v.kind == deps::Kind::Forward ? *tid_f : *tid_b;
    return tid[static_cast<std::size_t>(v.stage) * static_cast<std::size_t>(mbs) +
               static_cast<std::size_t>(v.microbatch)];
  }
};

/// The stream order of two transfers a stream may take at once: the
/// earlier deadline, then key_less.
inline bool deadline_first(const Xfer& x, const Xfer& y) {
  if (x.deadline != y.deadline) return x.deadline < y.deadline;
  return key_less(x, y);
}

/// The state and hooks every pair-stream run shares. `P` derives from it,
/// provides released(id, time) (a transfer's producer ended) and may
/// override stalled().
template <class P>
class StreamRun : public run::Core<P> {
 public:
  static constexpr run::Order kOrder = run::Order::Queue;
  static constexpr double kNotYet = std::numeric_limits<double>::infinity();

  /// Whether every rank ran its whole list.
  bool finished() const {
    for (int r = 0; r < this->num_ranks(); ++r)
      if (this->pc(r) < in_->plan->ranks[static_cast<std::size_t>(r)].size()) return false;
    return true;
  }
  /// When the last compute ended; kNotYet for a run that did not complete.
  double makespan() const {
    if (!finished()) return kNotYet;
    double m = 0.0;
    for (double f : rank_free_) m = std::max(m, f);
    return m;
  }
  /// When transfer `id` was released (its producer ended); kNotYet before.
  double release(std::uint32_t id) const { return release_[id]; }
  /// When transfer `id` arrived (is on its consumer's rank); kNotYet before.
  double arrival(std::uint32_t id) const {
    const Xfer& x = in_->xfer(id);
    return cell(x.send_stage, x.mb).at[x.grad ? 1 : 0];
  }
  /// When the stream of pair p is free (its last transfer arrived).
  double pair_free(int p) const { return pair_free_[static_cast<std::size_t>(p)]; }
  double hop() const { return hop_; }
  /// When rank r's last compute so far ended.
  double rank_end(int r) const { return rank_free_[static_cast<std::size_t>(r)]; }
  /// The planning duration of compute `a`.
  double duration(const Action& a) const { return duration_(a); }
  const PairTransfers& input() const { return *in_; }

 protected:
  StreamRun(const PairTransfers& in, const CostModel& costs)
      : in_(&in),
        duration_(costs, in.stages),
        hop_(costs.transfer_time()),
        owner_(static_cast<std::size_t>(std::max(in.stages, 0))) {
    for (int s = 0; s < in.stages; ++s)
      owner_[static_cast<std::size_t>(s)] = in.plan->meta.rank_of(s);
  }

  /// Every rank at the head of its list at time 0, nothing produced.
  void begin() {
    const std::size_t keys = static_cast<std::size_t>(std::max(in_->stages, 0)) *
                             static_cast<std::size_t>(std::max(in_->mbs, 0));
    cells_.assign(keys, Cell{});
    release_.assign(in_->n_transfers(), kNotYet);
    rank_free_.assign(in_->plan->ranks.size(), 0.0);
    pair_free_.assign(static_cast<std::size_t>(in_->n_pairs()), 0.0);
    this->start(in_->plan->ranks);
  }

  /// Transfer `id` leaves at `start` on its pair's stream: it arrives a
  /// transfer time later, when the stream is free again; its consumer's rank
  /// may move.
  void send(std::uint32_t id, double start) {
    const Xfer& x = in_->xfer(id);
    const double end = start + hop_;
    cell(x.send_stage, x.mb).at[x.grad ? 1 : 0] = end;
    pair_free_[in_->pair_of[id]] = end;
    this->wake(x.dst);
  }

  /// Whether rank r's next action can run now (its inputs are there).
  bool runnable(int r) const {
    const auto& list = in_->plan->ranks[static_cast<std::size_t>(r)];
    const std::size_t i = this->pc(r);
    return i < list.size() && inputs(list[i]) != kNotYet;
  }

  // Hooks a policy may define: ran() sees every compute run.
  void ran(int, std::size_t, double) {}

 private:
  friend class run::Core<P>;
  P& self() { return static_cast<P&>(*this); }

  // Per (stage, microbatch): when its forward output and its gradient were
  // made ([0], [1]), and when each is on its consumer's rank.
  struct Cell {
    double made[2] = {kNotYet, kNotYet};
    double at[2] = {kNotYet, kNotYet};
  };
  bool in_range(int s, int mb) const {
    return static_cast<unsigned>(s) < static_cast<unsigned>(in_->stages) &&
           static_cast<unsigned>(mb) < static_cast<unsigned>(in_->mbs);
  }
  Cell& cell(int s, int mb) {
    return cells_[static_cast<std::size_t>(s) * static_cast<std::size_t>(in_->mbs) +
                  static_cast<std::size_t>(mb)];
  }
  const Cell& cell(int s, int mb) const {
    return cells_[static_cast<std::size_t>(s) * static_cast<std::size_t>(in_->mbs) +
                  static_cast<std::size_t>(mb)];
  }
  int owner(int s) const { return owner_[static_cast<std::size_t>(s)]; }

  // When every input of compute `a` is on its rank (a stage's own forward
  // output or gradient where it was made), kNotYet while one is not.
  double inputs(const Action& a) const {
    double t = 0.0;
    deps::for_each_input(a, in_->ends, [&](const deps::Value& v, int reader) {
      if (!in_range(v.stage, v.microbatch)) {
        t = kNotYet;
        return;
      }
      const Cell& c = cell(v.stage, v.microbatch);
      const int k = v.kind == deps::Kind::Forward ? 0 : 1;
      t = std::max(t, v.stage == reader ? c.made[k] : c.at[k]);
    });
    return t;
  }

  // A value made at `end` on rank r: there for its consumer on the same
  // rank, or released to its pair's stream.
  void outputs(int r, const Action& a, double end) {
    deps::for_each_output(a, [&](const deps::Value& v) {
      if (!in_range(v.stage, v.microbatch)) return;
      Cell& c = cell(v.stage, v.microbatch);
      const int k = v.kind == deps::Kind::Forward ? 0 : 1;
      c.made[k] = end;
      const int to = deps::consumer_stage(v);
      if (to < 0 || to >= in_->stages) return;
      if (owner(to) == r) {
        c.at[k] = end;
        return;
      }
      const std::int32_t id = in_->carrying(v);
      if (id < 0) return;
      release_[static_cast<std::size_t>(id)] = end;
      self().released(static_cast<std::uint32_t>(id), end);
    });
  }

  run::Step compute(int r, std::size_t i, const Action& a) {
    const double ready = inputs(a);
    if (ready == kNotYet) return run::Step::Wait;  // woken when a transfer arrives
    double& free = rank_free_[static_cast<std::size_t>(r)];
    const double start = std::max(free, ready);
    free = start + duration_(a);
    self().ran(r, i, start);
    outputs(r, a, free);
    return run::Step::Next;
  }

  const PairTransfers* in_;
  Durations duration_;
  double hop_;
  std::vector<int> owner_;  // per stage
  std::vector<Cell> cells_;
  std::vector<double> release_;    // per transfer
  std::vector<double> rank_free_;  // per rank: when its last compute ended
  std::vector<double> pair_free_;  // per pair
};

/// The run of given pair orders: each stream takes its transfers in its
/// order, each as soon as it is released and the stream is free. Records
/// when every compute and transfer started (the local search reads the
/// critical path off them). A pair order must hold each of the pair's
/// transfers once.
class OrderRun : public StreamRun<OrderRun> {
 public:
  OrderRun(const PairTransfers& in, const CostModel& costs) : StreamRun(in, costs) {}

  /// Runs the compute order with `orders`; then makespan() (kNotYet when
  /// the orders cannot run: a stream waits for a transfer whose producer
  /// waits for one behind it).
  void go(const StreamOrders& orders) {
    orders_ = &orders;
    pos_.assign(orders.size(), 0);
    started_.assign(input().n_transfers(), kNotYet);
    starts_.resize(input().plan->ranks.size());
    for (std::size_t r = 0; r < starts_.size(); ++r)
      starts_[r].assign(input().plan->ranks[r].size(), kNotYet);
    begin();
    run();
  }
  /// When compute i of rank r started (kNotYet for one that did not run).
  double started(int r, std::size_t i) const { return starts_[static_cast<std::size_t>(r)][i]; }
  /// When transfer id left on its stream.
  double sent_at(std::uint32_t id) const { return started_[id]; }

 private:
  friend class run::Core<OrderRun>;
  friend class StreamRun<OrderRun>;

  void ran(int r, std::size_t i, double start) { starts_[static_cast<std::size_t>(r)][i] = start; }
  // Each released transfer at the head of its stream's order leaves.
  void released(std::uint32_t id, double) {
    const std::uint32_t p = input().pair_of[id];
    const auto& order = (*orders_)[p];
    std::size_t& k = pos_[p];
    while (k < order.size()) {
      const std::uint32_t next = order[k] >> 1;
      const double t = release(next);
      if (t == kNotYet) break;
      const double start = std::max(t, pair_free(static_cast<int>(p)));
      started_[next] = start;
      send(next, start);
      ++k;
    }
  }

  const StreamOrders* orders_ = nullptr;
  std::vector<std::size_t> pos_;  // per pair: the next transfer of its order
  std::vector<double> started_;   // per transfer
  std::vector<std::vector<double>> starts_;
};

}  // namespace pipeplan::detail
