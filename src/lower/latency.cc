// The latency-hiding lowering (LowerMode::LatencyHiding, and LowerMode::Exact,
// which searches harder).
//
// 1. Time the compute order under the caller's cost model, each cross-rank
//    value arriving its transfer time after its producer ends: the eager
//    bound. A transfer is released when its producer ends there; its
//    deadline is its consumer's latest start that keeps the bound's
//    makespan (latest_starts: slack-aware, so of two transfers wanted at
//    the same time the one on the critical path goes first).
// 2. Each rank pair's order is the order its one stream takes transfers in
//    a run of the compute order where a pair carries one transfer at a
//    time, picking the earliest deadline among those released
//    (pair_order.h). Where that run misses the bound, a local search swaps
//    adjacent transfers on a pair while that shortens the run, and small
//    plans get an exact branch and bound over every pair's order
//    (order_search.h, timing orders on the execution core: stream_run.h). With a prefetch cap: plain deadline
//    order, so each end receives in consumer order. With serial_safe: one
//    global order, by release (by deadline with a cap). Both ends post in
//    the pair's order, so the pair FIFO is complementary by construction.
// 3. A send goes right after its producer, later only when the pair order
//    puts an earlier transfer of the pair after that point on this rank; a
//    receive goes right after the previous operation of its pair end (as
//    early as the order allows), but no earlier than `max_prefetch`
//    receives ahead of their consumers on its rank. Without a cap no post
//    then waits for anything its stream would not wait for anyway, so the
//    pair-stream run's makespan is the lowered plan's under rendezvous.
//
// Why every receive fits before its consumer (X before Y in a pair's order,
// X a send on Y's receiving rank): in a pair-stream run X's producer ended
// before X was taken, and Y's consumer started after Y arrived, later; in
// release or deadline order, Y's consumer preceding X's producer in the
// list would make Y both released and due before X. With positive
// durations the producer then precedes the consumer in the list. An earlier
// receive is placed no later than the smallest consumer slot of the
// receives after it. Progress: by induction over that run's time, every
// transfer is posted on both ends and its pair reaches it, so no rank waits
// forever (verify() proves each plan; tests/latency_test.cc, sweep_test.cc).
//
// Cost: linear in the actions, plus O(log) per transfer for the deadline
// run's heaps, plus the searches' bounded work where the bound is missed
// (order_search.cc's limits). When no two transfers of a pair meet in the
// bound's run, the pair-stream run is skipped: it would repeat the bound
// (release_orders). Transfers are listed per direction in producer order; a
// history is a merge of at most four such lists; each rank's program a
// merge by position.
//
// Files: phase 1 is latency_transfers.cc, phase 3 latency_placement.cc;
// phase 2 (PairOrders) and the entry point are here.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lower/latency.h"
#include "lower/latency_placement.h"
#include "lower/latency_transfers.h"
#include "lower/order_search.h"
#include "lower/pair_order.h"
#include "lower/producers.h"
#include "lower/stream_run.h"
#include "lower/timing.h"
#include "model/cost_check.h"
#include "pipeplan/error.h"

namespace pipeplan::detail {
namespace {

using hiding::collect_transfers;
using hiding::Dir;
using hiding::Placement;
using hiding::Transfers;

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

// Phase 2: the order each rank pair's stream (serial-safe: each rank)
// takes its transfers in; each history goes to the placement.
class PairOrders {
 public:
  PairOrders(const Plan& plan, const LowerOptions& options, const CostModel& costs,
             const Transfers& t, Placement& place, LowerReport& report)
      : plan_(plan),
        options_(options),
        costs_(costs),
        t_(t),
        place_(place),
        report_(report),
        hop_(costs.transfer_time()) {}

  void run() {
    if (!options_.serial_safe) return walk_pairs();
    for (int r = 0; r < static_cast<int>(plan_.ranks.size()); ++r) walk_rank_serial(r);
  }

