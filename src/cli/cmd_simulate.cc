// pipeplan simulate: run a plan through the cost model and report makespan,
// bubble and per-rank busy time and peak activations.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sim_options.h"
#include "pipeplan/simulate.h"

namespace pipeplan::cli {
namespace {
struct SimulateArgs {
  PlanSource source;
  CostArgs costs;
  std::string format = "text";
  std::string output;
};
}  // namespace

std::function<int()> setup_simulate(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  add_plan_source(app, args->source);
  add_cost_options(app, args->costs);
  app.add_option("-f,--format", args->format, "Report format")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("-o,--output", args->output, "Output file (default: stdout)");
  return [args, &app]() {
    const SimOptions options = make_sim_options(args->costs);
    std::vector<Diagnostic> defects;
    const Plan plan = load_plan_source(args->source, defects);
    if (!defects.empty()) return report_invalid(args->source.file + " is not a valid plan", defects);
    const SimResult result = simulate(plan, options);
    if (plan.is_compute_only() && plan.meta.pp_degree > 1 && app.count("--model") > 0)
      spdlog::warn("--model has no effect on a compute-only plan (add --lower to lower it)");
    Output out(args->output);
    if (args->format == "json") write_sim_json(plan, options, result, out.stream());
    else write_sim_text(plan, options, result, out.stream());
    out.close();
    if (!result.ok()) {
      spdlog::error("the plan cannot run to completion under the {} model",
                    result.compute_only ? "compute-only" : std::string(to_string(options.transport)));
      return kExitInvalid;
    }
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
