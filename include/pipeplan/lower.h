// lower(): insert SEND/RECV into a compute-only plan.
#pragma once

#include "pipeplan/ir.h"

namespace pipeplan {

/// Where a forward send goes once its producer ran.
enum class SendPlacement : std::uint8_t {
  Earliest,         ///< right after the producer (or the pair's previous transfer)
  ParityStaggered,  ///< odd ranks ship a forward output just before their next compute
};

/// Unit durations used to order each pair's transfers.
struct LowerOptions {
  SendPlacement send_placement = SendPlacement::Earliest;
  double cost_f = 1.0, cost_b = 2.0, cost_i = 1.0, cost_w = 1.0;
  /// Keep one transfer order per rank across all its peers (not just per
  /// pair), which also makes the plan progress under the serial model.
  bool serial_safe = false;
};

/// Precondition: `plan` is whole and compute-only, and its compute order is
/// consistent (every forward/backward dependency reachable without a cycle;
/// otherwise throws PlanError naming the stuck ranks).
/// Postcondition: every cross-rank boundary has one SEND and one RECV; each
/// RECV sits right before its consumer; each rank pair posts its transfers in
/// one common order (ordered by the consumer's start time in a unit-cost run),
/// so the plan is deadlock-free under the rendezvous and eager models (and
/// serial with `serial_safe`, which orders all of a rank's transfers). Compute
/// order is unchanged. gpipe/1f1b reproduce the seed driver's order.
Plan lower(const Plan& plan, const LowerOptions& options = {});

}  // namespace pipeplan
