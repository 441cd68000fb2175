// What the memory actions do to a microbatch (memory.h has the machinery):
// a forward that keeps only its input, its RECOMPUTE, OFFLOAD and RELOAD,
// and the release of a forward output's data once it was delivered.
#include <ATen/ATen.h>

#include "exec/memory.h"
#include "exec/replay.h"
#include "pipeplan/error.h"

namespace pipeplan::exec {

using detail::Slot;

at::Device Executor::Impl::device() const { return comm ? comm->device() : at::Device(at::kCPU); }

// A training forward whose (stage, mb) is recomputed later keeps its inputs
// and the RNG state it starts from, and runs without a graph.
bool Executor::Impl::keeps_only_input(int stage, int mb, Slot& sl, const Values& in) {
  if (fwd_step || !memory.recomputed(stages.index(stage), mb)) return false;
  sl.rng = std::make_shared<detail::RngState>(detail::RngState::capture(device()));
  sl.kept_in = in;
  return true;
}

// An offloaded (stage, mb) collects what autograd saves in its forward, so
// the OFFLOAD can move it (when C++ hooks are available, memory.h).
std::shared_ptr<detail::SavedTensors> Executor::Impl::saved_tensors_of(int stage, int mb,
                                                                       Slot& sl) {
  if (fwd_step || !memory.offloaded(stages.index(stage), mb) ||
      !detail::saved_tensor_hooks_available())
    return nullptr;
  if (!sl.saved) sl.saved = std::make_shared<detail::SavedTensors>();
  return sl.saved;
}

void Executor::Impl::recompute(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (!sl.forward_done || sl.input_grad_done || !sl.rng)
    throw InternalError(me() + "RECOMPUTE without its F, or after its backward");
  if (sl.offloaded) throw InternalError(me() + "RECOMPUTE of an offloaded microbatch");
  detail::wait_for_copies(device());
  // The forward's RNG stream is replayed, and the rank's stream goes on
  // where it was: later forwards draw what they would without recompute.
  const detail::RngState now = detail::RngState::capture(device());
  sl.rng->restore();
  Values out;
  try {
    out = run_forward(stage, mb, sl.kept_in, sl, /*graph=*/true);
  } catch (...) {
    now.restore();
    throw;
  }
  now.restore();
  sl.rng.reset();
  sl.kept_in.clear();
  check_forward_graph(stage, sl, out);
  if (stage == last()) out.clear();
  sl.outputs = std::move(out);
  sl.delivered = false;
}

// The tensors of a (stage, mb) that OFFLOAD moves: its boundary leaves, its
// kept input, outputs already delivered (when they still hold data).
std::vector<at::Tensor*> Executor::Impl::held_for_backward(Slot& sl) {
  std::vector<at::Tensor*> out;
  for (at::Tensor& t : sl.leaves) out.push_back(&t);
  for (Value& v : sl.kept_in)
    if (auto* t = std::get_if<at::Tensor>(&v)) out.push_back(t);
  if (sl.delivered)
    for (Value& v : sl.outputs)
      if (auto* t = std::get_if<at::Tensor>(&v)) out.push_back(t);
  return out;
}

void Executor::Impl::offload(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (!sl.forward_done || sl.input_grad_done || sl.offloaded)
    throw InternalError(me() + "OFFLOAD before its F, after its backward, or twice");
  detail::Mover to_host(device(), /*to_host=*/true);
  for (at::Tensor* t : held_for_backward(sl)) to_host.move(t);
  if (sl.saved) to_host.move(*sl.saved, stages.resident(stage));
  sl.offloaded = true;
  last_moved = to_host.bytes();
}

void Executor::Impl::reload(int stage, int mb) {
  Slot& sl = slot(stage, mb);
  if (!sl.offloaded) throw InternalError(me() + "RELOAD without its OFFLOAD");
  detail::Mover to_device(device(), /*to_host=*/false);
  for (at::Tensor* t : held_for_backward(sl)) to_device.move(t);
  if (sl.saved) to_device.move(*sl.saved, {});
  sl.offloaded = false;
  sl.saved.reset();  // the graph's hooks hold the tensors from now on
  last_moved = to_device.bytes();
}

// Before a backward (B, I) or RECOMPUTE of (stage, mb): reloaded values are in.
void Executor::Impl::memory_ready(int stage, int mb) {
  if (!memory.any_offload()) return;
  if (slot(stage, mb).offloaded)
    throw InternalError(me() + "backward of an offloaded microbatch before its RELOAD");
  detail::wait_for_copies(device());
}

// Once delivered (sent, or handed to the next stage on this rank), a forward
// output's data is no longer needed: the backward starts from its graph
// node, not its values. Its tensors are emptied in place (the graph stays),
// as PaddlePaddle's pipeline driver does; views and leaves are left alone.
void Executor::Impl::delivered(Slot& sl, int stage, int mb) {
  if (fwd_step || memory.recomputed(stages.index(stage), mb)) {
    sl.outputs.clear();  // no backward reads them (a RECOMPUTE makes new ones)
    return;
  }
  sl.delivered = true;
  if (!opt.free_sent_outputs) return;
  for (Value& v : sl.outputs) {
    auto* t = std::get_if<at::Tensor>(&v);
    if (t == nullptr || !t->defined() || t->is_view()) continue;
    if (!t->requires_grad()) *t = at::empty({0}, t->options());
    else if (t->grad_fn()) t->set_data(at::empty({0}, t->options()));
  }
}

// ExecOptions::outputs_on_host: a forward-only step's outputs, per microbatch.
Values Executor::Impl::on_host(Values values) {
  for (Value& v : values)
    if (auto* t = std::get_if<at::Tensor>(&v); t != nullptr && t->defined() && !t->is_cpu())
      *t = t->to(at::kCPU);
  return values;
}

}  // namespace pipeplan::exec
