// The embedding example of docs/executor.md, built so it keeps compiling.
// Run under any torchrun-style launcher, e.g. for a 2-rank plan:
//   pipeplan plan -s 1f1b -p 2 -m 4 -o plan.json
//   RANK=0 WORLD_SIZE=2 MASTER_PORT=29512 ./example_trainer plan.json &
//   RANK=1 WORLD_SIZE=2 MASTER_PORT=29512 ./example_trainer plan.json
#include <ATen/ATen.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/io.h"

namespace px = pipeplan::exec;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: example_trainer PLAN.json|PLAN.csv\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  try {
    pipeplan::Plan plan = pipeplan::parse_plan(text.str(), argv[1]);
    px::DistEnv env = px::DistEnv::from_environment();

    // 1. Check the plan for this rank; nothing is communicated yet.
    px::ExecOptions options;
    options.timeout = std::chrono::seconds(30);
    options.input_stages = {0};  // one user input, consumed by stage 0
    px::Executor executor(plan, env.rank, env.world_size, options);

    // 2. Register the stages this rank owns: one linear layer each, 8 -> 8.
    const int num_stages = plan.meta.num_stages();
    std::vector<at::Tensor> params;
    for (int stage : executor.local_stages()) {
      at::manual_seed(stage);  // same weights whichever rank owns the stage
      at::Tensor w = (at::randn({8, 8}) / 3).requires_grad_();
      at::Tensor b = at::zeros({8}).requires_grad_();
      params.insert(params.end(), {w, b});
      const bool last = stage == num_stages - 1;
      executor.set_stage(stage, {[w, b, last](const px::Values& in) -> px::Values {
                                   at::Tensor h = at::linear(std::get<at::Tensor>(in[0]), w, b);
                                   return {last ? h : at::relu(h)};
                                 },
                                 {w, b}});
    }
    // 3. The loss of one microbatch, used on the rank owning the last stage.
    executor.set_loss([](const px::Values& out, const px::Values& targets) {
      return at::mse_loss(std::get<at::Tensor>(out[0]), std::get<at::Tensor>(targets[0]));
    });

    // 4. Form the Gloo group from RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT.
    auto comm = px::Communicator::connect(env, px::Backend::Gloo, options.timeout);
    executor.connect(comm);

    // 5. Train: every rank passes the whole batch; each slices what it needs.
    at::manual_seed(1234);
    const int64_t batch = 4 * plan.meta.num_microbatches;
    for (int step = 1; step <= 5; ++step) {
      at::Tensor x = at::randn({batch, 8}), y = at::randn({batch, 8});
      std::optional<double> loss = executor.step({x}, {y});
      if (loss) std::printf("step %d loss %.9f\n", step, *loss);
      at::NoGradGuard no_grad;
      for (at::Tensor& p : params) {  // plain SGD on this rank's parameters
        p.sub_(p.grad() * 0.1);
        p.mutable_grad().zero_();
      }
    }
    // 6. Leave together: no rank closes its sockets while a peer still reads.
    comm->barrier(options.timeout);
    return 0;
  } catch (const std::exception& e) {
    // A failed step leaves peers mid-step; exit rather than unwind into
    // destructors that may wait on them.
    std::cerr << "example_trainer: " << e.what() << "\n";
    std::fflush(stderr);
    std::_Exit(1);
  }
}
