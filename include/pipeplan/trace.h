// Measured runs: what every rank did in every step, on one clock, and the
// cost model derived from it (`pipeplan calibrate`). The executor records a
// Trace; the core reads, checks, draws and calibrates it without torch.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"
#include "pipeplan/timeline.h"

namespace pipeplan {

/// One action of one rank in one step, as it ran. Times are milliseconds on
/// the run's common clock (every rank's clock shifted onto rank 0's).
struct TraceRecord {
  int step = 1;  ///< step number, from 1
  int rank = 0;
  int index = 0;  ///< position in the rank's program (plan.ranks[rank][index])
  Action action;
  /// Compute: the run interval. SEND/RECV: from the post to the completion
  /// (the moment the executor saw it complete). Pass-through: its handler.
  double start = 0.0, end = 0.0;
  double wait = 0.0;       ///< SEND/RECV: how long the host blocked on it
  std::int64_t bytes = 0;  ///< SEND/RECV: payload bytes
  /// SEND/RECV: host time spent posting it (packing, isend/irecv). On a CPU
  /// rank the host is the compute stream, so this delays the next compute.
  double post = 0.0;
  /// Bytes the rank held on its compute device when the action ended, and
  /// the most it held while the action ran, counted from the step's start
  /// (what the step allocated and has not freed); -1 when not measured.
  std::int64_t held = -1, peak = -1;

  friend bool operator==(const TraceRecord& a, const TraceRecord& b) {
    return a.step == b.step && a.rank == b.rank && a.index == b.index && a.action == b.action &&
           a.start == b.start && a.end == b.end && a.wait == b.wait && a.bytes == b.bytes &&
           a.post == b.post && a.held == b.held && a.peak == b.peak;
  }
};

/// A measured run: the whole lowered plan every rank replayed, and one record
/// per (step, rank, action), ordered by step, rank and index.
struct Trace {
  Plan plan;
  std::string source;  ///< how the run was made, free text (e.g. the command line)
  std::vector<TraceRecord> records;

  /// Highest step number recorded (0 when empty).
  int num_steps() const;
};

/// Format name and version of the JSON table of records.
inline constexpr const char* kTraceFormatName = "pipeplan.trace";
inline constexpr int kTraceFormatVersion = 1;

/// {"format":"pipeplan.trace","version":1,"time_unit":"ms","source":..,
/// "plan":{plan document},"columns":[..],"records":[[step,rank,index,
/// "2F5",start,end,wait,bytes,post],..]}; one record per line.
void write_trace_json(const Trace& trace, std::ostream& out);
/// A Chrome trace (Perfetto) of every step in `pipeplan render
/// --chrome-trace`'s layout (one track per rank, "X" slices named "2F5" with
/// args.step, flows for transfers), with write_trace_json's table embedded as
/// the top-level member "pipeplan", so calibrate reads the same file.
void write_trace_chrome(const Trace& trace, std::ostream& out);
/// Reads write_trace_json's document, or a write_trace_chrome file. Throws InputError "<source>: ..."
/// naming the field or record.
Trace parse_trace_json(std::string_view text, const std::string& source = "<trace>");

/// What is wrong with a trace, one message per problem (empty: consistent):
/// every step holds every action of the plan exactly once, at its index;
/// times are finite with start <= end; a rank's computes start in program
/// order without overlapping, and so do its posts (a post may overlap the
/// compute before it); every compute starts after the
/// computes it depends on ended (also across ranks), and every RECV
/// completes after its SEND was posted. At most `max_problems` messages.
std::vector<std::string> check_trace(const Trace& trace, std::size_t max_problems = 20);

/// The timeline of step `step` (from 1) of a consistent trace: the same type
/// simulate() returns, so the SVG, Chrome-trace and text renderers draw it.
/// With `rebase` the step starts at time 0; otherwise times stay on the
/// run's clock with 0 at the trace's first record. Transfers pair each SEND
/// with its RECV: from the later of the two posts to the RECV's completion.
Timeline step_timeline(const Trace& trace, int step, bool rebase = true);

/// Every step on the run's clock (0 = the trace's first record), for a
/// multi-step Chrome trace (render.h).
std::vector<Timeline> trace_timelines(const Trace& trace);

/// Costs measured from a trace (`pipeplan calibrate`).
struct Calibration {
  int pp_degree = 1, stages_per_rank = 1, num_microbatches = 1;
  std::string schedule;
  int steps_used = 0;  ///< steps the medians came from (the first is dropped)
  /// Per stage: median F, B, I, W durations in ms. A type the run did not
  /// execute is derived (B = I + W; I = W = B / 2) and listed in `derived`.
  std::map<int, StageScale> stage_ms;
  std::map<int, std::string> derived;  ///< stage -> e.g. "I,W" (derived types)
  /// stage -> the types neither measured nor derivable ("B,I,W" for a run
  /// with only forwards): 0 in stage_ms, absent from the written file.
  std::map<int, std::string> unmeasured;
  std::map<int, int> samples;          ///< stage -> compute actions measured
  /// Per stage: the median host time of the posts charged to its computes
  /// (included in stage_ms), and the durations without it.
  std::map<int, double> host_overhead_ms;
  std::map<int, StageScale> compute_only_ms;
  double comm_latency_ms = 0.0;   ///< per transfer
  double comm_bandwidth = 0.0;    ///< bytes per ms; 0 = not resolved (latency only)
  double transfer_bytes = 0.0;    ///< median payload of a transfer
  int transfers_used = 0;         ///< transfers whose receiver waited for the data
  double measured_step_ms = 0.0;  ///< median step time over the steps used
};

/// Medians over microbatches and steps (the first step dropped when there is
/// more than one), per stage and action type; the transfer cost from the
/// transfers whose receiver was already waiting when the data was sent (so
/// the RECV's completion is the arrival): latency + bytes / bandwidth fitted
/// by least squares over payload sizes, or the median time as pure latency
/// when every payload has about the same size. Throws InputError for an
/// inconsistent trace (check_trace) or one without computes.
Calibration calibrate(const Trace& trace);

/// The stage-costs file of a calibration: JSON that `pipeplan simulate
/// --stage-costs FILE` reads as absolute milliseconds (docs/simulator.md).
void write_calibration_json(const Calibration& c, std::ostream& out);

}  // namespace pipeplan
