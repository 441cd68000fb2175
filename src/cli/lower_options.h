// Options that choose how a compute order is lowered (plan, lower,
// simulate/render -s and FILE --lower, compare), shared by those commands.
#pragma once

#include <string>

#include "pipeplan/lower.h"
#include "pipeplan/simulate.h"

namespace CLI {
class App;
}

namespace pipeplan::cli {

/// --lowering, --prefetch, --serial-safe as given.
struct LoweringArgs {
  std::string mode;  ///< "" (the schedule's), "latency-hiding" or "seed"
  int prefetch = 0;  ///< most receives posted ahead of their consumers; 0: no limit
  bool serial_safe = false;
};

/// Adds --lowering, --prefetch and --serial-safe.
void add_lowering_options(CLI::App& app, LoweringArgs& args);

/// How to lower a plan of `meta` with the user's choices: the library's
/// make_lower_options (cost_options.h), planning for `costs`, with
/// kNominalLatency per transfer when they make transfers free and
/// `comm_given` (--comm) is false.
LowerOptions make_lower_options(const PlanMeta& meta, const LoweringArgs& args,
                                const CostModel& costs, bool comm_given);

}  // namespace pipeplan::cli
