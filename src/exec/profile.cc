// The layer profiler (exec/profile.h): per child of a Sequential, F, B, I,
// W times and the activation bytes its forward leaves alive.
#include "pipeplan/exec/profile.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/autograd.h>
#include <torch/cuda.h>
#include <torch/nn/modules/container/any.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>

#include "pipeplan/error.h"

namespace pipeplan::exec {
namespace {

using Clock = std::chrono::steady_clock;

// Sums the allocations and frees c10's allocators report on this thread
// while installed as the profiler state (what torch.profiler's
// profile_memory reads): live bytes allocated since installation.
class AllocationCounter final : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void* /*ptr*/, std::int64_t size, std::size_t /*allocated*/,
                         std::size_t /*reserved*/, c10::Device /*device*/) override {
    live_ += size;
  }
  bool memoryProfilingEnabled() const override { return true; }
  std::int64_t live() const { return live_; }

 private:
  std::atomic<std::int64_t> live_{0};
};

void synchronize(const at::Tensor& t) {
  if (t.defined() && t.is_cuda()) torch::cuda::synchronize(t.device().index());
}

// Milliseconds on a nanosecond grid (the clock's resolution; keeps W <= B).
double to_ns(double ms) { return std::round(ms * 1e6) / 1e6; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One child of the model with its input and trainable parameters.
struct Child {
  torch::nn::AnyModule module;
  at::Tensor input;  ///< a leaf; requires grad when floating point
  std::vector<at::Tensor> parameters;

  at::Tensor forward() { return module.forward(input); }
  bool input_grad() const { return input.requires_grad(); }
};

// Milliseconds `fn` took, its result synchronised first.
template <class Fn>
double timed(Fn&& fn) {
  const auto t0 = Clock::now();
  synchronize(fn());
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

at::Tensor grad_of(const at::Tensor& y, const std::vector<at::Tensor>& wrt, bool keep) {
  const auto g = torch::autograd::grad({y}, wrt, {at::ones_like(y)}, keep, false, true);
  return g.empty() ? at::Tensor() : g.front();
}

struct Times {
  std::vector<double> f, b, i, w;
};

// One repetition: F then B; again F, then I (keeping the graph) and W.
void measure_once(Child& c, Times* out) {
  at::Tensor y;
  const double f = timed([&] { return y = c.forward(); });
  if (!y.requires_grad()) {  // nothing to differentiate
    if (out) out->f.push_back(f), out->b.push_back(0), out->i.push_back(0), out->w.push_back(0);
    return;
  }
  std::vector<at::Tensor> all = c.parameters;
  if (c.input_grad()) all.insert(all.begin(), c.input);
  const double b = timed([&] { return grad_of(y, all, false); });
  double i = 0, w = 0;
  if (c.input_grad() && !c.parameters.empty()) {
    y = c.forward();
    i = timed([&] { return grad_of(y, {c.input}, true); });
    w = timed([&] { return grad_of(y, c.parameters, false); });
  } else if (c.input_grad()) {
    i = b;  // an input gradient only
  } else {
    w = b;  // parameter gradients only
  }
  if (out) out->f.push_back(f), out->b.push_back(b), out->i.push_back(i), out->w.push_back(w);
}

// Bytes the forward allocates that stay alive until its backward.
std::int64_t activation_bytes(Child& c) {
  auto counter = std::make_shared<AllocationCounter>();
  c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, counter);
  at::Tensor y = c.forward();
  synchronize(y);
  const std::int64_t live = counter->live();
  y.reset();  // freed while counted, so the allocator forgets these blocks
  return std::max<std::int64_t>(live, 0);
}

std::string layer_name(const std::string& key, const torch::nn::Module& m) {
  std::string type = m.name();
  const std::size_t colon = type.rfind("::");
  if (colon != std::string::npos) type = type.substr(colon + 2);
  if (type.size() > 4 && type.compare(type.size() - 4, 4, "Impl") == 0)
    type.resize(type.size() - 4);
  return key + "." + type;
}

// Every child with its input: the previous child's output on `input`.
std::vector<Child> children_with_inputs(const torch::nn::Sequential& model,
                                        const at::Tensor& input) {
  std::vector<Child> children;
  at::Tensor x = input;
  torch::NoGradGuard no_grad;
  for (const torch::nn::AnyModule& m : *model) {
    Child c{m, x.detach(), {}};
    if (c.input.is_floating_point()) c.input.requires_grad_(true);
    for (const at::Tensor& p : m.ptr()->parameters(/*recurse=*/true))
      if (p.requires_grad()) c.parameters.push_back(p);
    x = c.module.forward(x);
    children.push_back(std::move(c));
  }
  return children;
}

// Puts the default CPU generator back as it was, also on a throw.
struct RngRestore {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  at::Tensor state = gen.get_state();
  RngRestore() = default;
  RngRestore(const RngRestore&) = delete;
  RngRestore& operator=(const RngRestore&) = delete;
  ~RngRestore() { gen.set_state(state); }
};

}  // namespace

LayerProfile profile_layers(const torch::nn::Sequential& model, const at::Tensor& input,
                            const ProfileOptions& options) {
  if (model->size() == 0) throw InputError("profile_layers: the model has no children");
  if (options.repeats < 1 || options.warmup < 0)
    throw InputError("profile_layers: repeats must be at least 1 and warmup at least 0 (got " +
                     std::to_string(options.repeats) + " and " + std::to_string(options.warmup) +
                     ")");
  if (!input.defined()) throw InputError("profile_layers: no input tensor given");
  const RngRestore rng;  // dropout in the profiled forwards must not shift the trainer's draws
  std::vector<Child> children = children_with_inputs(model, input);
  const auto names = model->named_children();
  LayerProfile profile;
  for (std::size_t k = 0; k < children.size(); ++k) {
    Child& c = children[k];
    for (int r = 0; r < options.warmup; ++r) measure_once(c, nullptr);
    Times t;
    for (int r = 0; r < options.repeats; ++r) measure_once(c, &t);
    Layer layer;
    layer.name = layer_name(names[k].key(), *c.module.ptr());
    layer.f = to_ns(median(t.f));
    layer.b = to_ns(median(t.b));
    const double i = median(t.i), w = median(t.w);
    layer.w = i + w > 0 ? to_ns(layer.b * (w / (i + w))) : 0.0;
    layer.activation = static_cast<double>(activation_bytes(c));
    layer.input = static_cast<double>(c.input.numel() * c.input.element_size());
    profile.layers.push_back(std::move(layer));
  }
  return profile;
}

std::vector<std::string> profile_comment(const ProfileOptions& options) {
  return {"profiled by pipeplan::exec::profile_layers: one microbatch per layer",
          "F, B, W in milliseconds (median of " + std::to_string(options.repeats) + " after " +
              std::to_string(options.warmup) + " warm-up runs); activation and input in bytes"};
}

void check_profile_matches(const LayerProfile& profile, const torch::nn::Sequential& model) {
  if (profile.size() != model->size())
    throw InputError("the layer profile has " + std::to_string(profile.size()) +
                     " layers but the model has " + std::to_string(model->size()) +
                     " children; a profile of another model would split this one wrongly "
                     "(profile this model with profile_layers)");
}

}  // namespace pipeplan::exec
