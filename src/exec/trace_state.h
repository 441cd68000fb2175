// Executor internals: what a Tracer shares with its view of the
// communicator. The step thread updates the records; the watchdog thread
// only reads the current wait, under `mu`. Not installed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "exec/memory_meter.h"
#include "pipeplan/exec/trace.h"

namespace pipeplan::exec {

struct Tracer::State {
  explicit State(TracerOptions o) : opt(std::move(o)) {}
  TracerOptions opt;

  // ---- the step thread
  Plan plan;                            // this rank's program (rank_ids = {rank})
  Plan whole;                           // every rank's, for the gathered Trace
  std::shared_ptr<Communicator> group;  // the wrapped group (gather() uses it directly)
  bool have_plan = false;
  int rank = 0;
  double offset_ms = 0.0;
  int traced_steps = 0;  // steps recorded so far
  bool in_step = false;  // recording the current step
  long current = -1;     // index of the action running, -1 between actions
  double step_start_ms = 0.0;
  std::vector<TraceRecord> cur;                       // the step being recorded, by index
  std::vector<double> compute_from;                   // per index: end of the last wait inside it
  std::vector<TraceRecord> done;                      // finished steps
  std::vector<std::size_t> marked;                    // device clock: index of every mark, in order
  std::map<std::tuple<int, int, int>, long> recv_at;  // (type, stage, mb) -> RECV index
  std::shared_ptr<detail::MemoryMeter> meter;         // measure_memory, once the device is known
  std::int64_t held_at_start = 0;                     // meter->held() when the step began

  // ---- shared with the watchdog
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool waiting = false;
  std::chrono::steady_clock::time_point wait_since;
  std::string wait_label;  // "at 1RECV_B5 for rank 2"
  int warned = 0;          // warnings given for the current wait
  std::thread watchdog;

  static double ms(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t.time_since_epoch()).count();
  }
  double now_ms() const { return ms(std::chrono::steady_clock::now()) + offset_ms; }

  /// The action an operation posted now belongs to: the running SEND/RECV,
  /// or for a receive posted late by its consumer (F/B/I), that RECV.
  long owner_of_post() const;
  /// A wait on an operation of `owner` ran from `t0` to `t1` (ms, common clock).
  void waited(long owner, int step, double t0, double t1);
  /// Watchdog bookkeeping around one blocking wait.
  void begin_wait(const std::string& label);
  void end_wait();
  void start_watchdog();
  void stop_watchdog();
  std::string describe(long owner, const std::string& peer) const;
};

}  // namespace pipeplan::exec
