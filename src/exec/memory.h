// Executor internals: the memory actions of a plan. RECOMPUTE: a forward
// run without its graph, kept inputs and the RNG state it drew from, so the
// re-run with grad draws the same dropout masks. OFFLOAD / RELOAD: what a
// (stage, microbatch) holds for its backward moved to host memory and back,
// the tensors autograd saved included where LibTorch lets C++ hook them.
// Not installed.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "pipeplan/exec/executor.h"

namespace pipeplan::exec::detail {

/// Which (local stage, microbatch) of a rank's program the memory actions
/// touch: recomputed (the F keeps only its input) or offloaded.
class MemoryPlan {
 public:
  MemoryPlan() = default;
  MemoryPlan(const std::vector<Action>& program, const std::vector<int>& local, int num_mb);
  bool recomputed(int li, int mb) const { return !recompute_.empty() && recompute_[li][mb]; }
  bool offloaded(int li, int mb) const { return !offload_.empty() && offload_[li][mb]; }
  bool any_offload() const { return !offload_.empty(); }

 private:
  std::vector<std::vector<bool>> recompute_, offload_;  // [local index][mb]; empty: none
};

/// The generator states a forward starts from: the CPU generator's and, in
/// a build with CUDA, the default generator's of the executor's device.
struct RngState {
  at::Tensor cpu;
  at::Tensor cuda;  ///< the generator of `device`, when it is a CUDA device
  at::Device device = at::kCPU;
  static RngState capture(at::Device device);
  void restore() const;
};

/// Tensors autograd saved during one forward, held through saved-tensor
/// hooks so they can move to host and back. Each one lives as long as the
/// graph node that saved it (and not longer).
class SavedTensors {
 public:
  struct Packed {
    at::Tensor tensor;
    bool on_host = false;  // moved by an OFFLOAD, not yet back
  };
  /// Called by the pack hook.
  std::shared_ptr<Packed> add(const at::Tensor& t);
  /// Every packed tensor still alive.
  std::vector<std::shared_ptr<Packed>> alive() const;

 private:
  std::vector<std::weak_ptr<Packed>> items_;
};

/// While alive on this thread, every tensor autograd saves is packed into
/// `into` (no-op when hooks are unavailable, see saved_tensor_hooks_available).
class SaveInto {
 public:
  explicit SaveInto(std::shared_ptr<SavedTensors> into);
  ~SaveInto();
  SaveInto(const SaveInto&) = delete;
  SaveInto& operator=(const SaveInto&) = delete;

 private:
  std::shared_ptr<SavedTensors> previous_;
};

/// Installs (once, at the first call) the autograd engine that asks for C++
/// saved-tensor hooks. False when another engine is already the default (a
/// process with torch's Python loaded: its engine serves Python's hooks),
/// then only the executor's own values move.
bool saved_tensor_hooks_available();

/// Moves tensors between the executor's device and host memory: to pinned
/// memory on a side stream under CUDA, a host copy on CPU (so the move is
/// real and its bytes counted even where host and device memory are one).
/// Aliases move once: two tensors viewing the same data get one copy.
class Mover {
 public:
  Mover(at::Device device, bool to_host) : device_(device), to_host_(to_host) {}
  /// Moves `*t` in place: a tensor autograd knows (it requires grad) keeps
  /// its identity (set_data), any other is replaced.
  void move(at::Tensor* t);
  /// Offload: moves every packed tensor except those sharing data with
  /// `keep`; reload: moves back those that went to host.
  void move(SavedTensors& saved, const std::vector<at::Tensor>& keep);
  /// Bytes copied so far.
  std::int64_t bytes() const { return bytes_; }

 private:
  at::Tensor copy(const at::Tensor& t);
  at::Device device_;
  bool to_host_;
  std::int64_t bytes_ = 0;
  std::vector<std::pair<at::Tensor, at::Tensor>> done_;  // source, its copy
};

/// Under CUDA: makes the current (compute) stream wait for the copies
/// posted so far on the side stream; nothing on CPU.
void wait_for_copies(at::Device device);

}  // namespace pipeplan::exec::detail
