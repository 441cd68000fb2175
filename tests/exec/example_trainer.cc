// A complete trainer on pipeplan's executor (shown in docs/executor.md):
// a torch::nn::Sequential language-model toy, each rank building only its
// stages of the plan; inputs on the first stage's rank, targets on the last
// stage's, SGD.
//
//   example_trainer PLAN [STEPS]   (one rank; RANK/WORLD_SIZE/MASTER_* set)
//
// Prints "step <k> loss <v>" on every rank (the loss is shared), or one
// "error: ..." line and exit status 1.
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "pipeplan/exec/build.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/module.h"
#include "pipeplan/io.h"

namespace px = pipeplan::exec;

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: example_trainer PLAN.json|PLAN.csv [STEPS]\n";
    return 2;
  }
  try {
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

    // 3. Only this rank's stages are built. Layer i is built from its own
    //    seed, so a stage has the same weights whichever rank builds it, the
    //    same as in the whole model (build_sequential) built in one process.
    auto layer = [](int i) -> torch::nn::AnyModule {
      if (i == 0) return torch::nn::AnyModule(torch::nn::Embedding(64, 32));
      if (i == 13) return torch::nn::AnyModule(torch::nn::Linear(32, 64));
      if (i % 3 == 1) return torch::nn::AnyModule(torch::nn::Linear(32, 32));
      if (i % 3 == 2) return torch::nn::AnyModule(torch::nn::Functional(torch::gelu, "none"));
      return torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({32})));
    };
    executor.set_stages(px::sequential_stages(layer, 14, plan.meta.num_stages(), /*seed=*/0),
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
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
