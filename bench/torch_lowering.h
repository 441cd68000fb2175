// A re-statement of how torch.distributed.pipelining (2.11) lowers a
// compute-only order (`_add_send_recv` in schedules.py), to compare
// pipeplan's lowering against it on the same compute order and cost model.
// Not part of the library: the benchmark and the tests use it.
#pragma once

#include "pipeplan/ir.h"

namespace pipeplan::bench {

/// torch's lowering: ranks take turns, one compute each per round, in rank
/// order; a rank waits while its next compute's input was neither produced
/// on it nor received; a compute whose output leaves the rank is followed
/// by its SEND, and the peer's RECV is appended to the peer's list at once.
/// Throws std::runtime_error when no rank can move (a malformed order).
Plan torch_lowering(const Plan& compute);

}  // namespace pipeplan::bench
