#include "cli/lower_options.h"

#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "pipeplan/limits.h"

namespace pipeplan::cli {

void add_lowering_options(CLI::App& app, LoweringChoice& choice) {
  app.add_option_function<std::string>(
         "--lowering", [&choice](const std::string& s) { choice.mode = parse_lower_mode(s); },
         "How SEND/RECV are placed: latency-hiding (prefetched receives, pair order from "
         "the cost model; default except gpipe/1f1b) or seed (receives right before their "
         "consumer; gpipe/1f1b default, the seed driver's order)")
      ->check(CLI::IsMember({"latency-hiding", "seed"}));
  app.add_option("--prefetch", choice.max_prefetch,
                 "Latency hiding: most receives a rank posts ahead of their consumers (buffers "
                 "held before use); 0 = no limit (default)")
      ->check(integer_in(0, limits::kMaxPrefetch));
  app.add_flag("--serial-safe", choice.serial_safe,
               "Keep one transfer order per rank across its peers, so the plan also runs under "
               "the serial model (library schedules other than gpipe/1f1b already do)");
  app.add_flag("--batch-p2p", choice.batch_p2p,
               "Batched lowering, as Megatron-LM's batch_p2p_comm: receives right before their "
               "consumer, and each send posted together with the receive from the same peer it "
               "meets as one (A;B)BATCH_P2P group, instead of parity-staggered sends; "
               "deadlock-free under rendezvous and serial. Not with --lowering latency-hiding "
               "or --prefetch");
}

}  // namespace pipeplan::cli
