// Hang replay (`pipeplan diagnose`): where did a stuck run stop? From the
// per-rank Flight Recorder dumps torch writes, or from pipeplan's own trace,
// name per rank the last completed and the first unmatched action of the
// plan, and the wait-for chain across ranks (a cycle, or the rank it ends at).
//
// @code
//   std::vector<FlightRecorderDump> dumps;
//   for (auto& [name, bytes] : files) dumps.push_back(read_flight_recorder(bytes, name));
//   HangReport r = diagnose_flight_recorder(plan, dumps);
//   write_hang_report_text(r, std::cout);  // r.completed: the run finished
// @endcode
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/trace.h"

namespace pipeplan {

/// A process group of a dump's pg_config: its name, description and its
/// members' global ranks (sorted; a group rank indexes this list).
struct FrGroup {
  std::string name, desc;
  std::vector<int> ranks;
};

/// One entry of a Flight Recorder dump, the fields the diagnosis reads.
struct FrEntry {
  std::int64_t record_id = 0;
  std::string pg_name;         ///< process_group[0], a key of pg_config
  std::string profiling_name;  ///< "nccl:send 0->1", "gloo:recv 1<-0", "gloo:all_reduce"
  std::string op;              ///< after the backend: "send", "recv", "all_reduce", ...
  /// send/recv: group ranks of the sender and receiver (-1: unknown, "?").
  int src = -1, dst = -1;
  std::int64_t collective_seq_id = 0, p2p_seq_id = 0, op_id = 0, time_created_ns = 0;
  std::string state;  ///< "scheduled", "started" or "completed"

  bool is_p2p() const { return op == "send" || op == "recv"; }
};

/// One rank's dump (torch.distributed.flight_recorder's format).
struct FlightRecorderDump {
  std::string source;   ///< file name, for messages
  std::string version;  ///< the dump's "version", e.g. "2.10"
  std::vector<FrGroup> groups;
  std::vector<FrEntry> entries;  ///< in record order
};

/// Reads one pickled dump (what torch._C._distributed_c10d._dump_fr_trace
/// returns and TORCH_FR_DUMP_TEMP_FILE<rank> holds). Throws InputError
/// "<source>: ..." for bytes that are not a pickle, a truncated one, or a
/// dict without the fields of a dump.
FlightRecorderDump read_flight_recorder(std::string_view bytes, const std::string& source);

/// An action of a rank's program in one step of the run.
struct StepAction {
  int step = 1;   ///< from 1
  int index = 0;  ///< in plan.ranks[r]
  Action action;
};

/// What one rank's record says about it.
struct RankDiagnosis {
  enum class Status : std::uint8_t {
    Finished,  ///< every action of the steps it began completed
    Waiting,   ///< posted its first unmatched action; waits for `waits_for`
    Stopped,   ///< stopped before reaching its first unmatched action
    NoRecord,  ///< no dump (or no record) of this rank
  };
  int rank = 0;
  Status status = Status::NoRecord;
  std::string record;  ///< the dump or trace it was read from
  int steps_done = 0;  ///< steps whose every observed action completed
  std::optional<StepAction> last_completed;
  std::optional<StepAction> first_unmatched;
  std::optional<int> waits_for;  ///< the peer of a Waiting rank's first unmatched action
  std::string why;               ///< one sentence: what it waits for, or why not
};

/// The diagnosis of a run.
struct HangReport {
  std::string kind;  ///< "flight-recorder" or "trace"
  /// The plan's actions the records show: "SEND/RECV" (a dump sees only
  /// communication) or "all".
  std::string observed;
  bool completed = false;            ///< every rank finished the same number of steps
  std::vector<RankDiagnosis> ranks;  ///< one per plan rank, ascending
  /// The wait-for chain from the first waiting rank, and whether it closes
  /// on itself: ranks in order; when `cycle`, the last rank waits for the
  /// first of the loop (`cycle_start`).
  std::vector<int> chain;
  bool cycle = false;
  std::size_t cycle_start = 0;
  std::string summary;             ///< one line: "completed: ..." or "hang: ..."
  std::vector<std::string> notes;  ///< how completion was judged, dropped entries
};

/// Matches every rank's P2P entries, in order, to its plan's SEND/RECV
/// actions in list order (a run of several steps repeats them; group
/// members count one each), and diagnoses. An entry is completed when its
/// state says so; a dump whose backend reports no completion (no entry
/// "started" or "completed", e.g. Gloo seen through c10d's
/// FlightRecorderHook) counts an entry completed once its partner is in the
/// peer's dump. Throws InputError for a dump of another rank count, two
/// dumps of one rank, a rank outside the plan, or a dump that differs from
/// the plan (naming the first differing op).
/// `plan` has its SEND/RECV (lowered); one holding only some ranks is refused
/// (InputError).
HangReport diagnose_flight_recorder(const Plan& plan, const std::vector<FlightRecorderDump>& dumps);

/// The same diagnosis from pipeplan's own trace of the run (its last step):
/// an action with a record completed; a SEND/RECV without one was posted
/// when every compute before it has a record. Throws InputError when the
/// trace's plan is not `plan`.
HangReport diagnose_trace(const Plan& plan, const Trace& trace, const std::string& source);

/// The report as text: one block per rank, the chain, the summary.
void write_hang_report_text(const HangReport& report, std::ostream& out);
/// The report as JSON ({"format": "pipeplan.diagnosis", "version": 1, ...}).
void write_hang_report_json(const HangReport& report, std::ostream& out);

}  // namespace pipeplan
