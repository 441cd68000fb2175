// A complete trainer on pipeplan's executor (shown in docs/executor.md):
// a torch::nn::Sequential language-model toy, each rank building only its
// stages of the plan (cut by the plan's partition when it records one, as
// `pipeplan search` plans do); inputs on the first stage's rank, targets on
// the last stage's, SGD.
//
//   example_trainer PLAN [STEPS]        (one rank; RANK/WORLD_SIZE/MASTER_* set)
//   example_trainer --profile LAYERS    (profile the model for pipeplan search)
//
// Prints "step <k> loss <v>" on every rank (the loss is shared), or one
// "error: ..." line and the documented exit status (pipeplan::exit_code).
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>

#include "pipeplan/error.h"
#include "pipeplan/exec/build.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/module.h"
#include "pipeplan/exec/profile.h"
#include "pipeplan/io.h"
#include "pipeplan/profile.h"

namespace px = pipeplan::exec;

// The model's layers: layer i of 14, built under its own seed (build.h).
constexpr int kLayers = 14;
torch::nn::AnyModule layer(int i) {
  if (i == 0) return torch::nn::AnyModule(torch::nn::Embedding(64, 32));
  if (i == kLayers - 1) return torch::nn::AnyModule(torch::nn::Linear(32, 64));
  if (i % 3 == 1) return torch::nn::AnyModule(torch::nn::Linear(32, 32));
  if (i % 3 == 2) return torch::nn::AnyModule(torch::nn::Functional(torch::gelu, "none"));
  return torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({32})));
}

// Profile -> search: one microbatch (4 sequences of 6 tokens) through every
// layer, written as the layer profile `pipeplan search --layers` reads.
int profile(const char* path) {
  torch::set_num_threads(1);
  torch::nn::Sequential model = px::build_sequential(layer, kLayers, /*seed=*/0);
  const pipeplan::LayerProfile layers = px::profile_layers(model, torch::randint(64, {4, 6}));
  std::ofstream out(path);
  pipeplan::write_layer_profile(layers, out, px::profile_comment({}));
  return out.good() ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: example_trainer PLAN.json|PLAN.csv [STEPS] | --profile LAYERS.csv\n";
    return 2;
  }
  try {
    if (std::string(argv[1]) == "--profile" && argc == 3) return profile(argv[2]);
    std::ifstream in(argv[1]);
    std::stringstream text;
    text << in.rdbuf();
    const pipeplan::Plan plan = pipeplan::parse_plan(text.str(), argv[1]);
    const int steps = argc == 3 ? std::stoi(argv[2]) : 5;
    torch::set_num_threads(1);

    // 1. The process group, from RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT.
    const auto timeout = std::chrono::seconds(30);
    auto group =
        px::Communicator::connect(px::DistEnv::from_environment(), px::Backend::Gloo, timeout);

    // 2. The executor checks the plan (deadlock-free, same on every rank).
    px::ExecOptions options;
    options.timeout = timeout;
    options.loss_on_every_rank = true;  // every rank may log the loss
    px::Executor executor(plan, group, options);

    // 3. Only this rank's stages are built, cut by the plan's partition
    //    (balanced when it records none). Layer i is built from its own seed,
    //    so a stage has the same weights whichever rank builds it, the same as
    //    in the whole model (build_sequential) built in one process.
    const std::vector<int>& partition = plan.meta.partition;
    if (!partition.empty() && std::accumulate(partition.begin(), partition.end(), 0) != kLayers)
      throw std::runtime_error("the plan's partition is not of this model's " +
                               std::to_string(kLayers) + " layers");
    executor.set_stages(partition.empty()
                            ? px::sequential_stages(layer, kLayers, plan.meta.num_stages(), 0)
                            : px::sequential_stages(layer, partition, /*seed=*/0),
                        /*seed=*/0);
    executor.set_loss([](const px::Values& out, const px::Values& targets) {
      const at::Tensor& logits = std::get<at::Tensor>(out[0]);
      return torch::nn::functional::cross_entropy(logits.reshape({-1, 64}),
                                                  std::get<at::Tensor>(targets[0]).reshape(-1));
    });
    // The optimizer takes exactly this rank's parameters.
    torch::optim::SGD optimizer(executor.local_parameters(), torch::optim::SGDOptions(0.5));

    // 4. Train: the first stage's rank passes the tokens, the last stage's
    //    rank the labels, any other rank nothing.
    const bool first = executor.local_stages().front() == 0;
    const bool last = executor.holds_last_stage();
    const int64_t batch = 4 * plan.meta.num_microbatches;
    for (int step = 1; step <= steps; ++step) {
      torch::manual_seed(1000 + step);  // the same batch on every rank
      at::Tensor tokens = torch::randint(64, {batch, 6});
      at::Tensor labels = (tokens * 7 + 3).remainder(64);  // a learnable mapping
      px::Values inputs, targets;
      if (first) inputs.push_back(tokens);
      if (last) targets.push_back(labels);
      optimizer.zero_grad();
      std::optional<double> loss = executor.step(inputs, targets);
      optimizer.step();
      std::printf("step %d loss %.9f\n", step, *loss);
    }
    // 5. Leave together (also what the destructor does).
    executor.shutdown();
    return 0;
  } catch (const std::exception& e) {
    // A failed step throws on every rank (a peer's failure as a CommError
    // within the timeout); the executor and group then close on unwinding.
    // The exit code is the one `pipeplan train` gives (4: a peer failed).
    std::cerr << "error: " << e.what() << "\n";
    return pipeplan::exit_code(e);
  }
}
