// pipeplan simulate: run a plan through the cost model and report makespan,
// bubble and per-rank busy time and peak activations.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sim_options.h"
#include "pipeplan/emit_sim.h"
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
    const Simulated sim = load_and_simulate(args->source, args->costs, app);
    if (sim.exit_code != 0) return sim.exit_code;
    const Plan& plan = sim.plan;
    const SimOptions& options = sim.options;
    const SimResult& result = sim.result;
    Output out(args->output);
    if (args->format == "json") write_sim_json(plan, options, result, out.stream());
    else write_sim_text(plan, options, result, out.stream());
    out.close();
    if (!result.ok()) {
      spdlog::error(
          "the plan cannot run to completion under the {} model",
          result.compute_only ? "compute-only" : std::string(to_string(options.transport)));
      return kExitInvalid;
    }
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