 private:
  // Serial-safe: one history per rank, all its peers merged in key order
  // (a global order, so every rank's streams agree); with a prefetch cap,
  // in deadline order (consumer's latest start, then key).
  void walk_rank_serial(int r) {
    const auto& xfers = t_.xfers;
    // The merge keeps each run's head key (data-ready time) beside it, so a
    // step compares cached times and reads a transfer only on a tie.
    struct Run {
      const std::vector<std::uint32_t>* ids;
      std::size_t next;
      std::uint32_t send;
      double t;
    };
    std::vector<Run> runs;
    std::size_t total = 0;
    auto add = [&](int d, bool send) {
      const auto& ids = t_.dirs[static_cast<std::size_t>(d)].ids;
      total += ids.size();
      if (!ids.empty()) runs.push_back({&ids, 0, send ? 1u : 0u, xfers[ids[0]].t});
    };
    for (int d : t_.sends_of[static_cast<std::size_t>(r)]) add(d, true);
    for (int d : t_.recvs_of[static_cast<std::size_t>(r)]) add(d, false);
    std::vector<std::uint32_t> ops;
    ops.reserve(total);
    while (!runs.empty()) {
      std::size_t best = 0;
      for (std::size_t q = 1; q < runs.size(); ++q) {
        const Run& a = runs[q];
        const Run& b = runs[best];
        if (a.t < b.t || (a.t == b.t && key_less(xfers[(*a.ids)[a.next]], xfers[(*b.ids)[b.next]])))
          best = q;
      }
      Run& run = runs[best];
      ops.push_back((*run.ids)[run.next] << 1 | run.send);
      if (++run.next < run.ids->size()) {
        run.t = xfers[(*run.ids)[run.next]].t;
      } else {
        runs.erase(runs.begin() + static_cast<std::ptrdiff_t>(best));
      }
    }
    if (options_.max_prefetch > 0)  // receive in consumer order: the cap stays exact
      std::stable_sort(ops.begin(), ops.end(), [&](std::uint32_t a, std::uint32_t b) {
        const Xfer& x = xfers[a >> 1];
        const Xfer& y = xfers[b >> 1];
        if (x.deadline != y.deadline) return x.deadline < y.deadline;
        return key_less(x, y);
      });
    place_.walk_history(r, std::move(ops));
  }

  // Per pair, with a prefetch cap: the pair's transfers by deadline (the
  // consumer's latest start), so each end receives in consumer order.
  void order_pair(int d0, int d1) {
    const auto& xfers = t_.xfers;
    const double hop = hop_;
    const bool capped = options_.max_prefetch > 0;
    std::vector<Seq> seqs;
    for (int d : {d0, d1})
      if (d >= 0) seqs.push_back({&t_.dirs[static_cast<std::size_t>(d)].ids, 0, true});
    auto deadline_less = [&](std::uint32_t a, std::uint32_t b) {
      const Xfer& x = xfers[a];
      const Xfer& y = xfers[b];
      if (x.deadline != y.deadline) return x.deadline > y.deadline;  // min-heap
      return key_less(y, x);
    };
    heap_.clear();
    order_.clear();
    double free_at = 0.0;
    auto next_release = [&]() {
      return smallest(seqs, [&](std::size_t x, std::size_t y) {
        return key_less(xfers[seqs[x].head()], xfers[seqs[y].head()]);
      });
    };
    while (true) {
      std::size_t q = next_release();
      if (heap_.empty()) {
        if (q == seqs.size()) break;
        free_at = std::max(free_at, xfers[seqs[q].head()].t);
      }
      // With a prefetch cap the pair takes transfers in deadline order (all
      // released at once): each end then receives in consumer order, which
      // keeps the cap exact.
      while (q < seqs.size() && (capped || xfers[seqs[q].head()].t <= free_at)) {
        heap_.push_back(seqs[q].head());
        std::push_heap(heap_.begin(), heap_.end(), deadline_less);
        ++seqs[q].next;
        q = next_release();
      }
      std::pop_heap(heap_.begin(), heap_.end(), deadline_less);
      const std::uint32_t id = heap_.back();
      heap_.pop_back();
      order_.push_back(id << 1 | (xfers[id].src < xfers[id].dst ? 1u : 0u));
      free_at = std::max(free_at, xfers[id].t) + hop;
    }
    place_.walk_ends(d0, d1, order_);
  }

