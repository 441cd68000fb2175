// Data parallelism around pipelines (DP x PP): a world of pp * dp ranks holds
// dp replicas of the pipeline, and each stage's gradients are averaged across
// the replicas from the executor's stage-gradients-ready hook.
//
// @code
//   auto world = Communicator::connect(DistEnv::from_environment(), Backend::Gloo, timeout);
//   ParallelGroups g = make_parallel_groups(world, plan.meta.pp_degree, dp, timeout);
//   Executor ex(plan, g.pipeline, options);          // this replica's pipeline
//   ex.add_observer(std::make_shared<GradientAverager>(g.data, timeout));
//   // each replica steps on its own slice g.replica of the global batch
//   std::optional<double> loss = ex.step(inputs, targets);  // this replica's
//   if (loss) loss = global_loss(*g.data, *loss, timeout);  // the global batch's
// @endcode
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <vector>

#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/hooks.h"

namespace pipeplan::exec {

/// This process's groups in a world of pp * dp ranks. Replica d holds world
/// ranks d*pp .. d*pp+pp-1 (pipeline rank = world rank % pp), so a replica's
/// neighbouring stages sit on neighbouring ranks.
struct ParallelGroups {
  std::shared_ptr<Communicator> pipeline;  ///< the pp ranks of this replica
  std::shared_ptr<Communicator> data;      ///< the dp ranks with this pipeline rank
  int replica = 0;                         ///< d, in 0..dp-1
  int pipeline_rank = 0;                   ///< rank in `pipeline`
};

/// Forms both groups (every rank of `world` calls it with the same pp and dp).
/// InputError when pp * dp differs from the world size.
ParallelGroups make_parallel_groups(const std::shared_ptr<Communicator>& world, int pp, int dp,
                                    std::chrono::milliseconds timeout);

/// The global batch's loss from this replica's (the step loss, on the rank
/// holding the last stage; every such rank calls it, one per replica: they
/// form one data group): the sum over `data_group`, divided by its size for
/// LossReduction::Mean (replicas of equal batches), as the unpipelined model
/// computes it on the global batch.
double global_loss(Communicator& data_group, double replica_loss, std::chrono::milliseconds timeout,
                   LossReduction reduction = LossReduction::Mean);

/// Averages every stage's gradients across the data group: when a stage's
/// gradients are ready it starts one asynchronous allreduce per gradient (they
/// run while the rest of the backward does), and at the end of the step it
/// waits for them and divides by the group size, so step() returns with
/// replica-averaged .grad on every rank. Forward-only steps are left alone.
class GradientAverager : public Observer {
 public:
  GradientAverager(std::shared_ptr<Communicator> data_group, std::chrono::milliseconds timeout);
  void on_stage_grads_ready(int stage, const std::vector<at::Tensor>& parameters) override;
  void on_step_end(int step, bool forward_only) override;

 private:
  struct Pending {
    at::Tensor grad;
    std::unique_ptr<PendingOp> op;
    int stage;
  };
  std::shared_ptr<Communicator> group_;
  std::chrono::milliseconds timeout_;
  std::vector<Pending> pending_;
};

}  // namespace pipeplan::exec
