// Links the installed executor and LibTorch: prepares rank 1's program of a
// 1f1b plan and runs one tensor operation.
#include <ATen/ATen.h>

#include <iostream>

#include "pipeplan/exec/executor.h"
#include "pipeplan/planner.h"

int main() {
  pipeplan::Problem problem;
  problem.schedule = "1f1b";
  problem.pp_degree = 2;
  problem.num_microbatches = 4;
  const pipeplan::Plan whole = pipeplan::plan(problem);
  const pipeplan::Plan mine =
      pipeplan::exec::prepare_plan(whole, 1, 2, pipeplan::Transport::Rendezvous);
  const double sum = at::ones({2, 3}).sum().item<double>();
  std::cout << "rank 1 runs " << mine.ranks.back().size() << " actions; ones(2,3).sum() = " << sum
            << "\n";
  return sum == 6.0 ? 0 : 1;
}
