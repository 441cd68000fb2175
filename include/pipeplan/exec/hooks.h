// Executor hooks: observers called around every action of a rank's program,
// when a stage's gradients are complete, and handlers for the FSDP-style
// pass-through actions. Tracing, logging and data-parallel gradient averaging
// are observers; the replay loop knows nothing about them.
//
// @code
//   struct Printer : pipeplan::exec::Observer {
//     void on_exit(const pipeplan::exec::ActionEvent& e) override {
//       using us = std::chrono::duration<double, std::micro>;
//       std::cerr << pipeplan::to_string(e.action) << " took " << us(e.end - e.start).count()
//                 << " us, " << us(e.wait).count() << " of them waiting for peers\n";
//     }
//   };
//   executor.add_observer(std::make_shared<Printer>());
// @endcode
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "pipeplan/ir.h"

namespace pipeplan::exec {

/// The executor's clock (monotonic).
using Clock = std::chrono::steady_clock;

/// One action of this rank's program as it runs.
struct ActionEvent {
  Action action;              ///< as written in the plan
  int rank = 0;               ///< this process's rank in the pipeline group
  int step = 0;               ///< step number, from 0 (forward-only steps count too)
  std::size_t index = 0;      ///< position in the rank's program
  bool forward_only = false;  ///< part of a forward-only (eval) step
  Clock::time_point start;    ///< when the executor began the action
  Clock::time_point end;      ///< when it finished (on_exit only; start in on_entry)
  /// How long, between start and end, the executor was blocked on peers
  /// (on_exit only; zero in on_entry): the waits for boundary transfers to
  /// complete. A RECV only posts; its consumer waits for it: an F for its
  /// RECV_F (and that boundary's shape header), a B or I for its RECV_B and
  /// then for its microbatch's SEND_Fs still in flight (OVERLAP_F_B both). A
  /// RECV_F on NCCL waits for its boundary's shape header. The last member
  /// of a BATCH_P2P group waits for the whole group (its receives in, its
  /// sends delivered): that member's on_exit comes once the group ended.
  /// Waits outside every action are in no event: the sends completed at
  /// the end of a step, shared-parameter sums, the step-loss sum,
  /// data-parallel averaging (an observer's own work), the shape headers
  /// NCCL exchanges before a group; nor is communication done by a
  /// pass-through handler or an observer. Measured only while an observer
  /// is attached.
  Clock::duration wait{};
  /// SEND_F/SEND_B/RECV_F/RECV_B: bytes of the message's payload (0 when the
  /// boundary carries no values). Zero for every other action.
  std::int64_t bytes = 0;

  /// The action's own work, end - start - wait (on_exit only): a compute's
  /// forward or backward; a SEND/RECV's posting (packing, isend/irecv;
  /// TraceRecord::post); a pass-through action's handler. The Tracer's
  /// compute slices and posts use this measure.
  Clock::duration compute() const { return end - start - wait; }
};

/// Receives the executor's events. Every method has an empty default; the
/// executor calls them on the thread that runs step(), in program order.
/// With no observer attached no clock is read and no event is built.
/// An exception thrown by an observer fails the step like any other error.
class Observer {
 public:
  virtual ~Observer() = default;
  /// Once, when attached: the (lowered) plan and this rank.
  virtual void set_up(const Plan& /*plan*/, int /*rank*/) {}
  /// Before the first action of a step.
  virtual void on_step_begin(int /*step*/, bool /*forward_only*/) {}
  /// Before an action runs (`end` equals `start`).
  virtual void on_entry(const ActionEvent& /*event*/) {}
  /// After an action ran.
  virtual void on_exit(const ActionEvent& /*event*/) {}
  /// After the last B or W of local stage `stage` in a training step: the
  /// stage's gradients of this step are now added to each parameter's .grad.
  /// `parameters` are the stage's trainable parameters. Fires before the
  /// on_exit of that action, so work started here overlaps later actions;
  /// for a stage holding a copy of a tied parameter (ExecOptions::ties), at
  /// the end of the step once the tie's gradients are summed.
  virtual void on_stage_grads_ready(int /*stage*/, const std::vector<at::Tensor>& /*parameters*/) {}
  /// After every action ran and every send completed, before step() returns.
  virtual void on_step_end(int /*step*/, bool /*forward_only*/) {}
};

/// Context of an UNSHARD / RESHARD / REDUCE_GRAD action handed to its handler.
struct PassThrough {
  Action action;  ///< the action (type and stage)
  int rank = 0;
  int step = 0;
  /// Trainable parameters of the action's stage when this rank owns it
  /// (empty otherwise): what a sharding handler gathers, frees or reduces.
  std::vector<at::Tensor> parameters;
};

/// Runs an UNSHARD, RESHARD or REDUCE_GRAD action (FSDP-style sharding). Without
/// a handler these actions do nothing (nothing is sharded).
using PassThroughHandler = std::function<void(const PassThrough& context)>;

}  // namespace pipeplan::exec
