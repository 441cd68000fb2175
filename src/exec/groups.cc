// BATCH_P2P groups: every member posted as one batch, then all of them
// waited for before the rank goes on, as torch's batch_isend_irecv followed
// by wait() on each request (Megatron-LM's batched P2P). On NCCL the batch
// is one ncclGroupStart/ncclGroupEnd (Communicator::begin_group); on Gloo the
// members are posted one after the other and complete as their peers post.
//
// Shape headers: a member that carries the first transfer of a boundary in
// the step is preceded by the boundary's spec (actions.cc). On Gloo a
// receive whose spec is not known yet is posted once its header is in, while
// the group is waited. NCCL cannot wait inside a group and matches in posting
// order, so there the headers of the group's members are exchanged first, as
// a batch of their own, and the payloads follow as the group.
#include <ATen/ATen.h>

#include "exec/replay.h"
#include "pipeplan/error.h"

namespace pipeplan::exec {

using detail::Dir;

void Executor::Impl::run_group(const std::vector<Action>& program, std::size_t first,
                               std::size_t n) {
  const Action* members = program.data() + first;
  if (comm->backend() == Backend::Nccl) exchange_group_headers(members, n);
  const std::size_t other_before = other_sends.size();
  comm->begin_group();
  try {
    for (std::size_t k = 0; k < n; ++k) run_observed(program, first + k);
  } catch (...) {
    comm->end_group();
    throw;
  }
  comm->end_group();
  await_group(members, n, other_before);
}

// NCCL: the headers the group's members carry, as one batch, and the
// receiving ones waited for, so every payload's shape is known when the group
// posts it.
void Executor::Impl::exchange_group_headers(const Action* members, std::size_t n) {
  std::vector<int> sends, recvs_due;
  for (std::size_t k = 0; k < n; ++k) {
    const Action& a = members[k];
    if (a.type == ActionType::SendF && header_due(a.stage) && !header_sent[a.stage] &&
        slot(a.stage, a.microbatch).forward_done)
      sends.push_back(static_cast<int>(k));
    if (a.type == ActionType::RecvF && header_due(a.stage - 1) && !header_received[a.stage - 1])
      recvs_due.push_back(a.stage - 1);
  }
  if (sends.empty() && recvs_due.empty()) return;
  comm->begin_group();
  try {
    for (int k : sends) send_header(members[k].stage, members[k].microbatch);
    for (int from : recvs_due) post_header(from);
  } catch (...) {
    comm->end_group();
    throw;
  }
  comm->end_group();
  for (int from : recvs_due) await_header(from);
}

// Every member complete: receives in (their consumers unpack them), sends
// delivered (their buffers released).
void Executor::Impl::await_group(const Action* members, std::size_t n,
                                 std::size_t other_sends_before) {
  for (std::size_t k = 0; k < n; ++k) {
    const Action& a = members[k];
    if (a.type == ActionType::RecvF || a.type == ActionType::RecvB) {
      const Dir dir = a.type == ActionType::RecvF ? Dir::Forward : Dir::Backward;
      auto it = recvs.find({static_cast<int>(dir), a.stage, a.microbatch});
      if (it == recvs.end())
        throw InternalError(me() + "no receive posted for " + to_string(a) + " in its group");
      await_recv(it->second, dir, a.stage);
    } else if (a.type == ActionType::SendF) {
      release_forward_sends(a.stage, a.microbatch);
    }
  }
  // The group's SEND_Bs, in posting order.
  for (std::size_t i = other_sends_before; i < other_sends.size(); ++i)
    other_sends[i].op->wait(timeout(), other_sends[i].what);
  other_sends.resize(other_sends_before);
}

}  // namespace pipeplan::exec
