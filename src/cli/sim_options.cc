#include "cli/sim_options.h"
#include "cli/runtime_option.h"

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "cli/common.h"
#include "pipeplan/cost_options.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/lower.h"
#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"
#include "pipeplan/prove.h"
#include "pipeplan/verify.h"

namespace pipeplan::cli {

void add_cost_options(CLI::App& app, CostArgs& args, bool stage_costs, bool model) {
  app.add_option("--cost", args.cost,
                 "Action costs, e.g. F=1,B=2,I=1,W=1[,OVERLAP_F_B=2.5] (default F=1,B=2,I=1,W=1; "
                 "B defaults to I+W, I=W=B/2 when only B is given)");
  app.add_option("--layers", args.layers,
                 "Layer cost profile: CSV 'name,F,B,W,activation' (header required); stages "
                 "cost the sum of their layers (the plan's partition, else the balanced one)");
  if (stage_costs)
    app.add_option("--stage-costs", args.stage_costs,
                   "Per-stage cost multipliers: CSV rows 'stage,F,B,I,W' or 'stage,SCALE', or JSON "
                   "{\"stages\":[{\"stage\":0,\"scale\":1.5}]}");
  app.add_option("--comm", args.comm,
                 "Transfer cost LATENCY[,BANDWIDTH]: latency + bytes/bandwidth per transfer "
                 "(default 0)");
  app.add_option("--bytes", args.bytes, "Size of every transfer, for --comm's BANDWIDTH")
      ->check(number_in(0, limits::kMaxTransferBytes));
  app.add_option("--host-bw", args.host_bw,
                 "Copy stream bandwidth for OFFLOAD/RELOAD, in activation units per time unit "
                 "(default: infinite; docs/memory.md)");
  app.add_option("--host-latency", args.host_latency,
                 "Latency of each OFFLOAD/RELOAD on the copy stream (default 0)");
  add_lengths_option(app, args.lengths);
  if (model)
    app.add_option("--model", args.model, "Transport model for SEND/RECV")
        ->check(CLI::IsMember(model_names()));
}

void add_lengths_option(CLI::App& app, std::string& lengths) {
  app.add_option("--lengths", lengths,
                 "Tokens of each microbatch, in microbatch order (L1,L2,... or a FILE of them): "
                 "costs grow per microbatch, linearly, plus a layer profile's quadratic part, "
                 "from the length they are stated at (the profile's seq_len, else the longest; "
                 "docs/lengths.md)");
}

std::vector<double> read_lengths(const std::string& value, const std::string& option,
                                 const std::string& item) {
  if (value.empty()) return {};
  // A list holds a comma or is digits and separators only; anything else
  // names a file.
  const bool list = value.find(',') != std::string::npos ||
                    (value.find_first_not_of("0123456789.eE+- \t") == std::string::npos &&
                     value.find_first_of("0123456789") != std::string::npos);
  if (list) return parse_lengths(value, option, item);
  return parse_lengths(read_input(value), value, item);
}

SimOptions make_sim_options(const CostArgs& args, StageCosts* file_out) {
  if (!args.layers.empty() && !args.cost.empty())
    throw InputError("--layers gives every stage's costs; drop --cost");
  if (!args.layers.empty() && !args.stage_costs.empty())
    throw InputError("--layers gives every stage's costs; drop --stage-costs");
  CostOptions given;
  given.name_prefix = "--";
  given.cost = args.cost;
  if (!args.stage_costs.empty()) {
    given.stage_costs = read_input(args.stage_costs);
    given.stage_costs_source = args.stage_costs;
  }
  given.comm = args.comm;
  given.bytes = args.bytes;
  given.host_bw = args.host_bw;
  given.host_latency = args.host_latency;
  given.model = args.model;
  given.lengths = read_lengths(args.lengths);
  StageCosts file;
  SimOptions o = pipeplan::make_sim_options(given, &file);
  if (file.absolute)
    spdlog::debug("{}: calibrated durations in {}", args.stage_costs,
                  file.time_unit.empty() ? std::string("time units") : file.time_unit);
  if (args.bytes > 0 && o.costs.comm_bandwidth == 0)
    spdlog::warn("--bytes has no effect without a bandwidth (--comm LATENCY,BANDWIDTH)");
  if (file_out) *file_out = std::move(file);
  return o;
}

LoweringChoice lowering_choice(LoweringChoice flags, const CostArgs& costs) {
  flags.transfer_cost_stated = !costs.comm.empty();
  return flags;
}

std::optional<LayerProfile> load_layers(const CostArgs& args) {
  if (args.layers.empty()) return std::nullopt;
  return parse_layer_profile(read_input(args.layers), args.layers);
}

Partition apply_layers(const LayerProfile& profile, const PlanMeta& meta, SimOptions& options) {
  Partition partition = partition_for(profile, meta);
  options.costs = stage_costs(profile, partition, options.costs);
  return partition;
}

void add_plan_source(CLI::App& app, PlanSource& src) {
  src.app = &app;
  app.add_option("file", src.file, "Plan file (JSON or CSV), or - for stdin; or use -s/-p/-m");
  add_problem_options(app, src.problem, false);
  app.add_flag("--lower", src.lower,
               "Lower a compute-only FILE before simulating (default: values move as soon as "
               "they are produced); the lowering options apply only then");
  app.add_flag("--forward-only", src.problem.forward_only,
               "Forward-only (inference) plan: with -s, plan one; with FILE, owe no backward");
  app.add_flag("--compute-only", src.compute_only,
               "Simulate the compute order only: values move as soon as they are produced");
  add_lowering_options(app, src.lowering);
  add_memory_options(app, src.memory);
}

Plan load_plan_source(const PlanSource& src, const CostArgs& costs, const CostModel& model,
                      std::vector<Diagnostic>& defects, const LayerProfile* layers) {
  const LoweringChoice choice = lowering_choice(src.lowering, costs);
  // A lowering plans for the stage costs the plan is simulated with.
  const auto planned = [&](const PlanMeta& meta) {
    return layers ? stage_costs(*layers, partition_for(*layers, meta), model) : model;
  };
  const bool named = src.app->count("--schedule") > 0;
  const bool shaped = src.app->count("--pp") > 0 || src.app->count("--microbatches") > 0 ||
                      src.app->count("--stages-per-rank") > 0;
  if (!src.file.empty() && (named || shaped))
    throw InputError("give either a plan FILE or -s NAME -p P -m M, not both");
  refuse_together(*src.app, "--lower", "--compute-only",
                  "one lowers the plan, the other drops its SEND/RECV");
  refuse_lowering_with_compute_only(*src.app);
  // A lowering option shapes the SEND/RECV a lowering places: a plan FILE
  // is lowered only with --lower, and only when it holds none yet.
  const std::string lowering_flag = given_lowering_option(*src.app);
  if (!src.file.empty() && !src.lower && !lowering_flag.empty())
    throw InputError(lowering_flag +
                     " shapes a lowering, and a plan FILE is simulated as it is: give --lower "
                     "too (for a compute-only FILE), or drop " +
                     lowering_flag);
  if (src.file.empty()) {
    if (!named) throw InputError("give a plan FILE, or -s NAME -p P -m M [-v V]");
    if (src.app->count("--pp") == 0 || src.app->count("--microbatches") == 0)
      throw InputError("-s needs -p P and -m M");
    if (src.lower) throw InputError("--lower applies to a plan FILE; -s plans are lowered already");
    const Planner planner(src.problem);
    Plan compute = apply_memory_policy(planner.compute(), memory_policy(src.memory));
    if (src.compute_only) return compute;
    return lower(compute, planner.lowering(choice, planned(planner.meta())));
  }
  CsvReadOptions csv;
  csv.forward_only = src.problem.forward_only;
  Plan p = load_plan(src.file, csv);
  if (!p.is_whole())
    throw InputError(src.file + ": holds " + std::to_string(p.ranks.size()) + " of " +
                     std::to_string(p.meta.pp_degree) + " ranks; simulating needs every rank");
  p = apply_memory_policy(std::move(p), memory_policy(src.memory));
  if (!lowering_flag.empty() && !p.is_compute_only())
    throw InputError(limits::excerpt(src.file) + " already holds its SEND/RECV: " + lowering_flag +
                     " has nothing to lower (drop it, or give a compute-only plan)");
  if (src.lower && !src.compute_only && p.is_compute_only()) {
    Lowered lowered = lower_if_compute_only(p, lower_options(p.meta, choice, planned(p.meta)));
    defects = std::move(lowered.defects);
    if (!defects.empty()) return p;
    spdlog::debug("lowered the compute-only plan: {} actions", lowered.plan->num_actions());
    return std::move(*lowered.plan);
  }
  defects = check_structure(p);
  if (!defects.empty()) return p;
  if (src.compute_only) p = compute_projection(std::move(p));
  return p;
}

int report_invalid(const std::string& what, const std::vector<Diagnostic>& problems) {
  spdlog::error("{}:\n{}", what, format_diagnostics(problems));
  return kExitInvalid;
}

Simulated load_and_simulate(const PlanSource& src, const CostArgs& costs, const CLI::App& app,
                            const std::function<void(const Plan&)>& before_simulating) {
  Simulated s;
  s.options = make_sim_options(costs);
  std::vector<Diagnostic> defects;
  const std::optional<LayerProfile> profile = load_layers(costs);
  s.plan = load_plan_source(src, costs, s.options.costs, defects, profile ? &*profile : nullptr);
  if (!defects.empty()) {
    s.exit_code = report_invalid(src.file + " is not a valid plan", defects);
    return s;
  }
  if (profile) s.plan.meta.partition = apply_layers(*profile, s.plan.meta, s.options);
  if (before_simulating) before_simulating(s.plan);
  s.result = simulate(s.plan, s.options);
  if (s.plan.is_compute_only() && s.plan.meta.pp_degree > 1 && app.count("--model") > 0)
    spdlog::warn("--model has no effect on a compute-only plan (add --lower to lower it)");
  return s;
}

}  // namespace pipeplan::cli
