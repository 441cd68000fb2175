// The memory actions' machinery (memory.h): which microbatches they touch,
// RNG states for recompute, saved-tensor hooks, moves to host and back.
#include "exec/memory.h"

#include "exec/memory_meter.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include <map>
#include <mutex>
#include <optional>

#ifdef PIPEPLAN_EXEC_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pipeplan::exec::detail {

MemoryPlan::MemoryPlan(const std::vector<Action>& program, const std::vector<int>& local,
                       int num_mb) {
  auto mark = [&](std::vector<std::vector<bool>>& set, const Action& a) {
    if (set.empty()) set.assign(local.size(), std::vector<bool>(num_mb, false));
    for (std::size_t li = 0; li < local.size(); ++li)
      if (local[li] == a.stage && a.microbatch >= 0 && a.microbatch < num_mb)
        set[li][a.microbatch] = true;
  };
  for (const Action& a : program) {
    if (a.type == ActionType::Recompute) mark(recompute_, a);
    if (a.type == ActionType::Offload) mark(offload_, a);
  }
}

// --- RNG states ---

RngState RngState::capture(at::Device device) {
  RngState s;
  s.device = device;
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    s.cpu = cpu.get_state();
  }
#ifdef PIPEPLAN_EXEC_CUDA
  if (device.is_cuda()) {
    at::Generator g = at::cuda::detail::getDefaultCUDAGenerator(device.index());
    std::lock_guard<std::mutex> lock(g.mutex());
    s.cuda = g.get_state();
  }
#endif
  return s;
}

void RngState::restore() const {
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_state(this->cpu);
  }
#ifdef PIPEPLAN_EXEC_CUDA
  if (cuda.defined()) {
    at::Generator g = at::cuda::detail::getDefaultCUDAGenerator(device.index());
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(cuda);
  }
#endif
}

// --- saved-tensor hooks ---

std::shared_ptr<SavedTensors::Packed> SavedTensors::add(const at::Tensor& t) {
  auto p = std::make_shared<Packed>();
  // Without autograd metadata: an output saved by its own node would else
  // keep that node alive through the hook (a cycle).
  p->tensor = t.detach();
  // Forget the nodes already released, so a long forward does not grow the list.
  if (items_.size() >= 64 && items_.size() % 64 == 0) {
    std::vector<std::weak_ptr<Packed>> live;
    for (auto& w : items_)
      if (!w.expired()) live.push_back(std::move(w));
    items_ = std::move(live);
  }
  items_.push_back(p);
  return p;
}

std::vector<std::shared_ptr<SavedTensors::Packed>> SavedTensors::alive() const {
  std::vector<std::shared_ptr<Packed>> out;
  for (const auto& w : items_)
    if (auto p = w.lock()) out.push_back(std::move(p));
  return out;
}

namespace {

thread_local std::shared_ptr<SavedTensors> t_saving;

class Hook final : public torch::autograd::SavedVariableHooks {
 public:
  explicit Hook(std::shared_ptr<SavedTensors> into) : into_(std::move(into)) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    packed_ = into_->add(tensor);
    into_.reset();  // the hook needs only its own tensor from now on
  }
  at::Tensor call_unpack_hook() override { return packed_->tensor; }

 private:
  std::shared_ptr<SavedTensors> into_;
  std::shared_ptr<SavedTensors::Packed> packed_;
};

// LibTorch asks the default engine for the hooks of every tensor it saves;
// the base engine has none (Python's engine serves torch.autograd.graph's).
// This one answers with a Hook while a SaveInto is alive on the thread.
struct HookingEngine final : torch::autograd::Engine {
  HookingEngine() = default;
  ~HookingEngine() override { stop(); }
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    if (!t_saving) return nullptr;
    return std::make_unique<Hook>(t_saving);
  }
  static torch::autograd::Engine& get() {
    static HookingEngine engine;
    return engine;
  }
};

}  // namespace