  void walk_pairs() {
    std::vector<std::pair<int, int>> pairs;  // (direction, its reverse or -1)
    std::vector<int> pair_of_dir(t_.dirs.size(), -1);
    for (std::size_t d = 0; d < t_.dirs.size(); ++d) {
      const Dir& x = t_.dirs[d];
      auto it = t_.dir_ids.find({x.dst, x.src});
      const int rev = it == t_.dir_ids.end() ? -1 : it->second;
      if (rev >= 0 && x.src > x.dst) continue;  // the pair is taken from its lower rank
      pair_of_dir[d] = static_cast<int>(pairs.size());
      if (rev >= 0) pair_of_dir[static_cast<std::size_t>(rev)] = static_cast<int>(pairs.size());
      pairs.emplace_back(static_cast<int>(d), rev);
    }
    if (options_.max_prefetch > 0) {
      for (auto [d0, d1] : pairs) order_pair(d0, d1);
      return;
    }
    StreamOrders orders;
    if (release_orders(pairs, orders)) {
      report_.orders = LowerReport::Orders::Bound;
      report_.makespan = report_.bound;
    } else {
      orders = searched_orders(pairs, pair_of_dir);
    }
    for (std::size_t k = 0; k < pairs.size(); ++k)
      place_.walk_ends(pairs[k].first, pairs[k].second, orders[k]);
  }

  // Each pair in the order its stream takes transfers when it carries one
  // at a time, earliest deadline first among those ready (pair_order.h);
  // where that misses the bound, the orders a search finds there
  // (order_search.h).
  StreamOrders searched_orders(const std::vector<std::pair<int, int>>& pairs,
                               const std::vector<int>& pair_of_dir) {
    static const std::vector<std::uint32_t> kNone;
    PairTransfers in;
    in.plan = &plan_;
    in.xfers = &t_.xfers;
    in.tid_f = &t_.tid_f;
    in.tid_b = &t_.tid_b;
    in.stages = plan_.meta.num_stages();
    in.mbs = plan_.meta.num_microbatches;
    in.ends = deps::Ends(plan_.meta);
    for (auto [d0, d1] : pairs) {
      const Dir& a = t_.dirs[static_cast<std::size_t>(d0)];
      const std::vector<std::uint32_t>* other =
          d1 < 0 ? &kNone : &t_.dirs[static_cast<std::size_t>(d1)].ids;
      in.up.push_back(a.src < a.dst ? &a.ids : other);
      in.down.push_back(a.src < a.dst ? other : &a.ids);
    }
    in.pair_of.assign(t_.xfers.size(), 0);
    for (std::size_t d = 0; d < t_.dirs.size(); ++d)
      for (std::uint32_t id : t_.dirs[d].ids)
        in.pair_of[id] = static_cast<std::uint32_t>(pair_of_dir[d]);
    double makespan = 0.0;
    StreamOrders first = serialized_pair_orders(plan_, costs_, t_.xfers, in.pair_of,
                                                static_cast<int>(pairs.size()), makespan);
    SearchedOrders found =
        search_orders(in, costs_, std::move(first), makespan, report_.bound,
                      options_.mode == LowerMode::Exact, [&] { return seed_orders(in); });
    report_.makespan = found.makespan;
    report_.orders = found.verdict;
    return std::move(found.orders);
  }

