// Internal: the latency-hiding lowering behind lower() (LowerMode::LatencyHiding,
// LowerMode::Exact).
#pragma once

#include <cstdint>

#include "pipeplan/ir.h"
#include "pipeplan/lower.h"

namespace pipeplan::detail {

/// lower() for LowerMode::LatencyHiding and LowerMode::Exact; same pre- and
/// postconditions. Fills `report` when given.
Plan lower_latency_hiding(const Plan& plan, const LowerOptions& options, LowerReport* report);

/// One transfer while lowering (latency.cc, stream_run.h).
struct Xfer {
  double t = 0.0;         // producer end in the bound's run (the key)
  double deadline = 0.0;  // consumer's latest start in the bound's run
  std::int32_t src = 0, dst = 0;
  std::int32_t producer = 0;  // index on the sending rank
  std::int32_t consumer = 0;  // index on the receiving rank
  std::int32_t send_stage = 0, mb = 0;
  std::uint32_t send_pos = 0, recv_pos = 0;  // packed slot/sub
  std::uint32_t recv_lb = 0;                 // prefetch cap: earliest slot
  bool grad = false;
};

/// The transfer key: data-ready time, then gradients first, sending stage,
/// microbatch (unique per transfer).
inline bool key_less(const Xfer& a, const Xfer& b) {
  if (a.t != b.t) return a.t < b.t;
  if (a.grad != b.grad) return a.grad;
  if (a.send_stage != b.send_stage) return a.send_stage < b.send_stage;
  return a.mb < b.mb;
}

}  // namespace pipeplan::detail
