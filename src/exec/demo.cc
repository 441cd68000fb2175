#include "pipeplan/exec/demo.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <cmath>

#include "pipeplan/error.h"

namespace pipeplan::exec {

namespace {

at::Tensor finish(const at::Tensor& t, const DemoConfig& c, bool grad) {
  at::Tensor out = t.to(at::TensorOptions().dtype(c.dtype).device(c.device)).detach();
  if (grad) out.set_requires_grad(true);
  return out;
}

}  // namespace

std::vector<std::vector<at::Tensor>> demo_parameters(const DemoConfig& c) {
  if (c.num_stages < 1 || c.width < 1 || c.outputs < 1 || c.outputs > c.width)
    throw InputError("demo model: need num_stages >= 1 and 1 <= outputs <= width");
  at::Generator gen = at::detail::createCPUGenerator(c.seed);
  std::vector<std::vector<at::Tensor>> params;
  for (int s = 0; s < c.num_stages; ++s) {
    const int out = s + 1 == c.num_stages ? c.outputs : c.width;
    at::Tensor w = at::randn({out, c.width}, gen, at::kDouble) / std::sqrt(double(c.width));
    at::Tensor b = at::randn({out}, gen, at::kDouble) * 0.1;
    params.push_back({finish(w, c, true), finish(b, c, true)});
  }
  return params;
}

StageModule demo_stage(const DemoConfig& c, int stage, std::vector<at::Tensor> params) {
  const bool first = stage == 0, last = stage + 1 == c.num_stages;
  at::Tensor w = params.at(0), b = params.at(1);
  StageModule m;
  m.parameters = std::move(params);
  // The last stage does not use the residual it is handed: no gradient for it.
  if (last && !first) m.unused_inputs = {1};
  m.forward = [first, last, w, b](const Values& in) -> Values {
    at::Tensor h, residual;
    std::int64_t rows = 0;
    if (first) {
      h = residual = std::get<at::Tensor>(in.at(0));
      rows = h.size(0);
    } else {
      h = std::get<at::Tensor>(in.at(0));
      residual = std::get<at::Tensor>(in.at(1));
      rows = std::get<std::int64_t>(in.at(2));
    }
    at::Tensor z = at::linear(h, w, b);
    if (last) return {z * std::get<at::Tensor>(in.back()), rows};
    return {at::tanh(z) + 0.5 * residual, h, rows};
  };
  return m;
}

LossFn demo_loss(const DemoConfig& c) {
  const int outputs = c.outputs;
  return [outputs](const Values& out, const Values& targets) {
    const at::Tensor& y = std::get<at::Tensor>(out.at(0));
    const std::int64_t rows = std::get<std::int64_t>(out.at(1));
    return (y - std::get<at::Tensor>(targets.at(0))).pow(2).sum() / double(rows * outputs);
  };
}

std::vector<InputRoute> demo_input_stages(const DemoConfig& c) { return {0, c.num_stages - 1}; }

DemoBatch demo_batch(const DemoConfig& c, std::int64_t batch_size, int step) {
  at::Generator gen = at::detail::createCPUGenerator(c.seed * 1000003ULL + 7919ULL * (step + 1));
  at::Tensor x = at::randn({batch_size, c.width}, gen, at::kDouble);
  at::Tensor scale = at::rand({batch_size, 1}, gen, at::kDouble) + 0.5;
  at::Tensor y = at::sin(x.narrow(1, 0, c.outputs) * 2.0);
  DemoBatch batch;
  batch.inputs = {finish(x, c, false), finish(scale, c, false)};
  batch.targets = {finish(y, c, false)};
  return batch;
}

void sgd_step(const std::vector<at::Tensor>& params, double lr) {
  c10::NoGradGuard no_grad;
  for (const at::Tensor& p : params) {
    at::Tensor& g = p.mutable_grad();
    if (!g.defined()) continue;
    p.sub_(g * lr);
    g = at::Tensor();
  }
}

}  // namespace pipeplan::exec
