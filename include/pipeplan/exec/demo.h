// The model `pipeplan train` runs, also used by the tests and the benchmark:
// a residual tanh MLP with one linear layer per stage. Each boundary carries
// two float tensors and an int scalar, and the last stage consumes a second
// user input, so the demo exercises every kind of boundary value and routing.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "pipeplan/exec/executor.h"

namespace pipeplan::exec {

struct DemoConfig {
  int num_stages = 1;
  int width = 16;   ///< features of x and of every hidden layer
  int outputs = 4;  ///< regression targets per sample
  std::uint64_t seed = 0;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
};

/// Parameters of every stage ([weight, bias] each), drawn from the seed, so
/// all ranks agree on them without communicating. They require grad.
std::vector<std::vector<at::Tensor>> demo_parameters(const DemoConfig& config);
/// Stage `stage` over its parameters: stage 0 takes x; others take
/// (h, residual, rows); the last also takes the per-sample scale.
StageModule demo_stage(const DemoConfig& config, int stage, std::vector<at::Tensor> params);
/// Mean squared error over samples and outputs (uses the `rows` scalar).
LossFn demo_loss(const DemoConfig& config);
/// Where the two user inputs go: x to stage 0, scale to the last stage.
std::vector<InputRoute> demo_input_stages(const DemoConfig& config);

/// Synthetic inputs {x, scale} and targets {y} of one step, from the seed.
struct DemoBatch {
  Values inputs;
  Values targets;
};
DemoBatch demo_batch(const DemoConfig& config, std::int64_t batch_size, int step);

/// Plain SGD: p -= lr * p.grad, then the gradient is cleared.
void sgd_step(const std::vector<at::Tensor>& params, double lr);

}  // namespace pipeplan::exec
