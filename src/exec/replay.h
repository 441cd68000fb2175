// Executor internals: the state one rank keeps while replaying its program.
// Split by job: executor.cc (setup, steps, gradients, hooks), actions.cc
// (what each action does, boundary transfers and shape headers), groups.cc
// (BATCH_P2P groups: posted as one batch, then waited), batch.cc (routing
// and slicing user values, merging outputs). Not installed.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "exec/boundary.h"
#include "pipeplan/exec/executor.h"

namespace pipeplan::exec {

namespace detail {

// What a (local stage, microbatch) still holds between its actions.
struct Slot {
  bool forward_done = false, input_grad_done = false, weight_grad_done = false;
  std::vector<at::Tensor> leaves;        // differentiable boundary inputs (I/B targets)
  Values outputs;                        // forward outputs, until sent and differentiated
  at::Tensor loss;                       // last stage only
  std::vector<at::Tensor> roots, seeds;  // backward roots and their gradients (kept for W)
  std::vector<at::Tensor> in_grads;      // gradients for `leaves`, until shipped upstream
  bool in_grads_ready = false;
};

struct PostedRecv {
  std::unique_ptr<PendingOp> op;  // null for a boundary without values or a deferred post
  at::Tensor message;
  BoundarySpec spec;
  bool deferred = false;  // spec unknown when posted: post at the consumer (Gloo only)
  int peer = -1, tag = -1;
  std::string what;
};

struct PostedSend {
  std::unique_ptr<PendingOp> op;
  std::string what;
};

// A tensor requiring grad that the graph behind `roots` reaches but that is
// neither among `known` nor a leaf of it; undefined when there is none.
at::Tensor unlisted_trainable(const std::vector<at::Tensor>& roots,
                              const std::vector<at::Tensor>& known);

}  // namespace detail

struct Executor::Impl {
  Plan plan;
  int rank;
  int world;
  ExecOptions opt;
  int num_stages, num_mb;
  std::vector<int> local;        // ascending
  std::vector<int> local_index;  // stage -> index into `local`, or -1
  std::vector<std::optional<StageModule>> modules;
  std::vector<std::vector<at::Tensor>> trainable;  // [local index]: parameters requiring grad
  std::vector<bool> params_checked;                // [local index]: coverage walk done
  LossFn loss_fn;
  std::shared_ptr<Communicator> comm;
  bool plan_forward_only = false;
  std::vector<Action> fwd_program;       // forward projection of plan.ranks[rank]
  bool fwd_program_proved = false;       // the projection of every rank verified
  std::vector<std::vector<int>> routes;  // per user input, its stages
  std::vector<int> local_inputs;         // inputs some local stage consumes

  // Boundary shapes: spec of stage s's outputs; `given` from output_specs;
  // `learned` once a header crossed (both ends agree on when that is).
  std::vector<std::optional<BoundarySpec>> specs;
  std::vector<bool> given, learned;
  std::vector<bool> header_sent, header_received;      // this step, per stage
  std::vector<std::unique_ptr<PendingOp>> header_ops;  // deferred header receives, per stage
  std::vector<at::Tensor> header_msgs;

  bool broken = false, closed = false;
  bool last_step_failed = false;  // any error left the last step: peers may be mid-step
  int step_index = 0;

  // Hooks.
  std::vector<std::shared_ptr<Observer>> observers;
  std::array<PassThroughHandler, 3> handlers;  // UNSHARD, RESHARD, REDUCE_GRAD
  std::int64_t last_bytes = 0;

  // Per step.
  bool fwd_step = false;
  std::vector<std::vector<detail::Slot>> slots;  // [local index][microbatch]
  std::vector<std::vector<Values>> owned;        // [local index][microbatch]: routed inputs
  std::vector<Values> mb_targets;
  bool have_targets = false;
  std::map<std::tuple<int, int, int>, detail::PostedRecv> recvs;             // (dir, stage, mb)
  std::map<std::pair<int, int>, std::vector<detail::PostedSend>> fwd_sends;  // (stage, mb)
  std::vector<detail::PostedSend> other_sends;
  std::vector<std::vector<at::Tensor>> grad_sums;  // [local index][trainable]
  std::vector<int> backward_left;                  // [local index]: weight grads to come
  std::vector<at::Tensor> losses;
  std::vector<Values> final_outputs;  // forward-only, last stage: per microbatch

  Impl(const Plan& p, int r, int w, ExecOptions o);

  std::string me() const { return "rank " + std::to_string(rank) + ": "; }
  bool on_me(int stage) const { return plan.meta.rank_of(stage) == rank; }
  int last() const { return num_stages - 1; }
  bool holds_last() const { return on_me(last()); }
  std::chrono::milliseconds timeout() const { return opt.timeout; }
  int tag(detail::Dir dir, int stage, int mb, int index) const {
    return detail::make_tag(step_index, dir, stage, mb, index, num_stages, num_mb);
  }
  std::string name(ActionType t, int stage, int mb) const { return to_string(make(t, stage, mb)); }
  detail::Slot& slot(int stage, int mb);
  bool header_due(int stage) const {
    return !given[stage] && (!learned[stage] || opt.reexchange_shapes);
  }

  // executor.cc
  void connect(std::shared_ptr<Communicator> c);
  void check_ready(bool training) const;
  void prove_forward_projection();
  StepResult run(const Values& inputs, const Values& targets, bool forward_only);
  StepResult run_step(const Values& inputs, const Values& targets, bool forward_only);
  void run_program(const std::vector<Action>& program);
  void run_observed(const std::vector<Action>& program, std::size_t i);
  void finish_stage(int li);

  // groups.cc
  void run_group(const std::vector<Action>& program, std::size_t first, std::size_t n);
  void exchange_group_headers(const Action* members, std::size_t n);
  void await_group(const Action* members, std::size_t n, std::size_t other_sends_before);

  // batch.cc
  void split_batch(const Values& inputs, const Values& targets);
  Values merged_outputs() const;

  // actions.cc
  void run_action(const Action& a);
  void forward(int stage, int mb);
  void backward(int stage, int mb, bool full);
  void weight(int stage, int mb);
  void post_recv(detail::Dir dir, int stage, int mb);
  void post_header(int from_stage);
  void await_recv(detail::PostedRecv& r, detail::Dir dir, int stage);
  Values complete_recv(detail::Dir dir, int stage, int mb);
  void send_header(int stage, int mb);
  void send_forward(int stage, int mb);
  void send_backward(int stage, int mb);
  void release_forward_sends(int stage, int mb);
  void pass_through(const Action& a);
  at::Tensor pack(int stage, const Values& values, const BoundarySpec& spec) const;
  void await_header(int from_stage);
  void accumulate(int li, const std::vector<at::Tensor>& grads, std::size_t offset);
  std::vector<at::Tensor> differentiate(const detail::Slot& sl,
                                        const std::vector<at::Tensor>& targets, bool keep_graph);
  void weight_grads_done(int stage);
};

}  // namespace pipeplan::exec
