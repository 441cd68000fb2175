// Options that choose how a compute order is lowered (plan, lower,
// simulate/render -s and FILE --lower, compare), shared by those commands.
#pragma once

#include "pipeplan/planner.h"

namespace CLI {
class App;
}

namespace pipeplan::cli {

/// Adds --lowering, --prefetch, --serial-safe and --batch-p2p, stored in `choice` (the
/// planner's LoweringChoice; whether --comm states the transfer cost is
/// added where the cost options are read: sim_options.h).
void add_lowering_options(CLI::App& app, LoweringChoice& choice);

}  // namespace pipeplan::cli
