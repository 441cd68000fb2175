#include "lower/pair_order.h"

#include <algorithm>
#include <queue>

#include "lower/timing.h"
#include "pipeplan/error.h"

namespace pipeplan::detail {
namespace {

// A compute ends on a rank: 16 bytes, by time, then rank.
struct Event {
  double t;
  std::uint32_t rank;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : rank > o.rank; }
};

// A transfer as the run needs it, copied out of its Xfer once, so the run
// reads these short records in order rather than Xfers at random: its
// deadline, id, pair, and where it is consumed. A sending rank's outgoing
// list holds them in producer order; a pair's ready heap and the arrivals
// hold the same records.
struct Flight {
  double t;          // its deadline while it waits; when it arrives, once taken
  std::uint32_t op;  // id << 1 | 1 when it goes from the lower rank to the higher
  std::uint32_t pair, dst, consumer;
};

}  // namespace

std::vector<std::vector<std::uint32_t>> serialized_pair_orders(
    const Plan& plan, const CostModel& costs, const std::vector<Xfer>& xfers,
    const std::vector<std::uint32_t>& pair_of, int n_pairs, double& makespan) {
  makespan = 0.0;
  const std::size_t n_ranks = plan.ranks.size();
  if (xfers.size() >= (1u << 31)) throw InputError("lower: more than 2^31 transfers");
  // Per rank: how many transfers each action still waits for, and the
  // transfers it sends (producer index and id), in producer order.
  std::vector<std::vector<std::uint8_t>> need(n_ranks);
  for (std::size_t r = 0; r < n_ranks; ++r) need[r].assign(plan.ranks[r].size(), 0);
  std::vector<std::vector<Flight>> outgoing(n_ranks);
  std::vector<std::vector<std::int32_t>> producer(n_ranks);  // beside outgoing
  for (std::uint32_t id = 0; id < xfers.size(); ++id) {
    const Xfer& x = xfers[id];
    ++need[static_cast<std::size_t>(x.dst)][static_cast<std::size_t>(x.consumer)];
    outgoing[static_cast<std::size_t>(x.src)].push_back(
        {x.deadline, id << 1 | (x.src < x.dst ? 1u : 0u), static_cast<std::uint32_t>(pair_of[id]),
         static_cast<std::uint32_t>(x.dst), static_cast<std::uint32_t>(x.consumer)});
    producer[static_cast<std::size_t>(x.src)].push_back(x.producer);
  }
  std::vector<std::size_t> next(n_ranks, 0), next_out(n_ranks, 0);
  std::vector<char> running(n_ranks, 0);

  auto later = [&](const Flight& a, const Flight& b) {  // max-heap order -> min deadline on top
    if (a.t != b.t) return a.t > b.t;
    return key_less(xfers[b.op >> 1], xfers[a.op >> 1]);
  };
  std::vector<std::vector<Flight>> ready(static_cast<std::size_t>(n_pairs));
  std::vector<char> busy(static_cast<std::size_t>(n_pairs), 0),
      dirty_mark(static_cast<std::size_t>(n_pairs), 0);
  std::vector<int> dirty;
  std::vector<std::vector<std::uint32_t>> order(static_cast<std::size_t>(n_pairs));
  // Compute ends (at most one per rank) in a heap; transfer ends in a FIFO:
  // every transfer takes the same time and starts at the run's current
  // time, so they end in the order they start. Within one instant the order
  // of ends does not matter: a rank starts its next action at that instant
  // whichever comes first, its compute's end or its input's arrival, and
  // streams choose only once every end of the instant is in.
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::vector<Flight> arrivals;
  arrivals.reserve(static_cast<std::size_t>(n_pairs) + 1);
  std::size_t first_arrival = 0;
  const double hop = costs.transfer_time();
  const Durations duration(costs, plan.meta.num_stages());

  auto try_start = [&](std::size_t r, double now) {
    if (running[r] || next[r] >= plan.ranks[r].size() || need[r][next[r]] > 0) return;
    running[r] = 1;
    events.push({now + duration(plan.ranks[r][next[r]]), static_cast<std::uint32_t>(r)});
  };
  auto mark = [&](int pair) {
    if (!dirty_mark[static_cast<std::size_t>(pair)]) {
      dirty_mark[static_cast<std::size_t>(pair)] = 1;
      dirty.push_back(pair);
    }
  };
  for (std::size_t r = 0; r < n_ranks; ++r) try_start(r, 0.0);
  while (!events.empty() || first_arrival < arrivals.size()) {
    double now = events.empty() ? arrivals[first_arrival].t : events.top().t;
    if (first_arrival < arrivals.size()) now = std::min(now, arrivals[first_arrival].t);
    while (true) {
      if (!events.empty() && events.top().t == now) {
        const std::size_t r = events.top().rank;
        events.pop();
        makespan = now;  // compute ends come in time order
        const auto idx = static_cast<std::int32_t>(next[r]);
        const auto& prod = producer[r];
        while (next_out[r] < prod.size() && prod[next_out[r]] == idx) {
          const Flight& f = outgoing[r][next_out[r]++];
          auto& heap = ready[f.pair];
          heap.push_back(f);
          std::push_heap(heap.begin(), heap.end(), later);
          mark(static_cast<int>(f.pair));
        }
        running[r] = 0;
        ++next[r];
        try_start(r, now);
      } else if (first_arrival < arrivals.size() && arrivals[first_arrival].t == now) {
        const Flight f = arrivals[first_arrival++];
        busy[f.pair] = 0;
        mark(static_cast<int>(f.pair));
        --need[f.dst][f.consumer];
        try_start(f.dst, now);
      } else {
        break;
      }
    }
    if (first_arrival > 256 && 2 * first_arrival > arrivals.size()) {  // drop what was taken
      arrivals.erase(arrivals.begin(),
                     arrivals.begin() + static_cast<std::ptrdiff_t>(first_arrival));
      first_arrival = 0;
    }
    // Every release at `now` is in: free streams pick the earliest deadline.
    for (int pair : dirty) {
      const auto p = static_cast<std::size_t>(pair);
      dirty_mark[p] = 0;
      auto& heap = ready[p];
      if (busy[p] || heap.empty()) continue;
      std::pop_heap(heap.begin(), heap.end(), later);
      Flight f = heap.back();
      heap.pop_back();
      order[p].push_back(f.op);
      busy[p] = 1;
      f.t = now + hop;
      arrivals.push_back(f);
    }
    dirty.clear();
  }
  for (std::size_t r = 0; r < n_ranks; ++r)
    if (next[r] < plan.ranks[r].size())
      throw InternalError("lower: the pair-stream run of rank " + std::to_string(r) +
                          " stopped at index " + std::to_string(next[r]));
  return order;
}

}  // namespace pipeplan::detail