  // The pair orders of the seed lowering (each pair by its consumers'
  // starts in a unit-cost run, close to torch's round robin), for the
  // search to start from where they are faster; empty if it refuses.
  StreamOrders seed_orders(const PairTransfers& in) const {
    LowerOptions o;
    o.mode = LowerMode::Seed;
    o.costs = options_.costs;
    o.send_placement = options_.send_placement;
    Plan seeded;
    try {
      seeded = lower(plan_, o);
    } catch (const Error&) {
      return {};
    }
    StreamOrders orders(static_cast<std::size_t>(in.n_pairs()));
    const int stages = in.stages;
    for (std::size_t r = 0; r < seeded.ranks.size(); ++r)
      for (const Action& a : seeded.ranks[r]) {
        int from = a.stage;  // the sending stage
        bool grad = false;
        switch (a.type) {
          case ActionType::SendF: break;
          case ActionType::SendB: grad = true; break;
          case ActionType::RecvF: from = a.stage - 1; break;
          case ActionType::RecvB: from = a.stage + 1, grad = true; break;
          default: continue;
        }
        if (from < 0 || from >= stages || a.microbatch < 0 || a.microbatch >= in.mbs) return {};
        const std::int32_t id =
            (grad ? t_.tid_b
                  : t_.tid_f)[static_cast<std::size_t>(from) * static_cast<std::size_t>(in.mbs) +
                              static_cast<std::size_t>(a.microbatch)];
        if (id < 0) return {};
        const Xfer& x = t_.xfers[static_cast<std::size_t>(id)];
        if (static_cast<std::size_t>(std::min(x.src, x.dst)) != r) continue;  // the lower end's
        orders[in.pair_of[static_cast<std::size_t>(id)]].push_back(
            static_cast<std::uint32_t>(id) << 1 | (x.src < x.dst ? 1u : 0u));
      }
    for (int p = 0; p < in.n_pairs(); ++p)
      if (orders[static_cast<std::size_t>(p)].size() !=
          in.up[static_cast<std::size_t>(p)]->size() + in.down[static_cast<std::size_t>(p)]->size())
        return {};
    return orders;
  }

  // When no transfer of a pair is released less than one transfer time
  // after the previous one (in the bound's run), a pair stream carrying one
  // at a time never makes a transfer wait: the pair-stream run is the
  // bound's run and takes each pair's transfers in release (key) order. Then
  // this fills `orders` so (as the deadline run would, without its events)
  // and returns true; otherwise false.
  bool release_orders(const std::vector<std::pair<int, int>>& pairs, StreamOrders& orders) const {
    if (!(hop_ > 0.0)) return false;  // simultaneous releases: deadlines decide
    const auto& xfers = t_.xfers;
    orders.assign(pairs.size(), {});
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      const auto& up = t_.dirs[static_cast<std::size_t>(pairs[k].first)].ids;
      static const std::vector<std::uint32_t> kNone;
      const auto& down =
          pairs[k].second < 0 ? kNone : t_.dirs[static_cast<std::size_t>(pairs[k].second)].ids;
      auto& order = orders[k];
      order.reserve(up.size() + down.size());
      std::size_t i = 0, j = 0;
      bool any = false;
      double last = 0.0;
      while (i < up.size() || j < down.size()) {
        const bool take_up =
            j >= down.size() || (i < up.size() && key_less(xfers[up[i]], xfers[down[j]]));
        const std::uint32_t id = take_up ? up[i++] : down[j++];
        const Xfer& x = xfers[id];
        if (any && x.t < last + hop_) return false;
        any = true;
        last = x.t;
        order.push_back(id << 1 | (x.src < x.dst ? 1u : 0u));
      }
    }
    return true;
  }

  const Plan& plan_;
  const LowerOptions& options_;
  const CostModel& costs_;  // the planning costs (zero durations made positive)
  const Transfers& t_;
  Placement& place_;
  LowerReport& report_;                      // its bound set by the caller
  std::vector<std::uint32_t> heap_, order_;  // scratch of order_pair
  double hop_ = 0.0;                         // transfer time
};

// The cost model the bound is timed with: zero durations would let start
// times tie across a rank, which the ordering argument excludes, so they
// become a sliver of the smallest positive cost.
CostModel bound_costs(const CostModel& given, int num_stages) {
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
  // The bound: the compute order timed under the costs, and latest starts.
  const CostModel costs = bound_costs(options.costs, plan.meta.num_stages());
  const Timing timing = time_compute(plan, costs, TimingFields::End);
  refuse_if_stuck(timing);
  const ProducerIndex producers(plan);
  const auto latest = latest_starts(plan, costs, timing, producers);
  LowerReport found;
  for (const auto& ends : timing.end)
    for (double e : ends) found.bound = std::max(found.bound, e);
  // 1. the transfers, 2. each pair's order, 3. the positions and programs.
  Transfers transfers = collect_transfers(plan, producers, timing, latest, options.max_prefetch);
  Placement place(plan, transfers);
  PairOrders(plan, options, costs, transfers, place, found).run();
  if (report) *report = found;
  return place.emit_plan();
}

}  // namespace pipeplan::detail
