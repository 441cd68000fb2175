// The batched lowering: Megatron-LM's batch_p2p_comm as a pass. Megatron
// posts, at each communication point of a rank, the send of the output just
// made together with the receive the next compute needs (one
// batch_isend_irecv), and the peer posts the opposite pair at the same time,
// so the two ends never meet send-first without a partner. Here the seed
// placement gives exactly those points (a receive right before its consumer,
// a send right after its producer, later only when the common transfer order
// puts a receive from the same peer first) and this pass turns a meeting
// send and receive into one group on both ends, where parity staggering
// would have delayed one end's send instead.
//
// Why the groups keep the plan deadlock-free (docs/verification.md,
// "Batched lowering"): a group on rank a holds X then Y, and the group on
// its peer b holds partner(X) then partner(Y), adjacent on both ends. In the
// ungrouped plan, which progresses under the serial and rendezvous models,
// X met partner(X) and then Y met partner(Y), with nothing of either rank in
// between; the groups reach the heads of their streams exactly when the two
// first members did, and end together when the second ones would have. A
// rank waits at its group for its receive, which its next compute needs
// anyway, and for its send, which the peer receives in the group that also
// sends that receive's value: nothing waits for more than it did before.
#include "lower/batch.h"

#include <cstdint>
#include <unordered_map>

#include "ir/deps.h"

namespace pipeplan::detail {

namespace {

// The comm action on the other end of `a`: SEND_F(s) <-> RECV_F(s+1),
// SEND_B(s) <-> RECV_B(s-1).
Action partner_of(const Action& a) {
  ActionType t = ActionType::RecvF;
  switch (a.type) {
    case ActionType::SendF: t = ActionType::RecvF; break;
    case ActionType::RecvF: t = ActionType::SendF; break;
    case ActionType::SendB: t = ActionType::RecvB; break;
    default: t = ActionType::SendB; break;
  }
  return Action{t, deps::peer_stage(a), a.microbatch};
}

// A comm action's identity: type, stage and microbatch (the stage names
// the rank).
std::uint64_t key_of(const Action& a) {
  return static_cast<std::uint64_t>(a.type) << 56 |
         static_cast<std::uint64_t>(static_cast<std::uint32_t>(a.stage)) << 28 |
         static_cast<std::uint64_t>(static_cast<std::uint32_t>(a.microbatch));
}

bool in_group(const std::vector<Action>& list, std::size_t i) {
  return list[i].batch_next || (i > 0 && list[i - 1].batch_next);
}

// x then y on one rank: a SEND and a RECV (either order) with one peer.
bool meets(const PlanMeta& meta, const Action& x, const Action& y) {
  if (!is_comm(x.type) || !is_comm(y.type) || is_send(x.type) == is_send(y.type)) return false;
  return meta.rank_of(deps::peer_stage(x)) == meta.rank_of(deps::peer_stage(y));
}

}  // namespace

void group_meeting_transfers(Plan& plan) {
  const PlanMeta& meta = plan.meta;
  std::unordered_map<std::uint64_t, std::size_t> where;  // comm action -> index on its rank
  for (const auto& list : plan.ranks)
    for (std::size_t i = 0; i < list.size(); ++i)
      if (is_comm(list[i].type)) where.emplace(key_of(list[i]), i);
  auto index_of = [&](const Action& a) -> long {
    auto it = where.find(key_of(a));
    return it == where.end() ? -1 : static_cast<long>(it->second);
  };
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    std::vector<Action>& list = plan.ranks[r];
    for (std::size_t i = 0; i + 1 < list.size(); ++i) {
      const Action& x = list[i];
      const Action& y = list[i + 1];
      if (!meets(meta, x, y) || in_group(list, i) || in_group(list, i + 1)) continue;
      const int peer = meta.rank_of(deps::peer_stage(x));
      if (peer < 0 || peer >= static_cast<int>(plan.ranks.size())) continue;
      std::vector<Action>& other = plan.ranks[static_cast<std::size_t>(peer)];
      const long px = index_of(partner_of(x)), py = index_of(partner_of(y));
      if (px < 0 || py != px + 1) continue;  // not adjacent, or crossing
      const auto first = static_cast<std::size_t>(px);
      if (in_group(other, first) || in_group(other, first + 1)) continue;
      list[i].batch_next = true;
      other[first].batch_next = true;
      ++i;
    }
  }
}

Plan lower_batched(const Plan& plan, const LowerOptions& options) {
  LowerOptions base = options;
  base.batch_p2p = false;
  base.mode = LowerMode::Seed;
  base.send_placement = SendPlacement::Earliest;
  base.serial_safe = true;
  Plan out = lower(plan, base);
  group_meeting_transfers(out);
  return out;
}

}  // namespace pipeplan::detail