bool saved_tensor_hooks_available() {
  static const bool available = [] {
    using torch::autograd::Engine;
    if (&Engine::get_default_engine() != &Engine::get_base_engine()) return false;
    torch::autograd::set_default_engine_stub(&HookingEngine::get);
    return &Engine::get_default_engine() == &HookingEngine::get();
  }();
  return available;
}

SaveInto::SaveInto(std::shared_ptr<SavedTensors> into) : previous_(std::move(t_saving)) {
  t_saving = std::move(into);
}

SaveInto::~SaveInto() { t_saving = std::move(previous_); }

// --- moves ---

namespace {

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.scalar_type() == b.scalar_type();
}

#ifdef PIPEPLAN_EXEC_CUDA
// One side stream per device for every copy; an event marks the last one.
c10::cuda::CUDAStream copy_stream(at::Device device) {
  static std::map<int, c10::cuda::CUDAStream> streams;
  auto it = streams.find(device.index());
  if (it == streams.end())
    it = streams.emplace(device.index(), c10::cuda::getStreamFromPool(false, device.index())).first;
  return it->second;
}
#endif

}  // namespace

at::Tensor Mover::copy(const at::Tensor& t) {
  for (const auto& [src, dst] : done_)
    if (same_view(src, t)) return dst;
  at::Tensor out;
#ifdef PIPEPLAN_EXEC_CUDA
  if (device_.is_cuda()) {
    // The side stream first waits for the compute that produced (or will
    // read) the data; the source stays allocated until the copy ran.
    c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_.index());
    c10::cuda::CUDAStream side = copy_stream(device_);
    at::cuda::CUDAEvent ready;
    ready.record(compute);
    ready.block(side);
    c10::cuda::CUDAStreamGuard guard(side);
    if (to_host_) {
      out = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
    } else {
      out = at::empty(t.sizes(), t.options().device(device_));
      out.record_stream(compute);
    }
    out.copy_(t, /*non_blocking=*/true);
    if (t.is_cuda()) t.record_stream(side);
    done_.emplace_back(t, out);
    bytes_ += static_cast<std::int64_t>(out.nbytes());
    return out;
  }
#endif
  {
    // On a CPU rank the host copy is host memory all the same: the bytes
    // the tracer counts for the device leave with the OFFLOAD.
    std::optional<Unmetered> host;
    if (to_host_) host.emplace();
    out = at::empty(t.sizes(), t.options().device(to_host_ ? at::Device(at::kCPU) : device_));
  }
  out.copy_(t);
  done_.emplace_back(t, out);
  bytes_ += static_cast<std::int64_t>(out.nbytes());
  return out;
}

void Mover::move(at::Tensor* t) {
  if (t == nullptr || !t->defined() || t->numel() == 0) return;
  for (const auto& [src, dst] : done_)
    if (src.unsafeGetTensorImpl() == t->unsafeGetTensorImpl() ||
        dst.unsafeGetTensorImpl() == t->unsafeGetTensorImpl())
      return;  // this very tensor moved already (set_data) or is a copy
  at::Tensor c = copy(t->detach());
  if (t->requires_grad()) {
    t->set_data(c);
    done_.emplace_back(*t, c);  // by identity: a second reference is skipped
  } else {
    *t = c;
  }
}

void Mover::move(SavedTensors& saved, const std::vector<at::Tensor>& keep) {
  for (const auto& p : saved.alive()) {
    at::Tensor& t = p->tensor;
    if (!t.defined() || t.numel() == 0 || p->on_host != !to_host_) continue;
    bool kept = false;
    for (const at::Tensor& k : keep) kept = kept || (k.defined() && k.is_alias_of(t));
    if (kept) continue;
    t = copy(t);
    p->on_host = to_host_;
  }
}

void wait_for_copies(at::Device device) {
#ifdef PIPEPLAN_EXEC_CUDA
  if (device.is_cuda()) {
    at::cuda::CUDAEvent done;
    done.record(copy_stream(device));
    done.block(c10::cuda::getCurrentCUDAStream(device.index()));
  }
#else
  (void)device;
#endif
}

}  // namespace pipeplan::exec::detail
