#include "cli/lower_options.h"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "cli/common.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan::cli {

void add_lowering_options(CLI::App& app, LoweringChoice& choice) {
  app.add_option_function<std::string>(
         "--lowering", [&choice](const std::string& s) { choice.mode = parse_lower_mode(s); },
         "How SEND/RECV are placed: latency-hiding (prefetched receives, pair order from "
         "the cost model, searched where the eager bound is missed; for the nominal costs "
         "one order per rank for the loop-mapped multi-stage schedules; default except "
         "gpipe/1f1b), seed (receives right before their consumer; gpipe/1f1b default, the "
         "seed driver's order) or exact (latency hiding with an exact search over every "
         "pair's order, within a work limit; takes no --prefetch or --serial-safe)")
      ->check([](const std::string& s) {
        return parse_lower_mode(s) ? std::string()
                                   : "unknown lowering '" + limits::excerpt(s) + "' (expected " +
                                         std::string(lower_mode_names()) + ")";
      });
  app.add_option("--prefetch", choice.max_prefetch,
                 "Latency hiding: most receives a rank posts ahead of their consumers (buffers "
                 "held before use); 0 = no limit (default)")
      ->check(integer_in(0, limits::kMaxPrefetch));
  app.add_flag("--serial-safe", choice.serial_safe,
               "Keep one transfer order per rank across its peers, so the plan also runs under "
               "the serial model. Without cost options every library schedule's default plan "
               "already does (interleaved-1f1b, looped-bfs, interleaved-zb and the vpp "
               "schedules keep one order per rank by default, the others' pair orders run "
               "under serial by themselves); with --cost, --stage-costs, --comm, --bytes or "
               "another --lowering the pairs are ordered for those costs: pass this flag");
  app.add_flag("--batch-p2p", choice.batch_p2p,
               "Batched lowering, as Megatron-LM's batch_p2p_comm: receives right before their "
               "consumer, and each send posted together with the receive from the same peer it "
               "meets as one (A;B)BATCH_P2P group, instead of parity-staggered sends; "
               "deadlock-free under rendezvous and serial. Not with --lowering latency-hiding "
               "or exact, nor --prefetch. Like every lowering option, refused where nothing is "
               "lowered: with --compute-only, or on a plan FILE without --lower");
}

std::string given_lowering_option(const CLI::App& app) {
  return given_option(app, {"--lowering", "--prefetch", "--serial-safe", "--batch-p2p"});
}

void refuse_lowering_with_compute_only(const CLI::App& app) {
  refuse_together(app, given_lowering_option(app), "--compute-only",
                  "the compute order holds no SEND/RECV for it to place");
}

void add_memory_options(CLI::App& app, MemoryArgs& args) {
  app.add_option("--recompute", args.recompute,
                 "Recompute the activations of these stages ('all' or e.g. 0,2-3) before each "
                 "backward: a RECOMPUTE right before it, the forward keeping only its input "
                 "(docs/memory.md)");
  app.add_option("--offload", args.offload,
                 "Offload the activations of these stages ('all' or e.g. 0,2-3) to host: an "
                 "OFFLOAD after each forward and a RELOAD --offload-lead computes before its "
                 "backward");
  app.add_option_function<int>(
         "--offload-lead",
         [&args](int k) {
           args.offload_lead = k;
           args.lead_given = true;
         },
         "With --offload: how many computes before its backward each RELOAD is placed "
         "(default 1)")
      ->check(integer_in(0, 1 << 30));
}

MemoryPolicy memory_policy(const MemoryArgs& args) {
  return memory_policy_from(args.recompute, args.offload,
                            args.lead_given ? std::optional<int>(args.offload_lead) : std::nullopt,
                            "--");
}

}  // namespace pipeplan::cli
