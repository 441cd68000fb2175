// pipeplan lower: a compute-only plan file (torch CSV or JSON) to one with
// SEND/RECV, checked first and proven deadlock-free after.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/lower_options.h"
#include "cli/runtime_option.h"
#include "cli/sim_options.h"
#include "cli/torch_target.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/prove.h"
#include "pipeplan/verify.h"

namespace pipeplan::cli {

namespace {

struct LowerArgs {
  std::string input;
  std::string output;
  std::string format;  // empty: the input's format
  std::string send_placement;
  std::string torch_version;
  std::string runtime;
  bool reduce_grad = false;
  bool no_verify = false;
  CsvReadOptions csv;
  CostArgs costs;
  LoweringChoice lowering;
  MemoryArgs memory;
};

std::string first_comm(const Plan& plan) {
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i)
      if (is_comm(plan.ranks[r][i].type))
        return "rank " + std::to_string(plan.rank_ids[r]) + " action " + std::to_string(i) +
               " is " + to_string(plan.ranks[r][i]);
  return "";
}

}  // namespace

std::function<int()> setup_lower(CLI::App& app) {
  auto args = std::make_shared<LowerArgs>();
  app.add_option("input", args->input, "Compute-only plan (CSV or JSON), or - for stdin")
      ->required();
  app.add_option("-o,--output", args->output, "Output file (default: stdout)");
  app.add_option("-f,--format", args->format,
                 "Output format (default: the input's; torch-csv: strictly torch's dialect, no "
                 "BATCH_P2P groups nor memory actions)")
      ->check(CLI::IsMember({"json", "csv", "torch-csv", "text"}));
  add_torch_version_option(app, args->torch_version, to_string(kTorchDefaultVersion));
  add_runtime_option(app, args->runtime,
                     "the result is proved under it instead of the bare rendezvous model, and "
                     "lowered serial-safe when the schedule's own lowering is refused there "
                     "(exit 1 when that is refused too)");
  add_csv_options(app, args->csv);
  app.add_option("--send-placement", args->send_placement,
                 "Seed lowering: where forward sends go (default: the schedule's; 'earliest' for "
                 "custom plans)")
      ->check(CLI::IsMember({"earliest", "parity"}));
  app.add_flag("--reduce-grad", args->reduce_grad,
               "Append <stage>REDUCE_GRAD after each stage's last backward, as torch's lowering "
               "does (needed to run the result with torch's format=\"compute_comms\")");
  app.add_flag("--no-verify", args->no_verify, "Skip the rendezvous deadlock proof of the result");
  add_cost_options(app, args->costs, true, /*model=*/false);
  add_lowering_options(app, args->lowering);
  add_memory_options(app, args->memory);
  return [args, &app]() {
    const MemoryPolicy policy = memory_policy(args->memory);
    PlanFormat in_format = PlanFormat::Csv;
    Plan plan = load_plan(args->input, args->csv, &in_format);
    const std::string name = args->input == "-" ? "<stdin>" : args->input;
    if (!plan.is_whole())
      throw InputError("lower needs every rank of the plan; " + name + " holds " +
                       std::to_string(plan.ranks.size()) + " of " +
                       std::to_string(plan.meta.pp_degree) + " ranks");
    if (!plan.is_compute_only())
      throw InputError(
          name + " already has communication (" + first_comm(plan) +
          "); lower takes a compute-only plan, 'pipeplan verify' checks this one as written");
    plan = apply_memory_policy(std::move(plan), policy);

    // With --layers: the profile's stage sums on the plan's partition (else
    // the balanced one, which the lowered plan records).
    SimOptions costs = make_sim_options(args->costs);
    if (const std::optional<LayerProfile> layers = load_layers(args->costs))
      plan.meta.partition = apply_layers(*layers, plan.meta, costs);
    LowerOptions options =
        lower_options(plan.meta, lowering_choice(args->lowering, args->costs), costs.costs);
    if (args->send_placement == "earliest") options.send_placement = SendPlacement::Earliest;
    if (args->send_placement == "parity") options.send_placement = SendPlacement::ParityStaggered;
    // A compute order with defects, or whose ranks wait on each other, cannot
    // be lowered; say what is wrong instead.
    Lowered result = lower_if_compute_only(plan, options);
    if (!result.defects.empty()) {
      std::cerr << "cannot lower " << name << ": its compute order has " << result.defects.size()
                << " problem(s)\n"
                << format_diagnostics(result.defects) << "\n";
      return kExitInvalid;
    }
    Plan lowered = std::move(*result.plan);
    if (args->reduce_grad) lowered = add_reduce_grad(lowered);
    std::string format = args->format;
    if (format.empty()) format = in_format == PlanFormat::Json ? "json" : "csv";
    const TorchTarget torch = torch_csv_target(format, args->torch_version, args->runtime);
    const std::vector<Runtime> under = proof_runtimes(format, torch, args->runtime);
    if (!args->no_verify && !under.empty()) {
      auto lower_with = [&](const LowerOptions& o) {
        Plan p = lower(plan, o);
        return args->reduce_grad ? add_reduce_grad(p) : p;
      };
      if (first_refusal(lowered, under))
        lowered = lower_for(lower_with, options, under, given_lowering_option(app).empty(),
                            "the lowered plan");
    }

    if (!args->no_verify) {
      VerifyResult res = verify(lowered, {Transport::Rendezvous});
      if (!res.ok()) {
        spdlog::error("the lowered plan is not deadlock-free (a pipeplan bug):\n{}",
                      format_diagnostics(res.diagnostics));
        return kExitInternal;
      }
      spdlog::debug("lowered {} actions to {}; deadlock-free under rendezvous", plan.num_actions(),
                    lowered.num_actions());
    }

    std::ostringstream text;  // a refused write leaves no output file behind
    write_plan(lowered, format, text, torch.version);
    if (format == "torch-csv") check_torch_target(lowered, torch);
    Output out(args->output);
    out.stream() << text.str();
    out.close();
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
