#include "bench/reach.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace pipeplan::bench {
namespace {

struct Node {  // a compute action
  int rank = 0, index = 0;
  double dur = 0.0, est = 0.0, lst = 0.0;
  int next = -1, prev = -1;  // along its rank
  std::vector<int> in, out;  // transfers it consumes / produces
};

struct Xfer {
  int producer = 0, consumer = 0, pair = 0;
  double est = 0.0, lst = 0.0;
};

std::string name(const Plan& p, const Node& n) {
  return to_string(p.ranks[static_cast<std::size_t>(n.rank)][static_cast<std::size_t>(n.index)]);
}

}  // namespace

std::optional<std::string> bound_out_of_reach(const Plan& compute, const CostModel& costs) {
  SimOptions so;
  so.costs = costs;
  const SimResult bound = simulate(compute, so);
  if (!bound.ok()) return std::nullopt;
  const double makespan = bound.makespan, hop = costs.transfer_time();
  const double eps = 1e-9 * std::max(1.0, makespan);

  std::vector<int> first(compute.ranks.size() + 1, 0);
  for (std::size_t r = 0; r < compute.ranks.size(); ++r)
    first[r + 1] = first[r] + static_cast<int>(compute.ranks[r].size());
  std::vector<Node> nodes(static_cast<std::size_t>(first.back()));
  for (std::size_t r = 0; r < compute.ranks.size(); ++r)
    for (std::size_t i = 0; i < compute.ranks[r].size(); ++i) {
      Node& n = nodes[static_cast<std::size_t>(first[r]) + i];
      n.rank = static_cast<int>(r);
      n.index = static_cast<int>(i);
      n.dur = costs.duration(compute.ranks[r][i]);
      n.est = bound.times[r][i].start;
      if (i > 0) n.prev = first[r] + static_cast<int>(i) - 1;
      if (i + 1 < compute.ranks[r].size()) n.next = first[r] + static_cast<int>(i) + 1;
    }
  std::vector<Xfer> xs;
  std::vector<std::vector<int>> pairs;  // transfer ids per rank pair
  std::vector<int> pair_id(compute.ranks.size() * compute.ranks.size(), -1);
  for (const Transfer& t : bound.transfers) {
    const int lo = std::min(t.src_rank, t.dst_rank), hi = std::max(t.src_rank, t.dst_rank);
    int& id =
        pair_id[static_cast<std::size_t>(lo) * compute.ranks.size() + static_cast<std::size_t>(hi)];
    if (id < 0) {
      id = static_cast<int>(pairs.size());
      pairs.emplace_back();
    }
    Xfer x;
    x.producer = first[static_cast<std::size_t>(t.src_rank)] + t.src_index;
    x.consumer = first[static_cast<std::size_t>(t.dst_rank)] + t.dst_index;
    x.pair = id;
    x.est = t.start;
    pairs[static_cast<std::size_t>(id)].push_back(static_cast<int>(xs.size()));
    nodes[static_cast<std::size_t>(x.producer)].out.push_back(static_cast<int>(xs.size()));
    nodes[static_cast<std::size_t>(x.consumer)].in.push_back(static_cast<int>(xs.size()));
    xs.push_back(x);
  }
  // The eager run's start order is an order of the dependencies.
  std::vector<int> order(nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return nodes[static_cast<std::size_t>(a)].est < nodes[static_cast<std::size_t>(b)].est;
  });

  auto forward = [&] {  // earliest starts
    bool moved = false;
    for (int id : order) {
      Node& n = nodes[static_cast<std::size_t>(id)];
      double e = n.est;
      if (n.prev >= 0)
        e = std::max(e, nodes[static_cast<std::size_t>(n.prev)].est +
                            nodes[static_cast<std::size_t>(n.prev)].dur);
      for (int x : n.in) e = std::max(e, xs[static_cast<std::size_t>(x)].est + hop);
      if (e > n.est + eps) n.est = e, moved = true;
      for (int x : n.out) {
        Xfer& t = xs[static_cast<std::size_t>(x)];
        if (n.est + n.dur > t.est + eps) t.est = n.est + n.dur, moved = true;
      }
    }
    return moved;
  };
  auto backward = [&] {  // latest starts: consumers first, the reverse of the start order
    bool moved = false;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node& n = nodes[static_cast<std::size_t>(*it)];
      double f = n.next >= 0 ? nodes[static_cast<std::size_t>(n.next)].lst : makespan;
      for (int x : n.out) f = std::min(f, xs[static_cast<std::size_t>(x)].lst);
      if (f - n.dur < n.lst - eps) n.lst = f - n.dur, moved = true;
      for (int x : n.in) {
        Xfer& t = xs[static_cast<std::size_t>(x)];
        if (n.lst - hop < t.lst - eps) t.lst = n.lst - hop, moved = true;
      }
    }
    return moved;
  };
  for (Xfer& t : xs) t.lst = makespan;
  for (Node& n : nodes) n.lst = makespan;
  backward();

  for (int round = 0; round < 100000; ++round) {
    bool moved = false;
    for (const auto& ids : pairs)
      for (std::size_t a = 0; a < ids.size(); ++a)
        for (std::size_t b = a + 1; b < ids.size(); ++b) {
          Xfer& x = xs[static_cast<std::size_t>(ids[a])];
          Xfer& y = xs[static_cast<std::size_t>(ids[b])];
          const bool x_first = x.est + hop <= y.lst + eps, y_first = y.est + hop <= x.lst + eps;
          if (!x_first && !y_first) {
            const Node& xp = nodes[static_cast<std::size_t>(x.producer)];
            const Node& xc = nodes[static_cast<std::size_t>(x.consumer)];
            const Node& yp = nodes[static_cast<std::size_t>(y.producer)];
            const Node& yc = nodes[static_cast<std::size_t>(y.consumer)];
            const std::string what =
                x.producer == y.producer && x.consumer == y.consumer
                    ? "the two values " + name(compute, xp) + " sends to " + name(compute, xc)
                    : name(compute, xp) + " -> " + name(compute, xc) + " and " + name(compute, yp) +
                          " -> " + name(compute, yc);
            return "two transfers between ranks " + std::to_string(xp.rank) + " and " +
                   std::to_string(xc.rank) + ", " + what + ", fit in neither order";
          }
          if (x_first && !y_first) {  // x goes first
            if (x.est + hop > y.est + eps) y.est = x.est + hop, moved = true;
            if (y.lst - hop < x.lst - eps) x.lst = y.lst - hop, moved = true;
          } else if (y_first && !x_first) {
            if (y.est + hop > x.est + eps) x.est = y.est + hop, moved = true;
            if (x.lst - hop < y.lst - eps) y.lst = x.lst - hop, moved = true;
          }
        }
    moved |= forward();
    moved |= backward();
    for (const Node& n : nodes)
      if (n.est > n.lst + eps)
        return name(compute, n) + " on rank " + std::to_string(n.rank) + " cannot start before " +
               std::to_string(n.est) + " but must start by " + std::to_string(n.lst);
    for (const Xfer& t : xs)
      if (t.est > t.lst + eps)
        return "the transfer " + name(compute, nodes[static_cast<std::size_t>(t.producer)]) +
               " -> " + name(compute, nodes[static_cast<std::size_t>(t.consumer)]) +
               " cannot start before " + std::to_string(t.est) + " but must start by " +
               std::to_string(t.lst);
    if (!moved) break;
  }
  return std::nullopt;
}

}  // namespace pipeplan::bench
