// What each action of a rank's program does. Each (local stage, microbatch)
// has a Slot holding exactly what later actions of the plan still need; it is
// emptied as soon as the last of them ran, so memory follows the plan.
//
// Shapes travel with the data: the first transfer of a boundary in a step
// whose spec is neither given (output_specs) nor learned is preceded by a
// fixed-size header message with the spec, so no extra forward is needed.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "exec/replay.h"
#include "pipeplan/error.h"

namespace pipeplan::exec {

using detail::Dir;
using detail::PostedRecv;
using detail::Slot;

Slot& Executor::Impl::slot(int stage, int mb) {
  if (stage < 0 || stage >= num_stages || local_index[stage] < 0 || mb < 0 || mb >= num_mb)
    throw InternalError(me() + "action on stage " + std::to_string(stage) + " microbatch " +
                        std::to_string(mb) + ", which this rank does not own");
  return slots[local_index[stage]][mb];
}

at::Tensor Executor::Impl::pack(int stage, const Values& values, const BoundarySpec& spec) const {
  try {
    return detail::pack(values, spec, comm->device());
  } catch (const InputError& e) {
    throw InputError(me() + "stage " + std::to_string(stage) + ": " + e.what());
  }
}

// --- communication: one message per boundary, direction and microbatch ---

// Completes the header of boundary from_stage -> from_stage+1 (receiver side).
void Executor::Impl::await_header(int from_stage) {
  std::unique_ptr<PendingOp>& op = header_ops[from_stage];
  if (!op) return;
  op->wait(timeout(), me() + "receiving the shapes of stage " + std::to_string(from_stage) +
                          "'s outputs from rank " + std::to_string(plan.meta.rank_of(from_stage)));
  op.reset();
  specs[from_stage] = detail::decode_spec(header_msgs[from_stage]);
  header_msgs[from_stage] = at::Tensor();
  learned[from_stage] = true;
}

// Posts the header receive of boundary from -> from+1 (the first transfer of
// the boundary in the step carries its spec first).
void Executor::Impl::post_header(int from) {
  header_received[from] = true;
  header_msgs[from] =
      at::empty({detail::kMetaLength}, at::TensorOptions().dtype(at::kLong).device(comm->device()));
  header_ops[from] =
      comm->irecv(header_msgs[from], plan.meta.rank_of(from), tag(Dir::Shape, from, 0, 1));
}

void Executor::Impl::post_recv(Dir dir, int stage, int mb) {
  const bool fwd = dir == Dir::Forward;
  const int from = fwd ? stage - 1 : stage + 1;
  const int spec_stage = fwd ? from : stage;
  PostedRecv r;
  r.peer = plan.meta.rank_of(from);
  r.tag = tag(dir, from, mb, 0);
  r.what = me() + name(fwd ? ActionType::RecvF : ActionType::RecvB, stage, mb) + " from rank " +
           std::to_string(r.peer);
  if (fwd && header_due(from) && !header_received[from]) {
    // First transfer of this boundary in the step: its spec comes first.
    post_header(from);
    // NCCL matches in posting order, so the payload must be posted now: wait
    // for the header here (safe: the plan is proved under rendezvous). Gloo
    // matches by tag, so the payload is posted when it is needed.
    if (comm->backend() == Backend::Nccl) await_header(from);
  }
  const bool known = specs[spec_stage].has_value() && header_ops[spec_stage] == nullptr;
  if (known) {
    r.spec = fwd ? *specs[spec_stage] : detail::gradient_spec(*specs[spec_stage]);
    r.message = detail::empty_message(r.spec, comm->device());
    if (!r.spec.empty()) r.op = comm->irecv(r.message, r.peer, r.tag);
    last_bytes = r.spec.empty() ? 0 : static_cast<std::int64_t>(r.message.nbytes());
  } else {
    if (comm->backend() == Backend::Nccl)
      throw InternalError(me() + "no boundary shapes known for " + r.what);
    r.deferred = true;
    last_bytes = 0;
  }
  recvs[{static_cast<int>(dir), stage, mb}] = std::move(r);
}

// Waits for a posted receive; one whose shapes were unknown when it was
// posted (Gloo only) is posted now, once its header is in. Waited once: a
// group waits for its receives before their consumers run.
void Executor::Impl::await_recv(PostedRecv& r, Dir dir, int stage) {
  if (r.deferred) {
    const bool fwd = dir == Dir::Forward;
    const int spec_stage = fwd ? stage - 1 : stage;
    if (fwd) await_header(spec_stage);
    if (!specs[spec_stage]) throw InternalError(me() + "no boundary shapes known for " + r.what);
    r.spec = fwd ? *specs[spec_stage] : detail::gradient_spec(*specs[spec_stage]);
    r.message = detail::empty_message(r.spec, comm->device());
    if (!r.spec.empty()) r.op = comm->irecv(r.message, r.peer, r.tag);
    r.deferred = false;
  }
  if (r.op) r.op->wait(timeout(), r.what);
  r.op.reset();
}

Values Executor::Impl::complete_recv(Dir dir, int stage, int mb) {
  auto it = recvs.find({static_cast<int>(dir), stage, mb});
  if (it == recvs.end())
    throw InternalError(me() + "no receive posted for stage " + std::to_string(stage) +
                        " microbatch " + std::to_string(mb) + " before its consumer");
  PostedRecv r = std::move(it->second);
  recvs.erase(it);
  await_recv(r, dir, stage);
  return detail::unpack(r.message, r.spec);
}

// Sends the header of boundary stage -> stage+1 (the spec of microbatch mb's
// outputs, which every later microbatch of the step must match).
void Executor::Impl::send_header(int stage, int mb) {
  const int peer = plan.meta.rank_of(stage + 1);
  const BoundarySpec now = detail::spec_of(slot(stage, mb).outputs, stage);
  header_sent[stage] = true;
  specs[stage] = now;
  learned[stage] = true;
  fwd_sends[{stage, mb}].push_back(
      {comm->isend(detail::encode_spec(now, comm->device()), peer, tag(Dir::Shape, stage, 0, 1)),
       me() + "sending the shapes of stage " + std::to_string(stage) + "'s outputs to rank " +
           std::to_string(peer)});
}

void Executor::Impl::send_forward(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (!sl.forward_done) throw InternalError(me() + "SEND_F before its F");
  const int peer = plan.meta.rank_of(stage + 1);
  BoundarySpec now = detail::spec_of(sl.outputs, stage);
  if (header_due(stage) && !header_sent[stage]) {
    send_header(stage, mb);
  } else if (now != *specs[stage]) {
    const std::string base = me() + "stage " + std::to_string(stage) + " returns [" +
                             to_string(now) + "] for microbatch " + std::to_string(mb) + " but ";
    if (given[stage])
      throw InputError(base + "ExecOptions::output_specs[" + std::to_string(stage) + "] says [" +
                       to_string(*specs[stage]) + "]; correct output_specs[" +
                       std::to_string(stage) + "] (the same on every rank), or leave stage " +
                       std::to_string(stage) +
                       " out of output_specs to learn its shapes from "
                       "the first transfer");
    throw InputError(base + "its boundary carried [" + to_string(*specs[stage]) +
                     "] earlier; every microbatch of a step must have the same shapes, and "
                     "shapes that change between steps need ExecOptions::reexchange_shapes");
  }
  last_bytes = 0;
  if (now.empty()) return;
  at::Tensor message = pack(stage, sl.outputs, now);
  last_bytes = static_cast<std::int64_t>(message.nbytes());
  fwd_sends[{stage, mb}].push_back(
      {comm->isend(message, peer, tag(Dir::Forward, stage, mb, 0)),
       me() + name(ActionType::SendF, stage, mb) + " to rank " + std::to_string(peer)});
  if (fwd_step) sl.outputs.clear();  // no backward will read them
}

void Executor::Impl::send_backward(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (!sl.in_grads_ready) throw InternalError(me() + "SEND_B before its B/I");
  const int peer = plan.meta.rank_of(stage - 1);
  Values grads(sl.in_grads.begin(), sl.in_grads.end());
  BoundarySpec spec = detail::spec_of(grads, stage);
  last_bytes = 0;
  if (!spec.empty()) {
    at::Tensor message = pack(stage, grads, spec);
    last_bytes = static_cast<std::int64_t>(message.nbytes());
    other_sends.push_back(
        {comm->isend(message, peer, tag(Dir::Backward, stage, mb, 0)),
         me() + name(ActionType::SendB, stage, mb) + " to rank " + std::to_string(peer)});
  }
  sl.in_grads.clear();
  sl.in_grads_ready = false;
}

// The gradient's arrival proves the peer consumed this microbatch's
// activations, so those sends are complete and their buffers can go.
void Executor::Impl::release_forward_sends(int stage, int mb) {
  auto it = fwd_sends.find({stage, mb});
  if (it == fwd_sends.end()) return;
  for (auto& s : it->second) s.op->wait(timeout(), s.what);
  fwd_sends.erase(it);
}

// --- compute ---

void Executor::Impl::forward(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (sl.forward_done) throw InternalError(me() + "second F of one microbatch");
  const int li = local_index[stage];
  const bool grad = !fwd_step;
  Values in;
  if (stage > 0) {
    Values boundary;
    if (on_me(stage - 1)) {
      Slot& prev = slot(stage - 1, mb);
      if (!prev.forward_done) throw InternalError(me() + "F before the previous stage's F");
      boundary = prev.outputs;
      if (fwd_step) prev.outputs.clear();  // nothing else reads them
    } else {
      boundary = complete_recv(Dir::Forward, stage, mb);
    }
    // Each stage differentiates from its own leaves, so a boundary is the
    // same whether it crossed ranks or not.
    for (Value& v : boundary) {
      if (grad && detail::is_differentiable(v)) {
        at::Tensor leaf = std::get<at::Tensor>(v).detach().requires_grad_(true);
        sl.leaves.push_back(leaf);
        in.emplace_back(std::move(leaf));
      } else {
        in.push_back(std::move(v));
      }
    }
  }
  for (const Value& v : owned[li][mb]) in.push_back(v);
  Values out;
  {
    c10::AutoGradMode grad_mode(grad);
    out = modules[li]->forward(in);
    if (stage == last()) {
      if (loss_fn && (grad || have_targets)) {
        at::Tensor loss = loss_fn(out, mb_targets[mb]);
        if (!loss.defined() || loss.numel() != 1 || !loss.is_floating_point())
          throw InputError("the loss function must return a one-element floating tensor");
        sl.loss = loss.reshape({});
        losses[mb] = sl.loss.detach();
      }
      if (fwd_step) {
        final_outputs[mb] = std::move(out);
        out.clear();
      }
    }
  }
  if (grad && !params_checked[li]) {
    // Once per stage: a trainable tensor the forward used but the stage does
    // not list would silently stay untrained.
    params_checked[li] = true;
    std::vector<at::Tensor> roots;
    if (stage == last()) {
      roots.push_back(sl.loss);
    } else {
      for (const Value& v : out)
        if (const auto* t = std::get_if<at::Tensor>(&v)) roots.push_back(*t);
    }
    std::vector<at::Tensor> known = sl.leaves;
    for (const at::Tensor& p : modules[li]->parameters) known.push_back(p);
    at::Tensor stray = detail::unlisted_trainable(roots, known);
    if (stray.defined()) {
      std::string shape;
      for (std::int64_t d : stray.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
      throw InputError(me() + "stage " + std::to_string(stage) + " uses a tensor of shape [" +
                       shape +
                       "] that requires grad but is not among the stage's parameters, so "
                       "it would never be trained; list it in StageModule::parameters, build the "
                       "stage with module_stage() so parameters are collected, or detach it "
                       "(requires_grad_(false)) if it is meant to stay fixed");
    }
  }
  if (stage != last() && !specs[stage]) specs[stage] = detail::spec_of(out, stage);
  if (stage == last() && !fwd_step) out.clear();
  sl.outputs = std::move(out);
  sl.forward_done = true;
}

std::vector<at::Tensor> Executor::Impl::differentiate(const Slot& sl,
                                                      const std::vector<at::Tensor>& targets,
                                                      bool keep_graph) {
  if (sl.roots.empty() || targets.empty()) return std::vector<at::Tensor>(targets.size());
  return torch::autograd::grad(sl.roots, targets, sl.seeds, keep_graph,
                               /*create_graph=*/false, /*allow_unused=*/true);
}

void Executor::Impl::accumulate(int li, const std::vector<at::Tensor>& grads, std::size_t offset) {
  std::vector<at::Tensor>& sums = grad_sums[li];
  for (std::size_t p = 0; p < sums.size(); ++p) {
    const at::Tensor& g = grads[offset + p];
    if (!g.defined()) continue;
    if (sums[p].defined()) sums[p].add_(g);
    else sums[p] = g.detach().clone();
  }
}

// B (full) or I (input gradient only, graph kept for the W).
void Executor::Impl::backward(int stage, int mb, bool full) {
  Slot& sl = slot(stage, mb);
  if (!sl.forward_done || sl.input_grad_done)
    throw InternalError(me() + "B/I out of order for " + name(ActionType::B, stage, mb));
  if (stage == last()) {
    if (!sl.loss.defined()) throw InternalError(me() + "B of the last stage without a loss");
    sl.roots = {sl.loss};
    sl.seeds = {at::ones_like(sl.loss)};
  } else {
    std::vector<at::Tensor> grads;
    if (on_me(stage + 1)) {
      Slot& next = slot(stage + 1, mb);
      if (!next.in_grads_ready) throw InternalError(me() + "B before the next stage's B");
      grads = std::move(next.in_grads);
      next.in_grads.clear();
      next.in_grads_ready = false;
    } else {
      for (Value& v : complete_recv(Dir::Backward, stage, mb))
        grads.push_back(std::get<at::Tensor>(v));
      release_forward_sends(stage, mb);
    }
    std::size_t k = 0;
    for (const Value& v : sl.outputs) {
      if (!detail::is_differentiable(v)) continue;
      const at::Tensor& out = std::get<at::Tensor>(v);
      const at::Tensor& g = grads.at(k++);
      if (out.requires_grad()) {
        sl.roots.push_back(out);
        sl.seeds.push_back(g);
      }
    }
  }
  const int li = local_index[stage];
  std::vector<at::Tensor> targets = sl.leaves;
  if (full) targets.insert(targets.end(), trainable[li].begin(), trainable[li].end());
  std::vector<at::Tensor> grads = differentiate(sl, targets, /*keep_graph=*/!full);
  sl.in_grads.clear();
  for (std::size_t i = 0; i < sl.leaves.size(); ++i)
    sl.in_grads.push_back(grads[i].defined() ? grads[i] : at::zeros_like(sl.leaves[i]));
  sl.in_grads_ready = stage > 0;
  sl.input_grad_done = true;
  sl.outputs.clear();
  const std::size_t num_leaves = sl.leaves.size();
  sl.leaves.clear();
  if (full) {
    accumulate(li, grads, num_leaves);
    sl.roots.clear();
    sl.seeds.clear();
    sl.loss = at::Tensor();
    sl.weight_grad_done = true;
    weight_grads_done(stage);
  }
}

void Executor::Impl::weight(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (!sl.input_grad_done || sl.weight_grad_done)
    throw InternalError(me() + "W without its I for " + name(ActionType::W, stage, mb));
  const int li = local_index[stage];
  accumulate(li, differentiate(sl, trainable[li], /*keep_graph=*/false), 0);
  sl.roots.clear();
  sl.seeds.clear();
  sl.loss = at::Tensor();
  sl.weight_grad_done = true;
  weight_grads_done(stage);
}

void Executor::Impl::pass_through(const Action& a) {
  const std::size_t k = a.type == ActionType::Unshard ? 0 : a.type == ActionType::Reshard ? 1 : 2;
  const PassThroughHandler& h = handlers[k];
  if (!h) return;  // nothing is sharded
  PassThrough ctx;
  ctx.action = a;
  ctx.rank = rank;
  ctx.step = step_index;
  if (a.stage >= 0 && a.stage < num_stages && local_index[a.stage] >= 0)
    ctx.parameters = trainable[local_index[a.stage]];
  h(ctx);
}

void Executor::Impl::run_action(const Action& a) {
  switch (a.type) {
    case ActionType::F: forward(a.stage, a.microbatch); break;
    case ActionType::B: backward(a.stage, a.microbatch, true); break;
    case ActionType::I: backward(a.stage, a.microbatch, false); break;
    case ActionType::W: weight(a.stage, a.microbatch); break;
    case ActionType::SendF: send_forward(a.stage, a.microbatch); break;
    case ActionType::RecvF: post_recv(Dir::Forward, a.stage, a.microbatch); break;
    case ActionType::SendB: send_backward(a.stage, a.microbatch); break;
    case ActionType::RecvB: post_recv(Dir::Backward, a.stage, a.microbatch); break;
    case ActionType::OverlapFB:
      // One thread: the pair runs back to back, forward first.
      forward(a.stage, a.microbatch);
      backward(a.sub_stage, a.sub_microbatch, true);
      break;
    case ActionType::Unshard:
    case ActionType::Reshard:
    case ActionType::ReduceGrad: pass_through(a); break;
  }
}

}  // namespace pipeplan::exec
