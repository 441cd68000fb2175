// The executor: replays one rank's program of a verified plan on LibTorch,
// moving boundary values with c10d point-to-point operations.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/ir.h"
#include "pipeplan/verify.h"

namespace pipeplan::exec {

/// A boundary or user-input value: a tensor or an int scalar. Int scalars
/// cross ranks as 0-d int64 tensors and arrive as ints again.
using Value = std::variant<at::Tensor, std::int64_t>;
using Values = std::vector<Value>;

/// One stage's forward for one microbatch. `inputs`: the previous stage's
/// outputs (none on stage 0), then the user inputs routed to this stage,
/// sliced to the microbatch. Returns what the next stage (or the loss) gets.
using StageForward = std::function<Values(const Values& inputs)>;

/// Loss of one microbatch on the last stage (a one-element tensor), from the
/// last stage's outputs and the targets sliced to the microbatch.
using LossFn = std::function<at::Tensor(const Values& outputs, const Values& targets)>;

/// A stage this rank owns: its forward and the parameters that get gradients.
struct StageModule {
  StageForward forward;
  std::vector<at::Tensor> parameters;
};

/// Kind, dtype and shape of one boundary value.
struct ValueSpec {
  bool scalar = false;  ///< an int scalar (dtype/shape unused)
  at::ScalarType dtype = at::kFloat;
  std::vector<std::int64_t> shape;
  friend bool operator==(const ValueSpec& a, const ValueSpec& b) {
    return a.scalar == b.scalar && (a.scalar || (a.dtype == b.dtype && a.shape == b.shape));
  }
  friend bool operator!=(const ValueSpec& a, const ValueSpec& b) { return !(a == b); }
};
/// The ordered values one stage hands to the next, per microbatch.
using BoundarySpec = std::vector<ValueSpec>;
/// "float[4, 16], float[4, 16], int".
std::string to_string(const BoundarySpec& spec);

/// Thrown when a plan fails verification (pipeplan/error.h).
using pipeplan::PlanRejected;

struct ExecOptions {
  /// Bound on every wait for a peer (receives, sends, handshakes).
  std::chrono::milliseconds timeout{60000};
  /// Transport model the plan must be proved deadlock-free under. Rendezvous
  /// is the strictest and what NCCL needs; Gloo matches by tag (eager).
  Transport transport = Transport::Rendezvous;
  /// Learn boundary shapes again on every step (dynamic shapes) instead of
  /// once on the first step.
  bool reexchange_shapes = false;
  /// Output spec of stage s for every cross-rank boundary s -> s+1. When it
  /// covers all of them, no shapes are exchanged. Give the same on all ranks.
  std::map<int, BoundarySpec> output_specs;
  /// Per user input (in step() order), the stage consuming it; empty: all go
  /// to stage 0. Every rank passes every input and slices only its own.
  std::vector<int> input_stages;
};

/// Checks, without communicating, that `plan` can run as `rank` of
/// `world_size`: whole, pp_degree == world_size, rank in range; lowers a
/// compute-only plan with its schedule's options; verifies it under
/// `transport`. Returns the plan to run. Throws InputError or PlanRejected.
Plan prepare_plan(const Plan& plan, int rank, int world_size, Transport transport);

/// Replays one rank's program, one training step per step() call.
class Executor {
 public:
  /// Runs prepare_plan(); nothing is communicated until connect().
  Executor(const Plan& plan, int rank, int world_size, ExecOptions options = {});
  ~Executor();
  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;

  /// Registers a stage this rank owns (throws InputError for a foreign one).
  void set_stage(int stage, StageModule module);
  /// Sets the loss; required on the rank holding the last stage.
  void set_loss(LossFn loss);
  /// Attaches the group and checks (one allreduce) that every rank runs the
  /// same plan and options. Throws InputError on a mismatch, CommError on a
  /// dead or missing peer.
  void connect(std::shared_ptr<Communicator> comm);

  /// One step: splits every tensor input and target along dim 0 into
  /// num_microbatches (InputError when the batch does not divide), replays the
  /// program, waits every operation, then adds the microbatch-mean gradient
  /// to each parameter's .grad. Returns the mean microbatch loss on the rank
  /// holding the last stage, nullopt elsewhere. After a throw the executor is
  /// unusable (peers are left mid-step).
  std::optional<double> step(const Values& inputs, const Values& targets);

  /// The plan being run (lowered when a compute-only one was given).
  const Plan& plan() const;
  int rank() const;
  /// Stages this rank owns, ascending.
  const std::vector<int>& local_stages() const;
  /// True when this rank owns the last stage (and so reports the loss).
  bool holds_last_stage() const;
  /// Output spec of a local stage, once learned (empty before the first step).
  BoundarySpec output_spec(int stage) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The same stages run unpipelined on the full batch in this process: one
/// loss_fn call, one backward accumulating into .grad. Returns the loss. The
/// reference a pipelined step must match (for a mean-reduced loss).
double run_unpipelined(const std::vector<StageModule>& stages, const LossFn& loss_fn,
                       const std::vector<int>& input_stages, const Values& inputs,
                       const Values& targets);

}  // namespace pipeplan::exec
