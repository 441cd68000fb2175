// The executor: replays one rank's program of a verified plan on LibTorch,
// moving boundary values with c10d point-to-point operations.
//
// One rank of a trainer (launched with RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT set, one process per pipeline rank):
// @code
//   pipeplan::Problem problem;                      // 1f1b, pp 4, 8 microbatches
//   pipeplan::Plan plan = pipeplan::plan(problem);  // lowered and verified
//   auto env = pipeplan::exec::DistEnv::from_environment();
//   pipeplan::exec::Executor executor(plan, env.rank, env.world_size);
//   torch::manual_seed(0);                          // same weights on every rank
//   torch::nn::Sequential model(...);               // the whole model, everywhere
//   executor.set_stages(pipeplan::exec::split_sequential(model, plan.meta.num_stages()));
//   using pipeplan::exec::Values;
//   executor.set_loss([](const Values& out, const Values& y) {
//     return torch::mse_loss(std::get<at::Tensor>(out[0]), std::get<at::Tensor>(y[0]));
//   });
//   executor.connect(pipeplan::exec::Communicator::connect(
//       env, pipeplan::exec::Backend::Gloo, std::chrono::seconds(60)));
//   for (auto& [x, y] : batches) {
//     std::optional<double> loss = executor.step({x}, {y});  // loss on the last stage's rank
//     optimizer.step();                             // the local stages' .grad are set
//     optimizer.zero_grad();
//   }
//   executor.shutdown();
// @endcode
// Ranks that do not consume inputs or hold the last stage may pass nothing;
// see docs/executor.md for input routes, forward-only steps, hooks and DP x PP.
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
#include "pipeplan/exec/hooks.h"
#include "pipeplan/ir.h"
#include "pipeplan/verify.h"

namespace torch::nn {
class Module;
}

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
/// Build it from a torch::nn module with module_stage() / split_sequential()
/// (pipeplan/exec/module.h) so the parameters are collected for you. For a
/// hand-written stage, every tensor requiring grad that the forward uses must
/// be listed: the first training step fails with an InputError naming a
/// trainable tensor the forward reached that `parameters` leaves out.
///
/// No silent wrong gradient: every trainable parameter listed must receive a
/// gradient from the stage's backward in a training step (ExecOptions::
/// gradient_check says when that is checked), and every differentiable
/// boundary input must receive one in each backward; otherwise the step
/// fails with an InputError naming the stage and the parameter or input.
/// Where one really takes no gradient, opt out explicitly.
struct StageModule {
  StageForward forward;
  std::vector<at::Tensor> parameters;
  /// The module behind the stage, if any: Executor::train()/eval() switch its mode.
  std::shared_ptr<torch::nn::Module> module;
  /// Names of `parameters` (same order), used in errors; module_stage() fills
  /// them with the module's dotted names. Empty: parameters are named by index.
  std::vector<std::string> parameter_names;
  /// Parameters (among `parameters`) that may receive no gradient in a step
  /// without an error: the explicit opt-out for a really unused parameter.
  std::vector<at::Tensor> unused_parameters;
  /// Positions, among the previous stage's outputs, of differentiable
  /// boundary inputs this stage does not differentiate (e.g. a float mask it
  /// only reads): they may receive no gradient (the previous stage then gets
  /// zeros for them).
  std::vector<int> unused_inputs;
  /// This stage's copy of each shared parameter it is in (ExecOptions::ties),
  /// by tie name; each must be one of `parameters`.
  std::map<std::string, at::Tensor> tied;
};

/// Builds stage `stage` from scratch (local-only construction: called only
/// for the stages this rank owns; Executor::set_stages(factory, seed)).
using StageFactory = std::function<StageModule(int stage)>;

/// A shared (tied) parameter: each of `stages` holds its own copy (the token
/// embedding of stage 0 and the LM head of the last stage, on different
/// ranks). The executor sums the copies' gradients of a step across the
/// owning stages and ranks, once every rank ran its program, and adds the sum
/// to every copy's .grad, so the copies stay equal under any optimizer that
/// treats them alike, exactly like the tied unpipelined model. Before the
/// first step, one allreduce checks that every copy has the same shape,
/// dtype and values (identical initialisation).
struct Tie {
  std::string name;
  std::vector<int> stages;
};

/// When the executor checks that every listed parameter of a local stage
/// received a gradient (checked at the stage's last backward of the step,
/// before its .grad is touched). Executor::check_gradients() checks the last
/// training step on demand, whatever this says.
enum class GradientCheck : std::uint8_t {
  EveryStep,  ///< every training step (the default; costs one pass over the parameters)
  FirstStep,  ///< the first training step only
  Never,      ///< only when check_gradients() is called
};

