// The torch releases pipeplan writes schedule CSVs for, and what the pipeline
// runtime of each (torch/distributed/pipelining/schedules.py) can run: one
// table of rows, each naming the torch source it was read from. The torch
// writers (write_torch_csv, export torchtitan, to_torch_csv) take a target
// version, refuse what it cannot read and prove the plan under the transport
// its runtime posts P2P with (docs/interop.md, "torch versions").
//
// @code
//   const TorchVersion v = parse_torch_version("2.11");   // InputError on bad text
//   require_torch_runs(plan, v);        // InputError / PlanRejected (serial deadlock)
//   write_torch_csv(plan, out, v);      // emit.h: no WAIT_* cells before 2.15
// @endcode
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/transport.h"

namespace pipeplan {

/// A torch release as MAJOR.MINOR (a patch release runs its minor's runtime).
struct TorchVersion {
  int major = 2;
  int minor = 15;
  bool operator==(const TorchVersion& o) const { return major == o.major && minor == o.minor; }
  bool operator<(const TorchVersion& o) const {
    return major != o.major ? major < o.major : minor < o.minor;
  }
};
/// "2.11".
std::string to_string(TorchVersion v);

/// The torch pipeplan targets when none is named: the one the project pins
/// and its oracle tests run (scripts/oracles.txt).
inline constexpr TorchVersion kTorchDefaultVersion{2, 15};

/// What torch's pipeline runtime can run from release `since` until the next
/// row's (and beyond the last row, which is the newest release read).
struct TorchRuntimeVersion {
  TorchVersion since;
  bool overlap_f_b = false;     ///< `_Action.from_str` reads "(F;B)OVERLAP_F_B" cells
  bool unshard_reshard = true;  ///< UNSHARD / RESHARD in `_ComputationType`
  bool reduce_grad = false;     ///< REDUCE_GRAD in `_ComputationType`
  /// WAIT_SEND_F / WAIT_SEND_B / WAIT_REDUCE_GRAD exist, and a compute_comms
  /// row must retire each send and REDUCE_GRAD at its wait.
  bool send_waits = false;
  /// How `_batch_p2p` posts a SEND/RECV action's operations: serial (one
  /// `batch_isend_irecv`, NCCL's one stream per rank) or rendezvous (plain
  /// isend/irecv, one stream per rank pair).
  Transport transport = Transport::Serial;
  /// Which schedule classes refuse torch.compile'd stages with a split
  /// backward; never `_PipelineScheduleRuntime._load_csv`.
  std::string_view compile_guard;
  std::string_view provenance;  ///< what the row was read from
};

/// The rows, oldest first. Releases before the first are refused: 2.5's
/// runtime reads `B` as a backward whose kind is a schedule setting and has
/// no `I`; 2.4 has no `_load_csv`.
const std::vector<TorchRuntimeVersion>& torch_runtime_versions();

/// "2.11", "2.15.0" or "2.15.0+cu132" (torch.__version__); throws InputError
/// naming the text for anything else, and for a release older than the
/// first row.
TorchVersion parse_torch_version(std::string_view text);

/// The row `version` runs (the last one at or below it).
const TorchRuntimeVersion& torch_runtime(TorchVersion version);

/// Why torch `version` cannot read `plan`'s actions ("" when it can): the
/// first action of a kind its runtime lacks, named with its rank and index
/// and the first release that has it.
std::string torch_version_refusal(const Plan& plan, TorchVersion version);

/// The runtime (pipeplan/transport.h) torch `version` runs: "torch-2.11" up
/// to 2.11, "torch" from 2.12 (the row's transport).
const Runtime& torch_release_runtime(TorchVersion version);

/// What a torch export is written for: the release whose actions it may use
/// and the runtimes it must be deadlock-free under.
struct TorchTarget {
  TorchVersion version = kTorchDefaultVersion;
  std::vector<Runtime> runtimes;
};
/// The target of a torch export from what the user named ("" when not
/// given): a release (`version`) and/or a runtime (`runtime`, "torch-2.11" or
/// "torch"). A release alone: its runtime. A runtime alone: the newest
/// release it covers. Neither: kTorchDefaultVersion's actions, proved under
/// both torch runtimes, since the file does not say which torch loads it.
/// InputError for a bad version, a runtime that is not torch's, or a
/// release and a runtime that disagree.
TorchTarget torch_target(std::string_view version, std::string_view runtime);

/// Throws unless `target`'s runtimes can run `plan` loaded from a CSV:
/// InputError with torch_version_refusal; PlanRejected (verify's
/// diagnostics, the runtime named) when the plan has communication and is
/// not deadlock-free under one of them. A compute-only plan is lowered by
/// torch itself and is not proved here.
void require_torch_runs(const Plan& plan, const TorchTarget& target);
/// require_torch_runs() for release `version` under its own runtime.
void require_torch_runs(const Plan& plan, TorchVersion version);

/// The warning for a CSV target when `plan` splits a backward (I/W), or "":
/// torch skips its torch.compile guard for CSV-loaded schedules.
std::string torch_compile_guard_warning(const Plan& plan, TorchVersion version);

}  // namespace pipeplan
