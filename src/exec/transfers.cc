// Boundary values and shapes in flight: posting and completing receives,
// sends and their shape headers (transfers.h).
#include "exec/transfers.h"

#include <ATen/ATen.h>

#include "pipeplan/error.h"

namespace pipeplan::exec::detail {

Transfers::Transfers(const PlanMeta& meta, int rank, const ExecOptions& options)
    : meta_(meta),
      rank_(rank),
      num_stages_(meta.num_stages()),
      num_mb_(meta.num_microbatches),
      timeout_(options.timeout),
      reexchange_(options.reexchange_shapes) {
  specs_.resize(num_stages_);
  given_.assign(num_stages_, false);
  learned_.assign(num_stages_, false);
  header_ops_.resize(num_stages_);
  header_msgs_.resize(num_stages_);
  for (const auto& [s, spec] : options.output_specs) {
    if (s < 0 || s >= num_stages_ - 1)
      throw InputError("ExecOptions::output_specs names stage " + std::to_string(s) +
                       ", which has no outgoing boundary");
    specs_[s] = spec;
    given_[s] = true;
  }
}

void Transfers::begin_step(int step) {
  step_ = step;
  header_sent_.assign(num_stages_, false);
  header_received_.assign(num_stages_, false);
}

void Transfers::finish_step() {
  for (auto& [key, sends] : fwd_sends_)
    for (auto& s : sends) wait_for(*s.op, s.what);
  fwd_sends_.clear();
  for (auto& s : other_sends_) wait_for(*s.op, s.what);
  other_sends_.clear();
  if (!recvs_.empty()) throw InternalError(me() + "a posted receive was never consumed");
}

void Transfers::wait_for(PendingOp& op, const std::string& what) {
  if (!timing_) {
    op.wait(timeout_, what);
    return;
  }
  const Clock::time_point t0 = Clock::now();
  op.wait(timeout_, what);
  waited_ += Clock::now() - t0;
}

at::Tensor Transfers::pack(int stage, const Values& values, const BoundarySpec& spec) const {
  try {
    return detail::pack(values, spec, comm_->device());
  } catch (const InputError& e) {
    throw InputError(me() + "stage " + std::to_string(stage) + ": " + e.what());
  }
}

// Completes the header of boundary from_stage -> from_stage+1 (receiver side).
void Transfers::await_header(int from_stage) {
  std::unique_ptr<PendingOp>& op = header_ops_[from_stage];
  if (!op) return;
  wait_for(*op, me() + "receiving the shapes of stage " + std::to_string(from_stage) +
                    "'s outputs from rank " + std::to_string(meta_.rank_of(from_stage)));
  op.reset();
  specs_[from_stage] = decode_spec(header_msgs_[from_stage]);
  header_msgs_[from_stage] = at::Tensor();
  learned_[from_stage] = true;
}

void Transfers::post_recv(Dir dir, int stage, int mb) {
  const bool fwd = dir == Dir::Forward;
  const int from = fwd ? stage - 1 : stage + 1;
  const int spec_stage = fwd ? from : stage;
  PostedRecv r;
  r.peer = meta_.rank_of(from);
  r.tag = tag(dir, from, mb, 0);
  r.what = me() + to_string(make(fwd ? ActionType::RecvF : ActionType::RecvB, stage, mb)) +
           " from rank " + std::to_string(r.peer);
  if (fwd && header_to_receive(from)) {
    // First transfer of this boundary in the step: its spec comes first.
    post_header(from);
    // NCCL matches in posting order, so the payload must be posted now: wait
    // for the header here (safe: the plan is proved under rendezvous). Gloo
    // matches by tag, so the payload is posted when it is needed.
    if (comm_->backend() == Backend::Nccl) await_header(from);
  }
  const bool known = specs_[spec_stage].has_value() && header_ops_[spec_stage] == nullptr;
  if (known) {
    r.spec = fwd ? *specs_[spec_stage] : gradient_spec(*specs_[spec_stage]);
    r.message = empty_message(r.spec, comm_->device());
    if (!r.spec.empty()) r.op = comm_->irecv(r.message, r.peer, r.tag);
    last_bytes_ = r.spec.empty() ? 0 : static_cast<std::int64_t>(r.message.nbytes());
  } else {
    if (comm_->backend() == Backend::Nccl)
      throw InternalError(me() + "no boundary shapes known for " + r.what);
    r.deferred = true;
    last_bytes_ = 0;
  }
  recvs_[{static_cast<int>(dir), stage, mb}] = std::move(r);
}

Values Transfers::complete_recv(Dir dir, int stage, int mb) {
  auto it = recvs_.find({static_cast<int>(dir), stage, mb});
  if (it == recvs_.end())
    throw InternalError(me() + "no receive posted for stage " + std::to_string(stage) +
                        " microbatch " + std::to_string(mb) + " before its consumer");
  PostedRecv r = std::move(it->second);
  recvs_.erase(it);
  await_recv(r, dir, stage);
  return unpack(r.message, r.spec);
}

// Waits for a posted receive, once: one whose shapes were unknown when it was
// posted (Gloo only) is posted now that its header is in.
void Transfers::await_recv(PostedRecv& r, Dir dir, int stage) {
  if (r.deferred) {
    const bool fwd = dir == Dir::Forward;
    const int spec_stage = fwd ? stage - 1 : stage;
    if (fwd) await_header(spec_stage);
    if (!specs_[spec_stage]) throw InternalError(me() + "no boundary shapes known for " + r.what);
    r.spec = fwd ? *specs_[spec_stage] : gradient_spec(*specs_[spec_stage]);
    r.message = empty_message(r.spec, comm_->device());
    if (!r.spec.empty()) r.op = comm_->irecv(r.message, r.peer, r.tag);
    r.deferred = false;
  }
  if (r.op) wait_for(*r.op, r.what);
  r.op.reset();
}

// The header of boundary from -> from+1, received.
void Transfers::post_header(int from) {
  header_received_[from] = true;
  header_msgs_[from] =
      at::empty({kMetaLength}, at::TensorOptions().dtype(at::kLong).device(comm_->device()));
  header_ops_[from] =
      comm_->irecv(header_msgs_[from], meta_.rank_of(from), tag(Dir::Shape, from, 0, 1));
}

// The header of boundary stage -> stage+1: the shapes `now` of microbatch
// mb's outputs, which every later microbatch of the step must match.
void Transfers::send_header(int stage, const BoundarySpec& now, int mb) {
  const int peer = meta_.rank_of(stage + 1);
  header_sent_[stage] = true;
  specs_[stage] = now;
  learned_[stage] = true;
  fwd_sends_[{stage, mb}].push_back(
      {comm_->isend(encode_spec(now, comm_->device()), peer, tag(Dir::Shape, stage, 0, 1)),
       me() + to_string(make(ActionType::SendF, stage, mb)) +
           " (its shape header, before the "
           "values) to rank " +
           std::to_string(peer)});
}

void Transfers::check_same_shapes(int stage, int mb, const BoundarySpec& now) const {
  if (now == *specs_[stage]) return;
  const std::string base = me() + "stage " + std::to_string(stage) + " returns [" + to_string(now) +
                           "] for microbatch " + std::to_string(mb) + " but ";
  if (given_[stage])
    throw InputError(base + "ExecOptions::output_specs[" + std::to_string(stage) + "] says [" +
                     to_string(*specs_[stage]) + "]; correct output_specs[" +
                     std::to_string(stage) + "] (the same on every rank), or leave stage " +
                     std::to_string(stage) +
                     " out of output_specs to learn its shapes from "
                     "the first transfer");
  throw InputError(base + "its boundary carried [" + to_string(*specs_[stage]) +
                   "] earlier; every microbatch of a step must have the same shapes, and "
                   "shapes that change between steps need ExecOptions::reexchange_shapes");
}

void Transfers::send_forward(int stage, int mb, const Values& outputs) {
  release_completed_sends();
  const int peer = meta_.rank_of(stage + 1);
  BoundarySpec now = spec_of(outputs, stage);
  if (header_to_send(stage)) send_header(stage, now, mb);
  else check_same_shapes(stage, mb, now);
  last_bytes_ = 0;
  if (now.empty()) return;
  at::Tensor message = pack(stage, outputs, now);
  last_bytes_ = static_cast<std::int64_t>(message.nbytes());
  fwd_sends_[{stage, mb}].push_back(
      {comm_->isend(message, peer, tag(Dir::Forward, stage, mb, 0)),
       me() + to_string(make(ActionType::SendF, stage, mb)) + " to rank " + std::to_string(peer)});
}

void Transfers::send_backward(int stage, int mb, const Values& grads) {
  const int peer = meta_.rank_of(stage - 1);
  BoundarySpec spec = spec_of(grads, stage);
  last_bytes_ = 0;
  if (spec.empty()) return;
  at::Tensor message = pack(stage, grads, spec);
  last_bytes_ = static_cast<std::int64_t>(message.nbytes());
  other_sends_.push_back(
      {comm_->isend(message, peer, tag(Dir::Backward, stage, mb, 0)),
       me() + to_string(make(ActionType::SendB, stage, mb)) + " to rank " + std::to_string(peer)});
}

void Transfers::release_forward_sends(int stage, int mb) {
  auto it = fwd_sends_.find({stage, mb});
  if (it == fwd_sends_.end()) return;
  for (auto& s : it->second) wait_for(*s.op, s.what);
  fwd_sends_.erase(it);
}

void Transfers::release_completed_sends() {
  for (auto it = fwd_sends_.begin(); it != fwd_sends_.end();) {
    bool all = true;
    for (auto& s : it->second) all = all && s.op->done();
    if (!all) {
      ++it;
      continue;
    }
    for (auto& s : it->second) wait_for(*s.op, s.what);
    it = fwd_sends_.erase(it);
  }
}

void Transfers::note_outputs(int stage, const Values& outputs) {
  if (!specs_[stage]) specs_[stage] = spec_of(outputs, stage);
}

}  // namespace pipeplan::exec::detail
