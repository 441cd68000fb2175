// Internal: the latency-hiding lowering behind lower() (LowerMode::LatencyHiding).
#pragma once

#include "pipeplan/ir.h"
#include "pipeplan/lower.h"

namespace pipeplan::detail {

/// lower() for LowerMode::LatencyHiding; same pre- and postconditions.
Plan lower_latency_hiding(const Plan& plan, const LowerOptions& options);

}  // namespace pipeplan::detail
