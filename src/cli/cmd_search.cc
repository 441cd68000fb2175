// pipeplan search: choose mapping, v, layer partition and compute order for
// a layer profile under a memory budget; write the verified plan.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sim_options.h"
#include "pipeplan/emit.h"
#include "pipeplan/limits.h"
#include "pipeplan/search.h"

namespace pipeplan::cli {
namespace {
struct SearchArgs {
  SearchOptions options;
  std::string layers;
  CostArgs costs;
  double memory_limit = 0;
  std::string format = "text";
  std::string plan_output;
};
}  // namespace

std::function<int()> setup_search(CLI::App& app) {
  auto args = std::make_shared<SearchArgs>();
  add_count_option(app, "-p,--pp", args->options.pp_degree, "Pipeline-parallel degree (ranks)",
                   limits::kMaxRanks, " ranks")
      ->required();
  add_count_option(app, "-m,--microbatches", args->options.num_microbatches,
                   "Number of microbatches", limits::kMaxMicrobatches, " microbatches")
      ->required();
  app.add_option("--layers", args->layers,
                 "Layer cost profile: CSV 'name,F,B,W,activation' (header required)")
      ->required();
  app.add_option("--memory-limit", args->memory_limit,
                 "Peak activation memory allowed per rank, in the profile's unit (default: "
                 "1F1B's peak on the same profile)")
      ->check(number_in(0, limits::kMaxCost, /*above_min=*/true));
  app.add_option("--comm", args->costs.comm,
                 "Transfer cost LATENCY[,BANDWIDTH]: latency + bytes/bandwidth per transfer");
  app.add_option("--bytes", args->costs.bytes, "Size of every transfer, for --comm's BANDWIDTH")
      ->check(number_in(0, limits::kMaxTransferBytes));
  app.add_option("--model", args->costs.model,
                 "Transport the makespan is measured under (the plan is verified under all three)")
      ->check(CLI::IsMember({"rendezvous", "eager", "serial"}));
  app.add_option("--time-limit", args->options.time_limit,
                 "Search time bound in seconds (default 3)")
      ->check(number_in(0, limits::kMaxTimeLimit, /*above_min=*/true));
  app.add_option("--max-v", args->options.max_stages_per_rank,
                 "Largest number of stages per rank tried")
      ->check(integer_in(1, 16));
  app.add_option("-o,--output", args->plan_output, "Write the chosen plan (JSON) here");
  app.add_option("-f,--format", args->format, "Report format (stdout)")
      ->check(CLI::IsMember({"text", "json"}));
  return [args, &app]() {
    const SimOptions sim = make_sim_options(args->costs);
    SearchOptions o = args->options;
    o.comm = sim.costs;
    o.transport = sim.transport;
    if (app.count("--memory-limit") > 0) o.memory_limit = args->memory_limit;
    const LayerProfile profile = parse_layer_profile(read_input(args->layers), args->layers);
    const SearchResult result = search(profile, o);
    spdlog::debug("search: {} candidates, origin {}", result.candidates, result.origin);
    if (!args->plan_output.empty()) {
      Output plan_out(args->plan_output);
      write_json(result.plan, plan_out.stream());
      plan_out.close();
    }
    Output out("");
    if (args->format == "json") write_search_json(result, o, out.stream());
    else write_search_text(result, o, out.stream());
    out.close();
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
