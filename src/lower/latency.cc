// The latency-hiding lowering (LowerMode::LatencyHiding).
//
// 1. Time the compute order under the caller's cost model, each cross-rank
//    value arriving its transfer time after its producer ends: the eager
//    bound. A transfer is released when its producer ends there; its
//    deadline is its consumer's latest start that keeps the bound's
//    makespan (latest_starts: slack-aware, so of two transfers wanted at
//    the same time the one on the critical path goes first).
// 2. Each rank pair's order is the order its one stream takes transfers in
//    an event-driven run of the compute order where a pair carries one
//    transfer at a time, picking the earliest deadline among those released
//    (pair_order.cc). With a prefetch cap: plain deadline order, so each end
//    receives in consumer order. With serial_safe: one global order, by
//    release (by deadline with a cap). Both ends post in the pair's order,
//    so the pair FIFO is complementary by construction.
// 3. A send goes right after its producer, later only when the pair order
//    puts an earlier transfer of the pair after that point on this rank; a
//    receive goes right after the previous operation of its pair end (as
//    early as the order allows), but no earlier than `max_prefetch`
//    receives ahead of their consumers on its rank.
//
// Why every receive fits before its consumer (X before Y in a pair's order,
// X a send on Y's receiving rank): in the event-driven run X's producer
// ended before X was taken, and Y's consumer started after Y arrived, later;
// in release or deadline order, Y's consumer preceding X's producer in the
// list would make Y both released and due before X. With positive
// durations the producer then precedes the consumer in the list. An earlier
// receive is placed no later than the smallest consumer slot of the
// receives after it. Progress: by induction over that run's time, every
// transfer is posted on both ends and its pair reaches it, so no rank waits
// forever (verify() proves each plan; tests/latency_test.cc, sweep_test.cc).
//
// Cost: linear in the actions, times log(ranks) for the heap of compute ends
// of the pair-stream run (at most one per rank; transfer ends wait in a
// FIFO). When no two transfers of a pair meet in the bound's run, the
// pair-stream run is skipped: it would repeat the bound (release_orders).
// Transfers are listed per direction in producer order; a history is a
// merge of at most four such lists; each rank's program a merge by position.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lower/latency.h"
#include "lower/order_search.h"
#include "lower/producers.h"
#include "lower/stream_run.h"
#include "lower/timing.h"
#include "model/cost_check.h"
#include "pipeplan/error.h"

namespace pipeplan::detail {
namespace {

constexpr std::uint32_t kSubSend = 0, kSubRecv = 1;
std::uint32_t pack(std::uint32_t slot, std::uint32_t sub) { return slot << 1 | sub; }
std::uint32_t slot_of(std::uint32_t p) { return p >> 1; }

struct Dir {
  int src = 0, dst = 0;
  std::vector<std::uint32_t> ids;  // key order
};

// One sorted run inside a merge: the sends of a direction or its receives.
struct Seq {
  const std::vector<std::uint32_t>* ids = nullptr;
  std::size_t next = 0;
  bool send = false;
  bool live() const { return next < ids->size(); }
  std::uint32_t head() const { return (*ids)[next]; }
};

template <typename Less>
std::size_t smallest(const std::vector<Seq>& seqs, Less less) {
  std::size_t best = seqs.size();
  for (std::size_t q = 0; q < seqs.size(); ++q)
    if (seqs[q].live() && (best == seqs.size() || less(q, best))) best = q;
  return best;
}

class Lowering {
 public:
  Lowering(const Plan& plan, const LowerOptions& options, const CostModel& costs,
           const ProducerIndex& producers, const Timing& timing,
           const std::vector<std::vector<double>>& latest)
      : plan_(plan),
        options_(options),
        costs_(costs),
        producers_(producers),
        timing_(timing),
        latest_(latest),
        stages_(plan.meta.num_stages()),
        mbs_(plan.meta.num_microbatches),
        hop_(costs.transfer_time()) {
    for (const auto& ends : timing.end)
      for (double e : ends) report_.bound = std::max(report_.bound, e);
  }

  const LowerReport& report() const { return report_; }

  Plan run() {
    index_producers();
    collect();
    cap_receives();
    if (options_.serial_safe)
      for (int r = 0; r < ranks(); ++r) walk_rank_serial(r);
    else walk_pairs();
    Plan out;
    out.meta = plan_.meta;
    out.rank_ids = plan_.rank_ids;
    out.ranks.resize(plan_.ranks.size());
    for (int r = 0; r < ranks(); ++r) out.ranks[static_cast<std::size_t>(r)] = emit(r);
    return out;
  }

