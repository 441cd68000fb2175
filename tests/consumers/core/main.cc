// Plans, verifies and simulates a schedule through the installed headers
// and library; also built with pkg-config (tests/consumers/pkgconfig.sh).
#include <iostream>

#include "pipeplan/emit.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "pipeplan/version.h"

int main() {
  pipeplan::Problem problem;
  problem.schedule = "1f1b";
  problem.pp_degree = 2;
  problem.num_microbatches = 4;
  const pipeplan::Plan plan = pipeplan::plan(problem);
  const pipeplan::VerifyResult verified = pipeplan::verify(plan);
  const pipeplan::SimResult sim = pipeplan::simulate(plan);
  if (!verified.ok() || !sim.ok()) return 1;
  std::cout << "pipeplan " << pipeplan::kVersion << ": " << plan.num_actions()
            << " actions, makespan " << sim.makespan << "\n";
  pipeplan::write_text(plan, std::cout);
  return 0;
}
