// Measured runs on the executor: a Tracer is an Observer (hooks.h) that
// records every action of every step on this rank, and a view of the
// communicator that times every post and wait and warns while a wait for a
// peer lasts too long. Rank 0 gathers the ranks' records onto one clock as a
// Trace (pipeplan/trace.h), which the core writes, draws and calibrates.
//
// @code
//   auto tracer = std::make_shared<pipeplan::exec::Tracer>();
//   auto group = tracer->wrap(comm);        // collective: clock offsets
//   pipeplan::exec::Executor ex(plan, group, options);
//   ex.add_observer(tracer);
//   for (int k = 0; k < steps; ++k) ex.step(inputs, targets);
//   ex.shutdown();
//   if (auto trace = tracer->gather("my run", timeout))  // rank 0 only
//     pipeplan::write_trace_chrome(*trace, file);
// @endcode
//
// Nothing of this runs unless a Tracer is attached: the executor reads no
// clock and builds no event without an observer.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/hooks.h"
#include "pipeplan/trace.h"

namespace pipeplan::exec {

/// Compute times taken on the device instead of the host. With CUDA a
/// compute action only launches work, so the host's clock says when it was
/// launched; an event recorded on the current stream before and after it
/// says when it ran. The tracer marks every compute and, once the step
/// ended, asks for the marks on the host clock.
class DeviceClock {
 public:
  virtual ~DeviceClock() = default;
  /// Before a step's first action, at host time `host_ms` (ms of the
  /// executor's clock).
  virtual void begin_step(double host_ms) = 0;
  /// Marks the start (`end` false) or the end of compute `index` at the
  /// current point of the device's work.
  virtual void mark(std::size_t index, bool end) = 0;
  /// After the step's work finished: every mark as host-clock ms, in the
  /// order marked.
  virtual std::vector<double> resolve() = 0;
};

/// CUDA events on the current stream of cuda:`device_index`, anchored to the
/// host clock at each step's start. Null in a build without CUDA (the
/// LibTorch of this repository's CI is CPU-only: this path is compiled only
/// where CUDA exists and has not been run on a GPU, see docs/tracing.md).
std::shared_ptr<DeviceClock> cuda_device_clock(int device_index);

struct TracerOptions {
  /// Keep one record per action of every step (records(), gather()); off, the
  /// tracer only logs step times and stuck waits.
  bool record = true;
  /// Warn (spdlog) while one wait for a peer lasts longer than this, naming
  /// the action and the peer ("rank 1 waiting 5.0 s at 1RECV_B5 for rank
  /// 2"), and again every time it lasts that long once more. Zero: never.
  std::chrono::milliseconds warn_after{5000};
  /// Where warnings go (tests capture them); default: spdlog::warn.
  std::function<void(const std::string&)> warn;
  /// Compute times from the device (cuda_device_clock()); null: the host's.
  std::shared_ptr<DeviceClock> device_clock;
  /// With `record`: record the bytes the rank holds on its compute device over each step
  /// (TraceRecord::held and peak), from LibTorch's allocator reports for
  /// the step thread (and the autograd threads it starts), counted from the
  /// step's start: what the step allocated and has not freed yet. The device
  /// is the wrapped group's (CPU with Gloo). While a step runs this takes the
  /// slot torch's profiler reports memory through, passing every report on.
  bool measure_memory = true;
};

class Tracer : public Observer {
 public:
  explicit Tracer(TracerOptions options = {});
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// `comm` as the tracer sees it: every isend/irecv/allreduce is timed and
  /// every wait watched. Hand the result to the Executor. Collective over
  /// `comm` (every rank calls it, before the executor communicates): it
  /// estimates this rank's clock offset to rank 0, which is zero when every
  /// rank runs on one host (one monotonic clock).
  std::shared_ptr<Communicator> wrap(std::shared_ptr<Communicator> comm);
  /// Milliseconds added to this rank's clock to put it on rank 0's.
  double clock_offset_ms() const;
  /// This rank's records of the steps finished so far (ms on the common
  /// clock, not yet rebased). Forward-only steps of a training plan run a
  /// different program and are not recorded.
  std::vector<TraceRecord> records() const;
  /// Collective over the wrapped group, after the last step: rank 0 returns
  /// every rank's records as one Trace (times from its first record), the
  /// other ranks nullopt. Throws CommError when a rank does not take part.
  std::optional<Trace> gather(const std::string& source, std::chrono::milliseconds timeout);

  void set_up(const Plan& plan, int rank) override;
  void on_step_begin(int step, bool forward_only) override;
  void on_entry(const ActionEvent& event) override;
  void on_exit(const ActionEvent& event) override;
  void on_step_end(int step, bool forward_only) override;

  struct State;  ///< shared with the wrapped communicator and its operations

 private:
  std::shared_ptr<State> state_;
};

/// Level of the executor's log from the environment variable
/// PIPEPLAN_LOG_LEVEL (trace, debug, info, warn, error, off), else `fallback`.
/// Applies it to spdlog's default logger and returns the name applied.
std::string configure_logging(const std::string& fallback);

}  // namespace pipeplan::exec