 private:
  int ranks() const { return static_cast<int>(plan_.ranks.size()); }
  bool in_range(int s, int mb) const { return s >= 0 && s < stages_ && mb >= 0 && mb < mbs_; }
  std::size_t at(int s, int mb) const { return static_cast<std::size_t>(s) * mbs_ + mb; }
  int rank_of(int s) const { return rank_of_[static_cast<std::size_t>(s)]; }

  void index_producers() {
    const std::size_t n = static_cast<std::size_t>(stages_) * static_cast<std::size_t>(mbs_);
    tid_f_.assign(n, -1);
    tid_b_.assign(n, -1);
    rank_of_.resize(static_cast<std::size_t>(stages_));
    for (int s = 0; s < stages_; ++s) rank_of_[static_cast<std::size_t>(s)] = plan_.meta.rank_of(s);
    memo_.assign(static_cast<std::size_t>(stages_) * 2, -1);
  }

  int direction(int src, int dst, int stage, bool grad) {
    int& memo = memo_[static_cast<std::size_t>(stage) * 2 + (grad ? 1 : 0)];
    if (memo >= 0 && dirs_[static_cast<std::size_t>(memo)].src == src &&
        dirs_[static_cast<std::size_t>(memo)].dst == dst)
      return memo;
    auto [it, inserted] =
        dir_ids_.emplace(std::make_pair(src, dst), static_cast<int>(dirs_.size()));
    if (inserted) dirs_.push_back(Dir{src, dst, {}});
    memo = it->second;
    return memo;
  }

  // Every transfer, walking each sending rank's list: per direction the ids
  // come out in producer order, which is key order.
  void collect() {
    std::size_t n_actions = 0;  // a bound on the transfers, but for OVERLAP_F_B's second
    for (const auto& list : plan_.ranks) n_actions += list.size();
    xfers_.reserve(n_actions);
    for (int r = 0; r < ranks(); ++r) {
      const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
      const auto& end = timing_.end[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        auto add = [&](bool grad, int s, int mb) {
          if (!in_range(s, mb)) return;
          const int to = grad ? s - 1 : s + 1;
          if (to < 0 || to >= stages_) return;
          const int dst = rank_of(to);
          if (dst == r) return;
          // The consumer of Forward(s) produces Forward(s+1); that of
          // Grad(s) produces Grad(s-1).
          const std::int32_t consumer = producers_.of(grad, to, mb);
          if (consumer < 0) return;  // structure checks report a missing consumer
          Xfer x;
          x.t = end[i];
          x.deadline = latest_[static_cast<std::size_t>(dst)][static_cast<std::size_t>(consumer)];
          x.src = r;
          x.dst = dst;
          x.producer = static_cast<std::int32_t>(i);
          x.consumer = consumer;
          x.send_stage = s;
          x.mb = mb;
          x.grad = grad;
          const auto id = static_cast<std::uint32_t>(xfers_.size());
          xfers_.push_back(x);
          (grad ? tid_b_ : tid_f_)[at(s, mb)] = static_cast<std::int32_t>(id);
          dirs_[static_cast<std::size_t>(direction(r, dst, s, grad))].ids.push_back(id);
        };
        switch (a.type) {
          case ActionType::F: add(false, a.stage, a.microbatch); break;
          case ActionType::B:
          case ActionType::I: add(true, a.stage, a.microbatch); break;
          case ActionType::OverlapFB:  // same key: gradient first
            add(true, a.sub_stage, a.sub_microbatch);
            add(false, a.stage, a.microbatch);
            break;
          default: break;
        }
      }
    }
    histories_.assign(static_cast<std::size_t>(ranks()), {});
    sends_of_.assign(static_cast<std::size_t>(ranks()), {});
    recvs_of_.assign(static_cast<std::size_t>(ranks()), {});
    for (std::size_t d = 0; d < dirs_.size(); ++d) {
      sends_of_[static_cast<std::size_t>(dirs_[d].src)].push_back(static_cast<int>(d));
      recvs_of_[static_cast<std::size_t>(dirs_[d].dst)].push_back(static_cast<int>(d));
    }
  }

