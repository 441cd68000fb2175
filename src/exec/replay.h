// Executor internals: the replay loop, the state one rank keeps while it
// runs its program. Built on the layers below it: the communicator
// (pipeplan/exec/comm.h), boundary values and shapes in flight
// (transfers.h), the stage adapters (stages.h) and the hooks (hooks.h);
// recording is an observer (trace.cc). Split by job: executor.cc (setup,
// the step, its cells: actions and BATCH_P2P groups), actions.cc (what each action does to a microbatch), batch.cc
// (routing and slicing user values, merging outputs). Not installed.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "exec/boundary.h"
#include "exec/hooks.h"
#include "exec/memory.h"
#include "exec/stages.h"
#include "exec/ties.h"
#include "exec/transfers.h"
#include "pipeplan/exec/executor.h"

namespace pipeplan::exec {

namespace detail {

// What a (local stage, microbatch) still holds between its actions.
struct Slot {
  bool forward_done = false, input_grad_done = false, weight_grad_done = false;
  std::vector<at::Tensor> leaves;        // differentiable boundary inputs (I/B targets)
  std::vector<int> leaf_pos;             // their positions among the boundary values
  Values outputs;                        // forward outputs, until sent and differentiated
  at::Tensor loss;                       // last stage only
  std::vector<at::Tensor> roots, seeds;  // backward roots and their gradients (kept for W)
  std::vector<at::Tensor> in_grads;      // gradients for `leaves`, until shipped upstream
  bool in_grads_ready = false;
  // Memory actions (memory_actions.cc).
  bool delivered = false;               // outputs sent or handed to the next stage
  Values kept_in;                       // recomputed: the forward's inputs, until RECOMPUTE
  std::shared_ptr<RngState> rng;        // recomputed: the RNG state the forward began from
  std::shared_ptr<SavedTensors> saved;  // offloaded: what autograd saved, until RELOAD
  bool offloaded = false;
};

}  // namespace detail

struct Executor::Impl {
  // The plan and this rank's place in it (fixed at construction).
  Plan plan;
  int rank;
  int world;
  ExecOptions opt;
  int num_stages, num_mb;
  bool plan_forward_only = false;
  std::vector<Action> fwd_program;       // forward projection of plan.ranks[rank]
  int training_steps = 0;                // training steps completed
  bool fwd_program_proved = false;       // the projection of every rank verified
  std::vector<std::vector<int>> routes;  // per user input, its stages
  std::vector<int> local_inputs;         // inputs some local stage consumes
  std::vector<bool> replicated;          // per user input: handed whole to every microbatch
  std::int64_t step_batch = -1;    // this step's batch (sliced inputs, targets); -1: none here
  std::string step_batch_what;     // which value gave it
  std::int64_t agreed_batch = -1;  // the batch all ranks agreed on (check_batch)

  // The layers below the loop.
  std::shared_ptr<Communicator> comm;
  detail::Transfers transfers;
  detail::LocalStages stages;
  detail::Ties ties;
  std::vector<int> ready_after_ties;  // local stages whose grads-ready waits for the tie sums
  detail::Hooks hooks;
  detail::MemoryPlan memory;    // which microbatches the memory actions touch
  std::int64_t last_moved = 0;  // bytes of the last OFFLOAD/RELOAD (for observers)

  // Lifetime.
  bool broken = false, closed = false;
  bool last_step_failed = false;  // any error left the last step: peers may be mid-step
  int step_index = 0;

  // Per step.
  bool fwd_step = false;
  std::vector<std::vector<detail::Slot>> slots;  // [local index][microbatch]
  std::vector<std::vector<Values>> owned;        // [local index][microbatch]: routed inputs
  std::vector<Values> mb_targets;
  bool have_targets = false;
  std::vector<at::Tensor> losses;
  std::vector<Values> final_outputs;  // forward-only, last stage: per microbatch

  Impl(const Plan& p, int r, int w, ExecOptions o);

  std::string me() const { return "rank " + std::to_string(rank) + ": "; }
  /// An error's message without a leading me().
  std::string unprefixed(const std::exception& e) const;
  bool on_me(int stage) const { return stages.owns(stage); }
  int last() const { return num_stages - 1; }
  bool holds_last() const { return on_me(last()); }
  std::chrono::milliseconds timeout() const { return opt.timeout; }
  std::string name(ActionType t, int stage, int mb) const { return to_string(make(t, stage, mb)); }
  detail::Slot& slot(int stage, int mb);

  // executor.cc
  void connect(std::shared_ptr<Communicator> c);
  void check_ready(bool training) const;
  void prove_forward_projection();
  StepResult run(const Values& inputs, const Values& targets, bool forward_only);
  StepResult run_step(const Values& inputs, const Values& targets, bool forward_only);
  void check_batch();
  void begin_step();
  void finish_step();
  StepResult step_result();
  void run_program(const std::vector<Action>& program);
  void run_observed(const std::vector<Action>& program, std::size_t i);
  /// An action the hooks watch: its event, and Transfers::waited() at its start.
  struct Watched {
    ActionEvent event;
    Clock::duration waited_before{};
  };
  Watched enter(const std::vector<Action>& program, std::size_t i);
  void ran(Watched& w);
  void leave(Watched& w);
  void run_group(const std::vector<Action>& program, std::size_t first, std::size_t n);
  template <class F>
  void in_context(const std::string& where, F&& body);
  void run_in_context(const Action& a);

  // batch.cc
  void split_batch(const Values& inputs, const Values& targets);
  Values merged_outputs() const;

  // actions.cc
  void run_action(const Action& a);
  void forward(int stage, int mb);
  Values run_forward(int stage, int mb, const Values& in, detail::Slot& sl, bool graph);
  void check_forward_graph(int stage, const detail::Slot& sl, const Values& out);
  Values forward_inputs(int stage, int mb, detail::Slot& sl);
  void backward(int stage, int mb, bool full);
  void seed_backward(int stage, int mb, detail::Slot& sl);
  void weight(int stage, int mb);
  void send_forward(int stage, int mb);
  void send_backward(int stage, int mb);
  void pass_through(const Action& a);
  void weight_grads_done(int stage);
  void check_input_grads(int stage, int mb, const detail::Slot& sl,
                         const std::vector<at::Tensor>& grads) const;

  // memory_actions.cc
  at::Device device() const;
  bool keeps_only_input(int stage, int mb, detail::Slot& sl, const Values& in);
  std::shared_ptr<detail::SavedTensors> saved_tensors_of(int stage, int mb, detail::Slot& sl);
  void recompute(int stage, int mb);
  void offload(int stage, int mb);
  void reload(int stage, int mb);
  void memory_ready(int stage, int mb);
  void delivered(detail::Slot& sl, int stage, int mb);
  static std::vector<at::Tensor*> held_for_backward(detail::Slot& sl);
  static Values on_host(Values values);
};

}  // namespace pipeplan::exec
