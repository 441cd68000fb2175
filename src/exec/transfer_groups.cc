// BATCH_P2P groups in flight (transfers.h): every member posted as one
// batch, then all of them waited for before the rank goes on, as torch's
// batch_isend_irecv followed by wait() on each request (Megatron-LM's
// batched P2P). On NCCL the batch is one ncclGroupStart/ncclGroupEnd
// (Communicator::begin_group); on Gloo the members are posted one after the
// other and complete as their peers post.
//
// Shape headers: a member that carries the first transfer of a boundary in
// the step is preceded by the boundary's shapes. On Gloo a receive whose
// shapes are not known yet is posted once its header is in, while the group
// is waited. NCCL cannot wait inside a group and matches in posting order,
// so there the headers of a group's members are exchanged first, as a batch
// of their own (exchange_group_headers), and the payloads follow as the
// group.
#include <ATen/ATen.h>

#include "exec/transfers.h"
#include "pipeplan/error.h"

namespace pipeplan::exec::detail {

void Transfers::begin_group() {
  group_sends_from_ = other_sends_.size();
  comm_->begin_group();
}

void Transfers::end_group() { comm_->end_group(); }

void Transfers::await_group(const Action* members, std::size_t n) {
  for (std::size_t k = 0; k < n; ++k) {
    const Action& a = members[k];
    if (a.type == ActionType::RecvF || a.type == ActionType::RecvB) {
      const Dir dir = a.type == ActionType::RecvF ? Dir::Forward : Dir::Backward;
      auto it = recvs_.find({static_cast<int>(dir), a.stage, a.microbatch});
      if (it == recvs_.end())
        throw InternalError(me() + "no receive posted for " + to_string(a) + " in its group");
      await_recv(it->second, dir, a.stage);  // its consumer unpacks it
    } else if (a.type == ActionType::SendF) {
      release_forward_sends(a.stage, a.microbatch);
    }
  }
  // The group's SEND_Bs, in posting order.
  for (std::size_t i = group_sends_from_; i < other_sends_.size(); ++i)
    wait_for(*other_sends_[i].op, other_sends_[i].what);
  other_sends_.resize(group_sends_from_);
}

void Transfers::exchange_group_headers(const Action* members, std::size_t n,
                                       const std::function<const Values&(int, int)>& outputs) {
  std::vector<std::size_t> sends;
  std::vector<int> receives;
  for (std::size_t k = 0; k < n; ++k) {
    const Action& a = members[k];
    if (a.type == ActionType::SendF && header_to_send(a.stage)) sends.push_back(k);
    if (a.type == ActionType::RecvF && header_to_receive(a.stage - 1))
      receives.push_back(a.stage - 1);
  }
  if (sends.empty() && receives.empty()) return;
  comm_->begin_group();
  try {
    for (std::size_t k : sends) {
      const Action& a = members[k];
      send_header(a.stage, spec_of(outputs(a.stage, a.microbatch), a.stage), a.microbatch);
    }
    for (int from : receives) post_header(from);
  } catch (...) {
    comm_->end_group();
    throw;
  }
  comm_->end_group();
  for (int from : receives) await_header(from);
}

}  // namespace pipeplan::exec::detail
