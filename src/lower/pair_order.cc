#include "lower/pair_order.h"

#include <algorithm>
#include <queue>

#include "pipeplan/error.h"

namespace pipeplan::detail {
namespace {

// A compute ends on a rank, or a transfer ends on a pair.
struct Event {
  double t;
  bool transfer;
  std::uint32_t who;  // rank, or transfer id
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (transfer != o.transfer) return transfer;  // compute ends first
    return who > o.who;
  }
};

}  // namespace

std::vector<std::vector<std::uint32_t>> serialized_pair_orders(const Plan& plan, const CostModel& costs,
                                                               const std::vector<Xfer>& xfers,
                                                               const std::vector<int>& pair_of,
                                                               int n_pairs) {
  const std::size_t n_ranks = plan.ranks.size();
  // Per rank: how many transfers each action still waits for, and the
  // transfers it sends, in producer order.
  std::vector<std::vector<std::uint8_t>> need(n_ranks);
  for (std::size_t r = 0; r < n_ranks; ++r) need[r].assign(plan.ranks[r].size(), 0);
  std::vector<std::vector<std::uint32_t>> outgoing(n_ranks);
  for (std::uint32_t id = 0; id < xfers.size(); ++id) {
    const Xfer& x = xfers[id];
    ++need[static_cast<std::size_t>(x.dst)][static_cast<std::size_t>(x.consumer)];
    outgoing[static_cast<std::size_t>(x.src)].push_back(id);
  }
  std::vector<std::size_t> next(n_ranks, 0), next_out(n_ranks, 0);
  std::vector<char> running(n_ranks, 0);

  auto later = [&](std::uint32_t a, std::uint32_t b) {  // max-heap order -> min deadline on top
    const Xfer& x = xfers[a];
    const Xfer& y = xfers[b];
    if (x.deadline != y.deadline) return x.deadline > y.deadline;
    return key_less(y, x);
  };
  std::vector<std::vector<std::uint32_t>> ready(static_cast<std::size_t>(n_pairs));
  std::vector<char> busy(static_cast<std::size_t>(n_pairs), 0), dirty_mark(static_cast<std::size_t>(n_pairs), 0);
  std::vector<int> dirty;
  std::vector<std::vector<std::uint32_t>> order(static_cast<std::size_t>(n_pairs));
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  const double hop = costs.transfer_time();

  auto try_start = [&](std::size_t r, double now) {
    if (running[r] || next[r] >= plan.ranks[r].size() || need[r][next[r]] > 0) return;
    running[r] = 1;
    events.push({now + costs.duration(plan.ranks[r][next[r]]), false, static_cast<std::uint32_t>(r)});
  };
  auto mark = [&](int pair) {
    if (!dirty_mark[static_cast<std::size_t>(pair)]) {
      dirty_mark[static_cast<std::size_t>(pair)] = 1;
      dirty.push_back(pair);
    }
  };
  for (std::size_t r = 0; r < n_ranks; ++r) try_start(r, 0.0);
  while (!events.empty()) {
    const double now = events.top().t;
    while (!events.empty() && events.top().t == now) {
      const Event e = events.top();
      events.pop();
      if (!e.transfer) {
        const std::size_t r = e.who;
        const auto idx = static_cast<std::int32_t>(next[r]);
        auto& out = outgoing[r];
        while (next_out[r] < out.size() && xfers[out[next_out[r]]].producer == idx) {
          const std::uint32_t id = out[next_out[r]++];
          auto& heap = ready[static_cast<std::size_t>(pair_of[id])];
          heap.push_back(id);
          std::push_heap(heap.begin(), heap.end(), later);
          mark(pair_of[id]);
        }
        running[r] = 0;
        ++next[r];
        try_start(r, now);
      } else {
        const Xfer& x = xfers[e.who];
        busy[static_cast<std::size_t>(pair_of[e.who])] = 0;
        mark(pair_of[e.who]);
        const auto dst = static_cast<std::size_t>(x.dst);
        --need[dst][static_cast<std::size_t>(x.consumer)];
        try_start(dst, now);
      }
    }
    // Every release at `now` is in: free streams pick the earliest deadline.
    for (int pair : dirty) {
      const auto p = static_cast<std::size_t>(pair);
      dirty_mark[p] = 0;
      auto& heap = ready[p];
      if (busy[p] || heap.empty()) continue;
      std::pop_heap(heap.begin(), heap.end(), later);
      const std::uint32_t id = heap.back();
      heap.pop_back();
      order[p].push_back(id);
      busy[p] = 1;
      events.push({now + hop, true, id});
    }
    dirty.clear();
  }
  for (std::size_t r = 0; r < n_ranks; ++r)
    if (next[r] < plan.ranks[r].size())
      throw InternalError("lower: the pair-stream run of rank " + std::to_string(r) + " stopped at index " +
                          std::to_string(next[r]));
  return order;
}

}  // namespace pipeplan::detail
