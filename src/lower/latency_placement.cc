// Phase 3 of the latency-hiding lowering (latency.cc): the placement.
#include "lower/latency_placement.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/error.h"

namespace pipeplan::detail::hiding {
namespace {

constexpr std::uint32_t kSubSend = 0, kSubRecv = 1;
std::uint32_t pack(std::uint32_t slot, std::uint32_t sub) { return slot << 1 | sub; }
std::uint32_t slot_of(std::uint32_t p) { return p >> 1; }

}  // namespace

void Placement::walk_history(int r, std::vector<std::uint32_t> ops) {
  // The latest slot each receive may take: no later than any receive after
  // it in the history.
  limit_.resize(ops.size());
  std::uint32_t lim = UINT32_MAX;
  for (std::size_t k = ops.size(); k-- > 0;) {
    if ((ops[k] & 1u) == 0)
      lim = std::min(lim, static_cast<std::uint32_t>(t_.xfers[ops[k] >> 1].consumer));
    limit_[k] = lim;
  }
  std::uint32_t back = 0;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    Xfer& x = t_.xfers[ops[k] >> 1];
    if (ops[k] & 1u) {
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
  histories_[static_cast<std::size_t>(r)].push_back(std::move(ops));
}

void Placement::walk_ends(int d0, int d1, const std::vector<std::uint32_t>& order) {
  for (int d : {d0, d1}) {
    if (d < 0) continue;
    const Dir& dir = t_.dirs[static_cast<std::size_t>(d)];
    const std::uint32_t up = dir.src < dir.dst ? 1u : 0u;  // the sender sends upwards
    std::vector<std::uint32_t> ops;
    ops.reserve(order.size());
    for (std::uint32_t op : order) ops.push_back((op & ~1u) | ((op & 1u) == up ? 1u : 0u));
    walk_history(dir.src, std::move(ops));
  }
  if (d1 < 0) {  // one-way pair: the receiving end
    std::vector<std::uint32_t> ops;
    ops.reserve(order.size());
    for (std::uint32_t op : order) ops.push_back(op & ~1u);
    walk_history(t_.dirs[static_cast<std::size_t>(d0)].dst, std::move(ops));
  }
}

Plan Placement::emit_plan() const {
  Plan out;
  out.meta = plan_.meta;
  out.rank_ids = plan_.rank_ids;
  out.ranks.resize(plan_.ranks.size());
  for (std::size_t r = 0; r < plan_.ranks.size(); ++r) out.ranks[r] = emit(static_cast<int>(r));
  return out;
}

Action Placement::send_action(const Xfer& x) {
  return make(x.grad ? ActionType::SendB : ActionType::SendF, x.send_stage, x.mb);
}

Action Placement::recv_action(const Xfer& x) {
  return x.grad ? make(ActionType::RecvB, x.send_stage - 1, x.mb)
                : make(ActionType::RecvF, x.send_stage + 1, x.mb);
}

std::vector<Action> Placement::emit(int r) const {
  const auto& hs = histories_[static_cast<std::size_t>(r)];
  std::vector<std::size_t> next(hs.size(), 0);
  std::size_t n_ops = 0;
  for (const auto& h : hs) n_ops += h.size();
  auto pos = [&](std::uint32_t op) {
    const Xfer& x = t_.xfers[op >> 1];
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
      if (pos(a) < pos(b) || (pos(a) == pos(b) && key_less(t_.xfers[a >> 1], t_.xfers[b >> 1])))
        best = q;
    }
    if (best == hs.size()) break;
    const std::uint32_t op = hs[best][next[best]++];
    const std::uint32_t slot = slot_of(pos(op));
    if (slot > list.size())
      throw InternalError("lower: op placed past the end of rank " + std::to_string(r));
    while (i < slot) out.push_back(list[i++]);
    const Xfer& x = t_.xfers[op >> 1];
    out.push_back((op & 1u) ? send_action(x) : recv_action(x));
  }
  while (i < list.size()) out.push_back(list[i++]);
  return out;
}

}  // namespace pipeplan::detail::hiding
