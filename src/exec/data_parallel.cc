// DP x PP groups and the gradient-averaging observer.
#include "pipeplan/exec/data_parallel.h"

#include <ATen/ATen.h>

#include "pipeplan/error.h"

namespace pipeplan::exec {

ParallelGroups make_parallel_groups(const std::shared_ptr<Communicator>& world, int pp, int dp,
                                    std::chrono::milliseconds timeout) {
  if (!world) throw InputError("make_parallel_groups: no world group given");
  if (pp < 1 || dp < 1 || pp * dp != world->size())
    throw InputError("pipeline degree " + std::to_string(pp) + " x data-parallel degree " +
                     std::to_string(dp) + " = " + std::to_string(pp * dp) +
                     " ranks, but the world has " + std::to_string(world->size()) +
                     "; start pp * dp ranks");
  ParallelGroups g;
  const int r = world->rank();
  g.replica = r / pp;
  g.pipeline_rank = r % pp;
  // Every rank forms its pipeline group, then its data group, so members of
  // each group meet in the same phase.
  std::vector<int> pipe, data;
  for (int i = 0; i < pp; ++i) pipe.push_back(g.replica * pp + i);
  for (int d = 0; d < dp; ++d) data.push_back(d * pp + g.pipeline_rank);
  g.pipeline = world->subgroup(pipe, "pp" + std::to_string(g.replica), timeout);
  g.data = world->subgroup(data, "dp" + std::to_string(g.pipeline_rank), timeout);
  if (!g.pipeline || !g.data)
    throw InternalError("make_parallel_groups: not a member of own group");
  return g;
}

double global_loss(Communicator& data_group, double replica_loss, std::chrono::milliseconds timeout,
                   LossReduction reduction) {
  at::Tensor t =
      at::full({1}, replica_loss, at::TensorOptions().dtype(at::kDouble)).to(data_group.device());
  data_group.allreduce_sum(t, timeout);
  const double sum = t.to(at::kCPU).item<double>();
  return reduction == LossReduction::Mean ? sum / data_group.size() : sum;
}

GradientAverager::GradientAverager(std::shared_ptr<Communicator> data_group,
                                   std::chrono::milliseconds timeout)
    : group_(std::move(data_group)), timeout_(timeout) {
  if (!group_) throw InputError("GradientAverager: no data-parallel group given");
}

void GradientAverager::on_stage_grads_ready(int stage, const std::vector<at::Tensor>& parameters) {
  if (group_->size() == 1) return;
  for (const at::Tensor& p : parameters) {
    at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
    // A parameter without a gradient has none on every replica (same model).
    if (!g.defined()) continue;
    if (!g.is_contiguous()) g = g.contiguous();
    pending_.push_back({g, group_->iallreduce_sum(g), stage});
  }
}

void GradientAverager::on_step_end(int /*step*/, bool /*forward_only*/) {
  std::vector<Pending> pending = std::move(pending_);
  pending_.clear();
  const double scale = 1.0 / group_->size();
  for (Pending& p : pending) {
    p.op->wait(timeout_, "averaging stage " + std::to_string(p.stage) + "'s gradients across " +
                             std::to_string(group_->size()) + " data-parallel replicas");
    p.grad.mul_(scale);
  }
}

}  // namespace pipeplan::exec