/// The stages one user input feeds: implicitly from one stage (`2`) or a
/// list (`{0, 3}`), e.g. an attention mask every stage reads.
struct InputRoute {
  std::vector<int> stages;
  /// The same whole tensor, unsliced, for the consuming stages of every
  /// microbatch (an attention mask [T, T], a rotary table): it has no batch
  /// dimension and takes no part in the batch-size checks. Build with
  /// replicated_input().
  bool replicated = false;
  InputRoute(int stage) : stages{stage} {}  // NOLINT(google-explicit-constructor)
  InputRoute(std::initializer_list<int> s) : stages(s) {}
  explicit InputRoute(std::vector<int> s, bool replicate = false)
      : stages(std::move(s)), replicated(replicate) {}
};

/// A route handing one input, whole, to `stages` for every microbatch
/// (InputRoute::replicated): `opts.input_stages = {0, replicated_input({0, 1, 2, 3})}`.
inline InputRoute replicated_input(std::vector<int> stages) {
  return InputRoute(std::move(stages), /*replicate=*/true);
}

/// How microbatch losses combine into the step loss (and the gradients).
enum class LossReduction : std::uint8_t {
  /// The loss function returns a mean over its microbatch; the step loss and
  /// gradients are the mean over microbatches (equal to a full-batch mean).
  Mean,
  /// The loss function returns a sum over its microbatch; the step loss and
  /// gradients are sums (torch's scale_grads=False).
  Sum,
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
  /// Per user input (in step() order), the stage(s) consuming it; empty: all
  /// go to stage 0. A rank passes either every input or only the inputs its
  /// stages consume (in order); a rank consuming none calls step() without.
  std::vector<InputRoute> input_stages;
  /// Mean (default) or sum over microbatches.
  LossReduction loss_reduction = LossReduction::Mean;
  /// Return the step loss on every rank (one allreduce per step), not only
  /// on the rank holding the last stage.
  bool loss_on_every_rank = false;
  /// When every listed parameter must have received a gradient (StageModule).
  GradientCheck gradient_check = GradientCheck::EveryStep;
  /// Shared parameters (see Tie). Give the same on all ranks.
  std::vector<Tie> ties;
  /// Release a forward output's data once it was delivered (its SEND_F
  /// posted, or handed to the next stage on this rank): the backward starts
  /// from the output's graph node, not its values, so only the graph stays
  /// (what PaddlePaddle's pipeline driver does). The message keeps the data
  /// until the send completed. Views and pass-through inputs are kept.
  bool free_sent_outputs = true;
  /// Forward-only steps: the last stage's outputs (StepResult::outputs) are
  /// moved to host memory as each microbatch produces them, so the device
  /// does not hold the whole batch's outputs.
  bool outputs_on_host = false;
};

/// What a step produced on this rank.
struct StepResult {
  /// Step loss (mean or sum of the microbatch losses): on the rank holding the
  /// last stage when a loss is set and targets were given, on every rank with
  /// loss_on_every_rank.
  std::optional<double> loss;
  /// Per-microbatch losses (0-d, detached), on the rank holding the last stage.
  std::vector<at::Tensor> losses;
  /// Forward-only steps, on the rank holding the last stage: its outputs for
  /// the whole batch, microbatches concatenated along dim 0 (0-d tensors and
  /// int scalars that differ between microbatches come back as one value per
  /// microbatch; equal int scalars as that int).
  Values outputs;
};

/// Checks, without communicating, that `plan` can run as `rank` of
/// `world_size`: whole, pp_degree == world_size, rank in range; proves it
/// under `transport` (prove(): a compute-only plan through its schedule's
/// lowering). Returns the plan to run. Throws InputError or PlanRejected.
/// A trainable parameter of a local stage, by name (Executor::named_parameters).
struct NamedParameter {
  int stage = 0;
  std::string name;  ///< the stage's name for it ("2.weight", or "#0")
  at::Tensor tensor;
  /// "<stage>.<name>": unique across the pipeline, stable across schedules
  /// of the same stages (what a checkpoint keys on).
  std::string qualified() const { return std::to_string(stage) + "." + name; }
};

Plan prepare_plan(const Plan& plan, int rank, int world_size, Transport transport);

/// Replays one rank's program, one training step per step() call.
class Executor {
 public:
  /// Runs prepare_plan(); nothing is communicated until connect().
  Executor(const Plan& plan, int rank, int world_size, ExecOptions options = {});
  /// Rank and world size from the (pipeline) group, then runs prepare_plan()
  /// and connects to the group at once, as connect() does (one allreduce:
  /// every rank must construct its executor). Stages and loss may be set after.
  Executor(const Plan& plan, std::shared_ptr<Communicator> group, ExecOptions options = {});
  /// shutdown() (errors swallowed).
  ~Executor();
  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;

