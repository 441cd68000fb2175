// pipeplan search: choose mapping, v, layer partition and compute order for
// a layer profile under a memory budget; write the verified plan.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/export.h"
#include "cli/runtime_option.h"
#include "cli/sim_options.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/search.h"

namespace pipeplan::cli {
namespace {
// The layout in a --layout value: the string itself, or the value of
// --pipeline-model-parallel-layout in a pasted Megatron argument line.
std::string megatron_layout_value(std::string text) {
  const std::string flag = "--pipeline-model-parallel-layout";
  const std::size_t at = text.find(flag);
  if (at != std::string::npos) {
    std::size_t i = at + flag.size();
    while (i < text.size() && (text[i] == ' ' || text[i] == '=')) ++i;
    const char quote = i < text.size() && (text[i] == '"' || text[i] == '\'') ? text[i] : '\0';
    if (quote) ++i;
    std::size_t end = i;
    while (end < text.size() && (quote ? text[end] != quote : text[end] != ' ')) ++end;
    text = text.substr(i, end - i);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.pop_back();
  while (!text.empty() && text.front() == ' ') text.erase(0, 1);
  return text;
}

struct SearchArgs {
  SearchOptions options;
  std::string layers;
  CostArgs costs;
  double memory_limit = 0;
  std::string format = "text";
  std::string plan_output;
  std::optional<std::string> layout;  // given, even empty: Megatron's reader judges it
  std::vector<std::string> emit;
  int microbatch_size = 1;
  TorchtitanTarget torchtitan;
  bool no_recompute = false, no_offload = false;
  std::string sequences;
  double microbatch_tokens = 0;
};
}  // namespace

std::function<int()> setup_search(CLI::App& app) {
  auto args = std::make_shared<SearchArgs>();
  add_count_option(app, "-p,--pp", args->options.pp_degree, "Pipeline-parallel degree (ranks)",
                   limits::kMaxRanks, " ranks")
      ->required();
  add_count_option(app, "-m,--microbatches", args->options.num_microbatches,
                   "Number of microbatches (required, unless --sequences builds them)",
                   limits::kMaxMicrobatches, " microbatches");
  app.add_option("--layers", args->layers,
                 "Layer cost profile: CSV 'name,F,B,W,activation[,input][,recompute]' (header "
                 "required)");
  app.add_option("--stage-costs", args->costs.stage_costs,
                 "Instead of --layers: a calibrated stage-costs file (pipeplan calibrate -o); "
                 "the partition is fixed to its stages (v = stages / p) and --memory-limit "
                 "counts (stage, microbatch) activations");
  app.add_option("--memory-limit", args->memory_limit,
                 "Peak activation memory allowed per rank, in the profile's unit (default: "
                 "1F1B's peak on the same profile)")
      ->check(number_in(0, limits::kMaxCost, /*above_min=*/true));
  app.add_option("--comm", args->costs.comm,
                 "Transfer cost LATENCY[,BANDWIDTH]: latency + bytes/bandwidth per transfer "
                 "(default: 0.25 x the profile's mean layer F per message; 0: free messages)");
  app.add_option("--bytes", args->costs.bytes, "Size of every transfer, for --comm's BANDWIDTH")
      ->check(number_in(0, limits::kMaxTransferBytes));
  app.add_option("--host-bw", args->costs.host_bw,
                 "Copy stream bandwidth (activation units per time unit): lets the search "
                 "offload activations to host (docs/memory.md)");
  app.add_option("--host-latency", args->costs.host_latency,
                 "Latency of each OFFLOAD/RELOAD on the copy stream (default 0)");
  app.add_flag("--no-recompute", args->no_recompute,
               "Never recompute activations (no RECOMPUTE in the plan)");
  app.add_flag("--no-offload", args->no_offload,
               "Never offload activations to host (no OFFLOAD/RELOAD in the plan)");
  app.add_option("--model", args->costs.model,
                 "Transport the makespan is measured under (the plan is verified under all three)")
      ->check(CLI::IsMember(model_names()));
  add_lengths_option(app, args->costs.lengths);
  app.add_flag("--keep-order", args->options.keep_order,
               "With --lengths: keep the microbatches' order (default: choose the order for "
               "the step and report it as microbatch_order)");
  app.add_option("--sequences", args->sequences,
                 "Tokens of each sequence of the step (S1,S2,... or a FILE): build the "
                 "microbatches of at most --microbatch-tokens tokens with their order, then "
                 "search (docs/lengths.md)");
  app.add_option("--microbatch-tokens", args->microbatch_tokens,
                 "With --sequences: most tokens one microbatch holds")
      ->check(number_in(1, limits::kMaxCost));
  app.add_option("--time-limit", args->options.time_limit,
                 "Search time bound in seconds (default 3; with memory actions allowed, the last "
                 "30% is kept for deciding them and the last 10% for the finalists)")
      ->check(number_in(0, limits::kMaxTimeLimit, /*above_min=*/true));
  app.add_option("--max-v", args->options.max_stages_per_rank,
                 "Largest number of stages per rank tried")
      ->check(integer_in(1, 16));
  app.add_option("-o,--output", args->plan_output, "Write the chosen plan (JSON) here");
  app.add_option("-f,--format", args->format, "Report format (stdout)")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--layout", args->layout,
                 "A Megatron-LM --pipeline-model-parallel-layout as the fixed partition (e.g. "
                 "\"Et*3|t*4|t*4|t*3L\"): v = its stages / p, loop placement");
  app.add_option("--emit", args->emit,
                 "torchtitan DIR: also write the chosen plan as DIR/schedule.csv and "
                 "DIR/torchtitan.args or .toml (as 'export torchtitan')")
      ->expected(2);
  add_torchtitan_options(app, args->torchtitan);
  add_count_option(app, "--microbatch-size", args->microbatch_size,
                   "Sequences per microbatch, for --emit (default 1)", 1 << 20, " sequences")
      ->check(CLI::Range(1, 1 << 20));
  return [args, &app]() {
    const CostArgs& costs = args->costs;
    if (args->layers.empty() == costs.stage_costs.empty())
      throw InputError(args->layers.empty()
                           ? "give the model's costs: --layers FILE (a layer profile) or "
                             "--stage-costs FILE (a calibrated stage-costs file)"
                           : "give --layers or --stage-costs, not both (a stage-costs file "
                             "fixes the partition a layer profile would let the search choose)");
    if (!costs.stage_costs.empty() && args->layout)
      throw InputError(
          "--layout fixes the partition of a layer profile; with --stage-costs the partition "
          "is already fixed (one stage per measured stage): drop --layout");
    const bool packing = !args->sequences.empty();
    if (packing && app.count("--microbatches") > 0)
      throw InputError("--sequences builds the microbatches: drop -m");
    if (packing && !costs.lengths.empty())
      throw InputError(
          "give --lengths (the microbatches) or --sequences (to build them), not both");
    if (packing && app.count("--microbatch-tokens") == 0)
      throw InputError(
          "--sequences needs --microbatch-tokens N (the most tokens a microbatch holds)");
    if (!packing && app.count("--microbatch-tokens") > 0)
      throw InputError("--microbatch-tokens goes with --sequences");
    if (!packing && app.count("--microbatches") == 0)
      throw InputError("--microbatches is required (or --sequences to build the microbatches)");
    StageCosts file;
    const SimOptions sim = make_sim_options(costs, &file);
    SearchOptions o = args->options;
    o.comm = sim.costs;
    o.transport = sim.transport;
    // A calibrated stage-costs file states its transfer cost, as --comm does.
    o.transfer_cost_stated = !costs.comm.empty() || file.comm_latency.has_value();
    if (app.count("--memory-limit") > 0) o.memory_limit = args->memory_limit;
    o.recompute = !args->no_recompute;
    o.offload = !args->no_offload;
    if (o.offload && !args->no_offload && app.count("--host-bw") == 0)
      spdlog::debug("no --host-bw: the search does not offload");
    const LayerProfile profile = costs.stage_costs.empty()
                                     ? parse_layer_profile(read_input(args->layers), args->layers)
                                     : stage_cost_profile(file, costs.stage_costs);
    if (!costs.stage_costs.empty()) {
      if (profile.size() % static_cast<std::size_t>(o.pp_degree) != 0)
        throw InputError(costs.stage_costs + ": " + std::to_string(profile.size()) +
                         " measured stages do not divide among " + std::to_string(o.pp_degree) +
                         " ranks (-p): the partition is fixed, so p must divide the stages");
      o.partition = Partition(profile.size(), 1);
      spdlog::info("--stage-costs: {} stages ({} per rank), partition fixed", profile.size(),
                   profile.size() / static_cast<std::size_t>(o.pp_degree));
    }
    if (!args->emit.empty() && args->emit.front() != "torchtitan")
      throw InputError("--emit: unknown target '" + limits::excerpt(args->emit.front()) +
                       "' (torchtitan DIR)");
    if (!args->emit.empty()) {
      o.max_v_stages_per_rank = 2;      // torchtitan places a V only with 2 stages per rank
      o.recompute = o.offload = false;  // torch's dialect has no memory actions
      spdlog::debug("--emit torchtitan: V mappings with 2 stages per rank only, no memory actions");
      // Refuse the profile's module names before searching, not after.
      const TorchtitanRelease& release = torchtitan_release(args->torchtitan.version);
      if (std::string why = torchtitan_module_refusal(profile, release); !why.empty())
        throw InputError(why);
      torchtitan_torch_target(args->torchtitan);  // a bad --torch-version, before searching
    } else {
      for (const char* option : {"--torchtitan-version", "--torch-version", "--runtime"})
        if (app.count(option) > 0)
          throw InputError(std::string(option) + " goes with --emit torchtitan DIR");
    }
    if (args->layout) {
      o.partition = partition_from_megatron_layout(profile, megatron_layout_value(*args->layout),
                                                   o.pp_degree);
      spdlog::info("--layout: {} stages ({} per rank), partition fixed", o.partition->size(),
                   o.partition->size() / static_cast<std::size_t>(o.pp_degree));
      const std::string why = megatron_microbatch_refusal(
          o.pp_degree, static_cast<int>(o.partition->size()) / o.pp_degree, o.num_microbatches);
      if (!why.empty()) spdlog::warn("--layout: {} (Megatron cannot run this layout here)", why);
    }
    const SearchResult result =
        packing
            ? search_sequences(profile, o, read_lengths(args->sequences, "--sequences", "sequence"),
                               args->microbatch_tokens)
            : search(profile, o);
    spdlog::debug("search: {} candidates, origin {}", result.candidates, result.origin);
    if (!args->plan_output.empty()) {
      Output plan_out(args->plan_output);
      write_json(result.plan, plan_out.stream());
      plan_out.close();
    }
    if (!args->emit.empty())
      write_torchtitan_dir(result.plan, profile, args->emit[1], args->microbatch_size,
                           args->torchtitan);
    Output out("");
    if (args->format == "json") write_search_json(result, o, out.stream());
    else write_search_text(result, o, out.stream());
    out.close();
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