  // The prefetch cap: the j-th receive of a rank (in consumer order) may be
  // posted only after the consumer of its (j - cap)-th.
  void cap_receives() {
    const int cap = options_.max_prefetch;
    if (cap <= 0) return;
    std::vector<std::int32_t> ring(static_cast<std::size_t>(cap), -1);
    for (int r = 0; r < ranks(); ++r) {
      std::fill(ring.begin(), ring.end(), -1);
      std::size_t j = 0;
      const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        auto input = [&](bool grad, int from, int mb) {
          if (!in_range(from, mb) || rank_of(from) == r) return;
          const std::int32_t id = (grad ? tid_b_ : tid_f_)[at(from, mb)];
          if (id < 0) return;
          std::int32_t& slot = ring[j % static_cast<std::size_t>(cap)];
          const auto here = static_cast<std::uint32_t>(i);
          xfers_[static_cast<std::size_t>(id)].recv_lb =
              slot < 0 ? 0u : std::min(static_cast<std::uint32_t>(slot) + 1, here);
          slot = static_cast<std::int32_t>(i);
          ++j;
        };
        switch (a.type) {
          case ActionType::F: input(false, a.stage - 1, a.microbatch); break;
          case ActionType::B:
          case ActionType::I: input(true, a.stage + 1, a.microbatch); break;
          case ActionType::OverlapFB:
            input(false, a.stage - 1, a.microbatch);
            input(true, a.sub_stage + 1, a.sub_microbatch);
            break;
          default: break;
        }
      }
    }
  }

  // Serial-safe: one history per rank, all its peers merged in key order
  // (a global order, so every rank's streams agree); with a prefetch cap,
  // in deadline order (consumer's latest start, then key).
  void walk_rank_serial(int r) {
    std::vector<Seq> seqs;
    for (int d : sends_of_[static_cast<std::size_t>(r)])
      seqs.push_back({&dirs_[static_cast<std::size_t>(d)].ids, 0, true});
    for (int d : recvs_of_[static_cast<std::size_t>(r)])
      seqs.push_back({&dirs_[static_cast<std::size_t>(d)].ids, 0, false});
    ops_.clear();
    while (true) {
      const std::size_t best = smallest(seqs, [&](std::size_t x, std::size_t y) {
        return key_less(xfers_[seqs[x].head()], xfers_[seqs[y].head()]);
      });
      if (best == seqs.size()) break;
      ops_.push_back(seqs[best].head() << 1 | (seqs[best].send ? 1u : 0u));
      ++seqs[best].next;
    }
    if (options_.max_prefetch > 0)  // receive in consumer order: the cap stays exact
      std::stable_sort(ops_.begin(), ops_.end(), [&](std::uint32_t a, std::uint32_t b) {
        const Xfer& x = xfers_[a >> 1];
        const Xfer& y = xfers_[b >> 1];
        if (x.deadline != y.deadline) return x.deadline < y.deadline;
        return key_less(x, y);
      });
    walk_history(r);
  }

  // Per pair, with a prefetch cap: the pair's transfers by deadline (the
  // consumer's latest start), so each end receives in consumer order.
  void order_pair(int d0, int d1) {
    const double hop = hop_;
    const bool capped = options_.max_prefetch > 0;
    std::vector<Seq> seqs;
    for (int d : {d0, d1})
      if (d >= 0) seqs.push_back({&dirs_[static_cast<std::size_t>(d)].ids, 0, true});
    auto deadline_less = [&](std::uint32_t a, std::uint32_t b) {
      const Xfer& x = xfers_[a];
      const Xfer& y = xfers_[b];
      if (x.deadline != y.deadline) return x.deadline > y.deadline;  // min-heap
      return key_less(y, x);
    };
    heap_.clear();
    order_.clear();
    double free_at = 0.0;
    auto next_release = [&]() {
      return smallest(seqs, [&](std::size_t x, std::size_t y) {
        return key_less(xfers_[seqs[x].head()], xfers_[seqs[y].head()]);
      });
    };
    while (true) {
      std::size_t q = next_release();
      if (heap_.empty()) {
        if (q == seqs.size()) break;
        free_at = std::max(free_at, xfers_[seqs[q].head()].t);
      }
      // With a prefetch cap the pair takes transfers in deadline order (all
      // released at once): each end then receives in consumer order, which
      // keeps the cap exact.
      while (q < seqs.size() && (capped || xfers_[seqs[q].head()].t <= free_at)) {
        heap_.push_back(seqs[q].head());
        std::push_heap(heap_.begin(), heap_.end(), deadline_less);
        ++seqs[q].next;
        q = next_release();
      }
      std::pop_heap(heap_.begin(), heap_.end(), deadline_less);
      const std::uint32_t id = heap_.back();
      heap_.pop_back();
      order_.push_back(id << 1 | (xfers_[id].src < xfers_[id].dst ? 1u : 0u));
      free_at = std::max(free_at, xfers_[id].t) + hop;
    }
    walk_ends(d0, d1);
  }

