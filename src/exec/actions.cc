// What each action of a rank's program does to a microbatch. Each (local
// stage, microbatch) has a Slot holding exactly what later actions of the
// plan still need; it is emptied as soon as the last of them ran, so memory
// follows the plan. Messages and their shapes are transfers.h's; modules
// and gradient sums stages.h's.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <optional>

#include "exec/memory.h"
#include "exec/replay.h"
#include "pipeplan/error.h"

namespace pipeplan::exec {

using detail::Dir;
using detail::Slot;

namespace {

std::vector<at::Tensor> differentiate(const Slot& sl, const std::vector<at::Tensor>& targets,
                                      bool keep_graph) {
  if (sl.roots.empty() || targets.empty()) return std::vector<at::Tensor>(targets.size());
  return torch::autograd::grad(sl.roots, targets, sl.seeds, keep_graph,
                               /*create_graph=*/false, /*allow_unused=*/true);
}

}  // namespace

Slot& Executor::Impl::slot(int stage, int mb) {
  if (stage < 0 || stage >= num_stages || !stages.owns(stage) || mb < 0 || mb >= num_mb)
    throw InternalError(me() + "action on stage " + std::to_string(stage) + " microbatch " +
                        std::to_string(mb) + ", which this rank does not own");
  return slots[stages.index(stage)][mb];
}

// --- communication: the boundary values of a microbatch ---

void Executor::Impl::send_forward(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (!sl.forward_done) throw InternalError(me() + "SEND_F before its F");
  transfers.send_forward(stage, mb, sl.outputs);
  delivered(sl, stage, mb);
}

void Executor::Impl::send_backward(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (!sl.in_grads_ready) throw InternalError(me() + "SEND_B before its B/I");
  transfers.send_backward(stage, mb, Values(sl.in_grads.begin(), sl.in_grads.end()));
  sl.in_grads.clear();
  sl.in_grads_ready = false;
}

// --- compute ---

// The boundary values of stage `stage` (from the previous stage when it is
// on this rank, else received), each differentiable one a fresh leaf, then
// the user inputs routed here.
Values Executor::Impl::forward_inputs(int stage, int mb, Slot& sl) {
  const bool grad = !fwd_step;
  Values in;
  if (stage > 0) {
    Values boundary;
    if (on_me(stage - 1)) {
      Slot& prev = slot(stage - 1, mb);
      if (!prev.forward_done) throw InternalError(me() + "F before the previous stage's F");
      boundary = prev.outputs;
    } else {
      boundary = transfers.complete_recv(Dir::Forward, stage, mb);
    }
    // Each stage differentiates from its own leaves, so a boundary is the
    // same whether it crossed ranks or not.
    for (std::size_t i = 0; i < boundary.size(); ++i) {
      Value& v = boundary[i];
      if (grad && detail::is_differentiable(v)) {
        at::Tensor leaf = std::get<at::Tensor>(v).detach().requires_grad_(true);
        sl.leaves.push_back(leaf);
        sl.leaf_pos.push_back(static_cast<int>(i));
        in.emplace_back(std::move(leaf));
      } else {
        in.push_back(std::move(v));
      }
    }
    if (on_me(stage - 1)) delivered(slot(stage - 1, mb), stage - 1, mb);
  }
  for (const Value& v : owned[stages.index(stage)][mb]) in.push_back(v);
  return in;
}

void Executor::Impl::forward(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (sl.forward_done) throw InternalError(me() + "second F of one microbatch");
  const Values in = forward_inputs(stage, mb, sl);
  // A recomputed (stage, mb) runs without its graph now (memory_actions.cc).
  const bool graph = !fwd_step && !keeps_only_input(stage, mb, sl, in);
  Values out = run_forward(stage, mb, in, sl, graph);
  if (graph) check_forward_graph(stage, sl, out);
  if (stage != last()) transfers.note_outputs(stage, out);
  if (stage == last() && !fwd_step) out.clear();
  sl.outputs = std::move(out);
  sl.forward_done = true;
}

// The stage's forward on `in` (and the loss on the last stage), with or
// without autograd: a forward and a RECOMPUTE run exactly this.
Values Executor::Impl::run_forward(int stage, int mb, const Values& in, Slot& sl, bool graph) {
  c10::AutoGradMode grad_mode(graph);
  std::optional<detail::SaveInto> saving;
  if (graph)
    if (std::shared_ptr<detail::SavedTensors> into = saved_tensors_of(stage, mb, sl))
      saving.emplace(std::move(into));
  Values out = stages.forward(stage, in);
  if (stage != last()) return out;
  const LossFn& loss_fn = stages.loss();
  if (loss_fn && (!fwd_step || have_targets)) {
    at::Tensor loss = loss_fn(out, mb_targets[mb]);
    if (!loss.defined() || loss.numel() != 1 || !loss.is_floating_point())
      throw InputError("the loss function must return a one-element floating tensor");
    sl.loss = loss.reshape({});
    losses[mb] = sl.loss.detach();
  }
  if (fwd_step) {
    final_outputs[mb] = opt.outputs_on_host ? on_host(out) : std::move(out);
    out.clear();
  }
  return out;
}

// Once per stage, the graph of its first training forward is checked.
void Executor::Impl::check_forward_graph(int stage, const Slot& sl, const Values& out) {
  if (!stages.parameters_unchecked(stage)) return;
  std::vector<at::Tensor> roots;
  if (stage == last()) {
    roots.push_back(sl.loss);
  } else {
    for (const Value& v : out)
      if (const auto* t = std::get_if<at::Tensor>(&v)) roots.push_back(*t);
  }
  stages.check_parameters(stage, roots, sl.leaves);
}

// The roots a backward of `stage` starts from and their gradients: the loss
// on the last stage, else the outputs and the next stage's input gradients
// (from this rank, or received).
void Executor::Impl::seed_backward(int stage, int mb, Slot& sl) {
  if (stage == last()) {
    if (!sl.loss.defined()) throw InternalError(me() + "B of the last stage without a loss");
    sl.roots = {sl.loss};
    sl.seeds = {at::ones_like(sl.loss)};
    return;
  }
  std::vector<at::Tensor> grads;
  if (on_me(stage + 1)) {
    Slot& next = slot(stage + 1, mb);
    if (!next.in_grads_ready) throw InternalError(me() + "B before the next stage's B");
    grads = std::move(next.in_grads);
    next.in_grads.clear();
    next.in_grads_ready = false;
  } else {
    for (Value& v : transfers.complete_recv(Dir::Backward, stage, mb))
      grads.push_back(std::get<at::Tensor>(v));
    transfers.release_forward_sends(stage, mb);
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

// B (full) or I (input gradient only, graph kept for the W).
void Executor::Impl::backward(int stage, int mb, bool full) {
  Slot& sl = slot(stage, mb);
  if (!sl.forward_done || sl.input_grad_done)
    throw InternalError(me() + "B/I out of order for " + name(ActionType::B, stage, mb));
  memory_ready(stage, mb);
  seed_backward(stage, mb, sl);
  std::vector<at::Tensor> targets = sl.leaves;
  if (full) {
    const std::vector<at::Tensor>& params = stages.trainable(stage);
    targets.insert(targets.end(), params.begin(), params.end());
  }
  std::vector<at::Tensor> grads = differentiate(sl, targets, /*keep_graph=*/!full);
  check_input_grads(stage, mb, sl, grads);
  sl.in_grads.clear();
  for (std::size_t i = 0; i < sl.leaves.size(); ++i)
    sl.in_grads.push_back(grads[i].defined() ? grads[i] : at::zeros_like(sl.leaves[i]));
  sl.in_grads_ready = stage > 0;
  sl.input_grad_done = true;
  sl.outputs.clear();
  const std::size_t num_leaves = sl.leaves.size();
  sl.leaves.clear();
  sl.leaf_pos.clear();
  if (full) {
    stages.accumulate(stage, grads, num_leaves);
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
  stages.accumulate(stage, differentiate(sl, stages.trainable(stage), /*keep_graph=*/false), 0);
  sl.roots.clear();
  sl.seeds.clear();
  sl.loss = at::Tensor();
  sl.weight_grad_done = true;
  weight_grads_done(stage);
}

// A differentiable boundary input that got no gradient: the stage's graph
// does not reach it, so the previous stage would silently train on zeros.
void Executor::Impl::check_input_grads(int stage, int mb, const Slot& sl,
                                       const std::vector<at::Tensor>& grads) const {
  for (std::size_t i = 0; i < sl.leaves.size(); ++i) {
    if (grads[i].defined() || stages.input_may_be_unused(stage, sl.leaf_pos[i])) continue;
    throw InputError(
        me() + "stage " + std::to_string(stage) + " microbatch " + std::to_string(mb) +
        ": the backward produced no gradient for boundary input " + std::to_string(sl.leaf_pos[i]) +
        " (" + to_string(detail::spec_of({sl.leaves[i]}, stage)) +
        "), which requires one: the stage's outputs do not depend on it (a detach(), a "
        "NoGradGuard or a recompute from a detached copy, as a ported activation checkpoint "
        "does, cut the graph), so stage " +
        std::to_string(stage - 1) +
        " would get a zero gradient; fix the forward, or if the stage really does not "
        "differentiate this input list " +
        std::to_string(sl.leaf_pos[i]) + " in StageModule::unused_inputs");
  }
}

// Every microbatch's weight gradient of a stage is in: its .grad is
// complete, so observers (data-parallel averaging) can start while the rest
// of the backward runs.
void Executor::Impl::weight_grads_done(int stage) {
  const double scale = opt.loss_reduction == LossReduction::Mean ? 1.0 / num_mb : 1.0;
  const bool check = opt.gradient_check == GradientCheck::EveryStep ||
                     (opt.gradient_check == GradientCheck::FirstStep && training_steps == 0);
  if (!stages.weight_grads_done(stage, scale, check, step_index)) return;
  if (stages.holds_any(stage)) ready_after_ties.push_back(stage);
  else hooks.stage_grads_ready(stage, stages.trainable(stage));
}

void Executor::Impl::pass_through(const Action& a) {
  if (!hooks.handles(a.type)) return;  // nothing is sharded
  PassThrough ctx;
  ctx.action = a;
  ctx.rank = rank;
  ctx.step = step_index;
  if (stages.owns(a.stage)) ctx.parameters = stages.trainable(a.stage);
  hooks.pass_through(ctx);
}

void Executor::Impl::run_action(const Action& a) {
  switch (a.type) {
    case ActionType::F: forward(a.stage, a.microbatch); break;
    case ActionType::B: backward(a.stage, a.microbatch, true); break;
    case ActionType::I: backward(a.stage, a.microbatch, false); break;
    case ActionType::W: weight(a.stage, a.microbatch); break;
    case ActionType::SendF: send_forward(a.stage, a.microbatch); break;
    case ActionType::RecvF: transfers.post_recv(Dir::Forward, a.stage, a.microbatch); break;
    case ActionType::SendB: send_backward(a.stage, a.microbatch); break;
    case ActionType::RecvB: transfers.post_recv(Dir::Backward, a.stage, a.microbatch); break;
    case ActionType::OverlapFB:
      // One thread: the pair runs back to back, forward first.
      forward(a.stage, a.microbatch);
      backward(a.sub_stage, a.sub_microbatch, true);
      break;
    case ActionType::Unshard:
    case ActionType::Reshard:
    case ActionType::ReduceGrad: pass_through(a); break;
    case ActionType::Offload: offload(a.stage, a.microbatch); break;
    case ActionType::Reload: reload(a.stage, a.microbatch); break;
    case ActionType::Recompute: recompute(a.stage, a.microbatch); break;
  }
}

}  // namespace pipeplan::exec
