// What runs besides the pipeline: the plan check every rank makes before it
// communicates, and the unpipelined reference a pipelined step must match.
#include <ATen/ATen.h>

#include <algorithm>

#include "exec/boundary.h"
#include "pipeplan/error.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/prove.h"

namespace pipeplan::exec {

Plan prepare_plan(const Plan& plan, int rank, int world_size, Transport transport) {
  const PlanMeta& meta = plan.meta;
  if (meta.pp_degree != world_size)
    throw InputError("the plan is for pp_degree=" + std::to_string(meta.pp_degree) +
                     " ranks but the process group has world size " + std::to_string(world_size) +
                     "; start exactly " + std::to_string(meta.pp_degree) + " ranks");
  if (rank < 0 || rank >= world_size)
    throw InputError("rank " + std::to_string(rank) + " is outside the world of " +
                     std::to_string(world_size) + " ranks");
  if (!plan.is_whole()) {
    bool present = false;
    for (int r : plan.rank_ids) present = present || r == rank;
    throw InputError(
        std::string(present ? "" : "rank " + std::to_string(rank) + " is not in the plan; ") +
        "the plan holds the program of rank(s) " + detail::join(plan.rank_ids) +
        " only, and the executor needs every rank's program to prove the "
        "plan deadlock-free before running it");
  }
  if (!detail::tag_space_ok(meta.num_stages(), meta.num_microbatches))
    throw InputError("the plan has too many stages x microbatches for the message tags");
  Proof proof = prove(plan, std::vector<Transport>{transport});
  const VerifyResult& result = proof.results.front();
  if (!result.ok())
    throw PlanRejected("the plan is not proved deadlock-free under " +
                           std::string(to_string(transport)) + " transport; refusing to run it:\n" +
                           format_diagnostics(result.diagnostics),
                       result.diagnostics);
  return proof.lowered ? std::move(*proof.lowered) : plan;
}

double run_unpipelined(const std::vector<StageModule>& stages, const LossFn& loss_fn,
                       const std::vector<InputRoute>& input_stages, const Values& inputs,
                       const Values& targets) {
  if (!input_stages.empty() && input_stages.size() != inputs.size())
    throw InputError("input_stages routes " + std::to_string(input_stages.size()) + " inputs but " +
                     std::to_string(inputs.size()) + " were given");
  Values carried;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    Values in = std::move(carried);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<int> to =
          input_stages.empty() ? std::vector<int>{0} : input_stages[i].stages;
      if (std::find(to.begin(), to.end(), static_cast<int>(s)) != to.end()) in.push_back(inputs[i]);
    }
    carried = stages[s].forward(in);
  }
  at::Tensor loss = loss_fn(carried, targets);
  loss.backward();
  return loss.item<double>();
}

}  // namespace pipeplan::exec