  // Both ends of the pair of directions d0 (and d1, its reverse, or -1) post
  // their transfers in order_ (id << 1 | 1 when it goes from the lower rank
  // to the higher).
  void walk_ends(int d0, int d1) {
    for (int d : {d0, d1}) {
      if (d < 0) continue;
      const int r = dirs_[static_cast<std::size_t>(d)].src;
      ops_.clear();
      const std::uint32_t up =
          r < dirs_[static_cast<std::size_t>(d)].dst ? 1u : 0u;  // r sends upwards
      for (std::uint32_t op : order_) ops_.push_back((op & ~1u) | ((op & 1u) == up ? 1u : 0u));
      walk_history(r);
    }
    if (d1 < 0) {  // one-way pair: the receiving end
      const int r = dirs_[static_cast<std::size_t>(d0)].dst;
      ops_.clear();
      for (std::uint32_t op : order_) ops_.push_back(op & ~1u);
      walk_history(r);
    }
  }

  void walk_pairs() {
    std::vector<std::pair<int, int>> pairs;  // (direction, its reverse or -1)
    std::vector<int> pair_of_dir(dirs_.size(), -1);
    for (std::size_t d = 0; d < dirs_.size(); ++d) {
      const Dir& x = dirs_[d];
      auto it = dir_ids_.find({x.dst, x.src});
      const int rev = it == dir_ids_.end() ? -1 : it->second;
      if (rev >= 0 && x.src > x.dst) continue;  // the pair is taken from its lower rank
      pair_of_dir[d] = static_cast<int>(pairs.size());
      if (rev >= 0) pair_of_dir[static_cast<std::size_t>(rev)] = static_cast<int>(pairs.size());
      pairs.emplace_back(static_cast<int>(d), rev);
    }
    if (options_.max_prefetch > 0) {
      for (auto [d0, d1] : pairs) order_pair(d0, d1);
      return;
    }
    PairOrders orders;
    if (release_orders(pairs, orders)) {
      report_.orders = LowerReport::Orders::Bound;
      report_.makespan = report_.bound;
    } else {
      orders = searched_orders(pairs, pair_of_dir);
    }
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      order_ = std::move(orders[k]);
      walk_ends(pairs[k].first, pairs[k].second);
    }
  }

  // Each pair in the order its stream takes transfers when it carries one
  // at a time, earliest deadline first among those ready; where that
  // misses the bound, the orders a search finds (order_search.h).
  PairOrders searched_orders(const std::vector<std::pair<int, int>>& pairs,
                             const std::vector<int>& pair_of_dir) {
    static const std::vector<std::uint32_t> kNone;
    PairTransfers in;
    in.plan = &plan_;
    in.xfers = &xfers_;
    in.tid_f = &tid_f_;
    in.tid_b = &tid_b_;
    in.stages = stages_;
    in.mbs = mbs_;
    for (auto [d0, d1] : pairs) {
      const Dir& a = dirs_[static_cast<std::size_t>(d0)];
      const std::vector<std::uint32_t>* other =
          d1 < 0 ? &kNone : &dirs_[static_cast<std::size_t>(d1)].ids;
      in.up.push_back(a.src < a.dst ? &a.ids : other);
      in.down.push_back(a.src < a.dst ? other : &a.ids);
    }
    in.pair_of.assign(xfers_.size(), 0);
    for (std::size_t d = 0; d < dirs_.size(); ++d)
      for (std::uint32_t id : dirs_[d].ids)
        in.pair_of[id] = static_cast<std::uint32_t>(pair_of_dir[d]);
    DeadlineRun run(in, costs_);
    run.go();
    for (int r = 0; r < ranks(); ++r)
      if (run.pc(r) < plan_.ranks[static_cast<std::size_t>(r)].size())
        throw InternalError("lower: the pair-stream run of rank " + std::to_string(r) +
                            " stopped at index " + std::to_string(run.pc(r)));
    SearchedOrders found = search_orders(in, costs_, std::move(run.orders()), run.makespan(),
                                         report_.bound, options_.mode == LowerMode::Exact);
    report_.makespan = found.makespan;
    report_.orders = found.verdict;
    return std::move(found.orders);
  }

