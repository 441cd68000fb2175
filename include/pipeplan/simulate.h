// simulate(): a cost-model run of a plan -> timeline, makespan, bubble,
// per-rank busy time and peak live activations. See docs/simulator.md.
// Costs: costs.h (reading them: io.h); writing results: emit_sim.h.
#pragma once

#include <vector>

#include "pipeplan/costs.h"
#include "pipeplan/diagnostic.h"
#include "pipeplan/ir.h"
#include "pipeplan/timeline.h"
#include "pipeplan/transport.h"

namespace pipeplan {

struct SimOptions {
  CostModel costs;
  Transport transport = Transport::Rendezvous;
};

/// A simulation: the timeline of one step (timeline.h), and whether it ran.
struct SimResult : Timeline {
  /// Empty when every rank reached the end of its list and every transfer
  /// completed; otherwise why not (bad actions, deadlock, mismatched pairs).
  std::vector<Diagnostic> problems;
  bool ok() const { return problems.empty(); }
  /// True when the plan had no SEND/RECV and data moved implicitly.
  bool compute_only = false;
};

/// Runs each rank's list in order on one compute stream per rank; SEND/RECV
/// are posted when the rank reaches them and complete per `options.transport`;
/// a compute waits for the values it consumes. A compute-only plan moves each
/// cross-rank value as soon as it is produced (+ transfer time), with no
/// transport model. Linear time; never hangs: a deadlock is a problem in the
/// result. Precondition: the plan is whole; else throws InputError.
SimResult simulate(const Plan& plan, const SimOptions& options = {});

}  // namespace pipeplan
