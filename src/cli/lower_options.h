// Options that choose how a compute order is lowered (plan, lower,
// simulate/render -s and FILE --lower, compare), and the memory policy
// inserted into it, shared by those commands.
#pragma once

#include <string>

#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"

namespace CLI {
class App;
}

namespace pipeplan::cli {

/// Adds --lowering, --prefetch, --serial-safe and --batch-p2p, stored in `choice` (the
/// planner's LoweringChoice; whether --comm states the transfer cost is
/// added where the cost options are read: sim_options.h).
void add_lowering_options(CLI::App& app, LoweringChoice& choice);

/// The lowering option given on `app` (--lowering, --prefetch, --serial-safe,
/// --batch-p2p, first in that order), "" when none.
std::string given_lowering_option(const CLI::App& app);
/// Refuses a lowering option beside --compute-only (refuse_together): the
/// compute order holds no SEND/RECV for it to place.
void refuse_lowering_with_compute_only(const CLI::App& app);

/// --recompute all|STAGES, --offload all|STAGES, --offload-lead K as given.
struct MemoryArgs {
  std::string recompute, offload;
  int offload_lead = 1;
  bool lead_given = false;
};
/// Adds --recompute, --offload and --offload-lead, stored in `args`.
void add_memory_options(CLI::App& app, MemoryArgs& args);
/// The policy the flags ask for (InputError for a bad stage list, or
/// --offload-lead without --offload).
MemoryPolicy memory_policy(const MemoryArgs& args);

}  // namespace pipeplan::cli