  // When no transfer of a pair is released less than one transfer time
  // after the previous one (in the bound's run), a pair stream carrying one
  // at a time never makes a transfer wait: the pair-stream run is the
  // bound's run and takes each pair's transfers in release (key) order. Then
  // this fills `orders` so (as the deadline run would, without its events)
  // and returns true; otherwise false.
  bool release_orders(const std::vector<std::pair<int, int>>& pairs,
                      std::vector<std::vector<std::uint32_t>>& orders) {
    if (!(hop_ > 0.0)) return false;  // simultaneous releases: deadlines decide
    orders.assign(pairs.size(), {});
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      const auto& up = dirs_[static_cast<std::size_t>(pairs[k].first)].ids;
      static const std::vector<std::uint32_t> kNone;
      const auto& down =
          pairs[k].second < 0 ? kNone : dirs_[static_cast<std::size_t>(pairs[k].second)].ids;
      auto& order = orders[k];
      order.reserve(up.size() + down.size());
      std::size_t i = 0, j = 0;
      bool any = false;
      double last = 0.0;
      while (i < up.size() || j < down.size()) {
        const bool take_up =
            j >= down.size() || (i < up.size() && key_less(xfers_[up[i]], xfers_[down[j]]));
        const std::uint32_t id = take_up ? up[i++] : down[j++];
        const Xfer& x = xfers_[id];
        if (any && x.t < last + hop_) return false;
        any = true;
        last = x.t;
        order.push_back(id << 1 | (x.src < x.dst ? 1u : 0u));
      }
    }
    return true;
  }

  // Fixes the positions of rank r's side of every op of one history (ops_:
  // transfer id << 1 | 1 for a send).
  void walk_history(int r) {
    // The latest slot each receive may take: no later than any receive after
    // it in the history.
    limit_.resize(ops_.size());
    std::uint32_t lim = UINT32_MAX;
    for (std::size_t k = ops_.size(); k-- > 0;) {
      if ((ops_[k] & 1u) == 0)
        lim = std::min(lim, static_cast<std::uint32_t>(xfers_[ops_[k] >> 1].consumer));
      limit_[k] = lim;
    }
    std::uint32_t back = 0;
    for (std::size_t k = 0; k < ops_.size(); ++k) {
      Xfer& x = xfers_[ops_[k] >> 1];
      if (ops_[k] & 1u) {
        back = std::max(back, pack(static_cast<std::uint32_t>(x.producer) + 1, kSubSend));
        x.send_pos = back;
      } else {
        back = std::max(back, pack(std::min(x.recv_lb, limit_[k]), kSubRecv));
        if (back > pack(static_cast<std::uint32_t>(x.consumer), kSubRecv))
          throw InternalError("lower: transfer order conflicts with receive " +
                              to_string(recv_action(x)) + " on rank " + std::to_string(r));
        x.recv_pos = back;
      }
    }
    histories_[static_cast<std::size_t>(r)].push_back(ops_);
  }

  static Action send_action(const Xfer& x) {
    return make(x.grad ? ActionType::SendB : ActionType::SendF, x.send_stage, x.mb);
  }
  static Action recv_action(const Xfer& x) {
    return x.grad ? make(ActionType::RecvB, x.send_stage - 1, x.mb)
                  : make(ActionType::RecvF, x.send_stage + 1, x.mb);
  }

  // Rank r's program: compute actions with its ops merged in by position
  // (each history is sorted by position; ties across histories by key).
  std::vector<Action> emit(int r) {
    const auto& hs = histories_[static_cast<std::size_t>(r)];
    std::vector<std::size_t> next(hs.size(), 0);
    std::size_t n_ops = 0;
    for (const auto& h : hs) n_ops += h.size();
    auto pos = [&](std::uint32_t op) {
      const Xfer& x = xfers_[op >> 1];
      return (op & 1u) ? x.send_pos : x.recv_pos;
    };
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    std::vector<Action> out;
    out.reserve(list.size() + n_ops);
    std::size_t i = 0;
    while (true) {
      std::size_t best = hs.size();
      for (std::size_t q = 0; q < hs.size(); ++q) {
        if (next[q] >= hs[q].size()) continue;
        if (best == hs.size()) {
          best = q;
          continue;
        }
        const std::uint32_t a = hs[q][next[q]], b = hs[best][next[best]];
        if (pos(a) < pos(b) || (pos(a) == pos(b) && key_less(xfers_[a >> 1], xfers_[b >> 1])))
          best = q;
      }
      if (best == hs.size()) break;
      const std::uint32_t op = hs[best][next[best]++];
      const std::uint32_t slot = slot_of(pos(op));
      if (slot > list.size())
        throw InternalError("lower: op placed past the end of rank " + std::to_string(r));
      while (i < slot) out.push_back(list[i++]);
      const Xfer& x = xfers_[op >> 1];
      out.push_back((op & 1u) ? send_action(x) : recv_action(x));
    }
    while (i < list.size()) out.push_back(list[i++]);
    return out;
  }

  const Plan& plan_;
  const LowerOptions& options_;
  const CostModel& costs_;  // the planning costs (zero durations made positive)
  const ProducerIndex& producers_;
  const Timing& timing_;
  const std::vector<std::vector<double>>& latest_;  // latest starts (deadlines)
  int stages_, mbs_;
  std::vector<int> rank_of_;
  std::vector<std::int32_t> tid_f_, tid_b_;  // transfer id per sending (stage, mb)
  std::vector<int> memo_;
  std::map<std::pair<int, int>, int> dir_ids_;
  std::vector<Dir> dirs_;
  std::vector<Xfer> xfers_;
  std::vector<std::vector<int>> sends_of_, recvs_of_;
  std::vector<std::uint32_t> ops_, limit_;  // scratch of walk_history
  // Per rank: its histories (pair ends, or one with serial_safe), each the
  // ops it posts there in order (id << 1 | 1 for a send).
  std::vector<std::vector<std::vector<std::uint32_t>>> histories_;
  std::vector<std::uint32_t> heap_, order_;  // scratch of order_pair, walk_ends
  double hop_ = 0.0;                         // transfer time
  LowerReport report_;
};

