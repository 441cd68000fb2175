#include "cli/lower_options.h"

#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "pipeplan/cost_options.h"
#include "pipeplan/limits.h"

namespace pipeplan::cli {

void add_lowering_options(CLI::App& app, LoweringArgs& args) {
  app.add_option("--lowering", args.mode,
                 "How SEND/RECV are placed: latency-hiding (prefetched receives, pair order from "
                 "the cost model; default except gpipe/1f1b) or seed (receives right before their "
                 "consumer; gpipe/1f1b default, the seed driver's order)")
      ->check(CLI::IsMember({"latency-hiding", "seed"}));
  app.add_option("--prefetch", args.prefetch,
                 "Latency hiding: most receives a rank posts ahead of their consumers (buffers "
                 "held before use); 0 = no limit (default)")
      ->check(integer_in(0, limits::kMaxPrefetch));
  app.add_flag("--serial-safe", args.serial_safe,
               "Keep one transfer order per rank across its peers, so the plan also runs under "
               "the serial model (library schedules other than gpipe/1f1b already do)");
}

LowerOptions make_lower_options(const PlanMeta& meta, const LoweringArgs& args,
                                const CostModel& costs, bool comm_given) {
  LoweringChoice choice;
  choice.mode = parse_lower_mode(args.mode);
  choice.max_prefetch = args.prefetch;
  choice.serial_safe = args.serial_safe;
  return pipeplan::make_lower_options(meta, choice, costs, comm_given);
}

}  // namespace pipeplan::cli