  /// Registers a stage this rank owns (throws InputError for a foreign one).
  void set_stage(int stage, StageModule module);
  /// Registers this rank's stages from a list of every stage (index = stage),
  /// as split_sequential() returns; InputError unless it has num_stages entries.
  void set_stages(const std::vector<StageModule>& all);
  /// Local-only construction: builds and registers this rank's stages only,
  /// each by `factory(stage)` under torch's default generator seeded from
  /// (seed, stage) (build_stage() in pipeplan/exec/build.h), so a stage gets
  /// the same weights whichever rank builds it, and the same as
  /// build_stages(factory, num_stages, seed) builds in one process.
  void set_stages(const StageFactory& factory, std::uint64_t seed);
  /// Sets the loss; required on the rank holding the last stage.
  void set_loss(LossFn loss);
  /// Attaches the group and checks (one allreduce) that every rank runs the
  /// same plan and options. Throws InputError on a mismatch, CommError on a
  /// dead or missing peer.
  void connect(std::shared_ptr<Communicator> comm);
  /// Attaches an observer (its set_up() runs now). Observers run in the order added.
  void add_observer(std::shared_ptr<Observer> observer);
  /// Detaches an observer added before.
  void remove_observer(const std::shared_ptr<Observer>& observer);
  /// Runs `handler` for every UNSHARD, RESHARD or REDUCE_GRAD action (`type`);
  /// InputError for another type. An empty handler removes it.
  void set_handler(ActionType type, PassThroughHandler handler);
  /// Training (default) or evaluation mode of every local module stage.
  void train(bool on = true);
  void eval() { train(false); }

  /// One training step, torch-style: the rank(s) whose stages consume inputs
  /// pass them (`step({x})`), the rank holding the last stage passes the
  /// targets (`step({}, {y}, &losses)`), others call `step()`. Every tensor
  /// input and target is split along dim 0 into num_microbatches (InputError
  /// when the batch does not divide); the program is replayed, every operation
  /// waited, and each stage's gradient (mean or sum over microbatches, see
  /// LossReduction) is added to its parameters' .grad as soon as its last
  /// backward ran. Returns the step loss on the rank holding the last stage
  /// (every rank with loss_on_every_rank), nullopt elsewhere; `losses`, when
  /// given, receives the per-microbatch losses there. After a throw the
  /// executor refuses further steps (peers are left mid-step).
  std::optional<double> step(const Values& inputs = {}, const Values& targets = {},
                             std::vector<at::Tensor>* losses = nullptr);
  /// A training step returning everything (loss, per-microbatch losses).
  StepResult run_step(const Values& inputs = {}, const Values& targets = {});
  /// A forward-only (evaluation) step: only the F / SEND_F / RECV_F actions of
  /// the plan, in its order, without autograd (no graph kept, gradients
  /// untouched). The loss is computed when one is set and targets are given.
  /// A plan without backward actions is always run this way, also by step().
  StepResult forward_only(const Values& inputs = {}, const Values& targets = {});
  /// Leaves the group together: waits (bounded by the timeout) until every
  /// rank reached shutdown(), so no rank closes its connections while a peer
  /// still reads. Skipped when the last step threw (peers may be mid-step).
  /// Idempotent.
  void shutdown();
  /// Throws InputError naming the first local stage and parameter that
  /// received no gradient in the last training step (unused_parameters
  /// excepted); returns when all did, or before any training step.
  void check_gradients() const;
  /// Whether the plan has no backward actions (every step is forward-only).
  bool forward_only_plan() const;

  /// The plan being run (lowered when a compute-only one was given).
  const Plan& plan() const;
  int rank() const;
  /// Stages this rank owns, ascending.
  const std::vector<int>& local_stages() const;
  /// The trainable parameters of this rank's stages, each tensor once (a
  /// parameter two local stages share, counted once): what the optimizer
  /// of this rank takes. The copies of a tie on different stages are
  /// different tensors and all listed.
  std::vector<at::Tensor> local_parameters() const;
  /// local_parameters() with names, in the same order: each with its stage
  /// and its name there (StageModule::parameter_names: the module's dotted
  /// names, which split_sequential() and sequential_stages() keep as the whole
  /// model's, so they match its named_parameters(); "#i" for a hand-written
  /// stage that names none). qualified() ("3.layers.0.weight") is unique.
  std::vector<NamedParameter> named_parameters() const;
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
                       const std::vector<InputRoute>& input_stages, const Values& inputs,
                       const Values& targets);

}  // namespace pipeplan::exec