// The cost model the bound is timed with: zero durations would let start
// times tie across a rank, which the ordering argument excludes, so they
// become a sliver of the smallest positive cost.
CostModel planning_costs(const CostModel& given, int num_stages) {
  // The simulator's bounds (every duration a number in 0..limits::kMaxCost).
  check_costs(given, num_stages, "lower: ");
  CostModel c = given;
  double top = std::max({c.f, c.b, c.i, c.w, 1e-300});
  const double sliver = top * 1e-6;
  for (double* v : {&c.f, &c.b, &c.i, &c.w})
    if (*v == 0.0) *v = sliver;
  if (c.overlap && *c.overlap == 0.0) c.overlap = sliver;
  for (auto& [stage, s] : c.stage_scales)
    for (double* v : {&s.f, &s.b, &s.i, &s.w})
      if (*v == 0.0) *v = 1e-6;
  return c;
}

}  // namespace

Plan lower_latency_hiding(const Plan& plan, const LowerOptions& options, LowerReport* report) {
  if (options.max_prefetch < 0)
    throw InputError("lower: the prefetch cap must be >= 0 (0: no limit), got " +
                     std::to_string(options.max_prefetch));
  if (options.mode == LowerMode::Exact && (options.max_prefetch > 0 || options.serial_safe))
    throw InputError(std::string("lower: the exact lowering orders each rank pair's transfers on "
                                 "their own, with every receive posted as early as the order "
                                 "allows; it takes no ") +
                     (options.serial_safe ? "serial-safe order" : "prefetch cap"));
  const CostModel costs = planning_costs(options.costs, plan.meta.num_stages());
  const Timing timing = time_compute(plan, costs, TimingFields::End);
  refuse_if_stuck(timing);
  const ProducerIndex producers(plan);
  const auto latest = latest_starts(plan, costs, timing, producers);
  Lowering lowering(plan, options, costs, producers, timing, latest);
  Plan out = lowering.run();
  if (report) *report = lowering.report();
  return out;
}

}  // namespace pipeplan::detail
