// pipeplan compare: simulate several schedules on one shape, side by side.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <algorithm>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/lower_options.h"
#include "cli/sim_options.h"
#include "pipeplan/compare.h"
#include "pipeplan/emit_sim.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"

namespace pipeplan::cli {
namespace {
struct CompareArgs {
  int pp = 4, microbatches = 8, stages_per_rank = 0;
  std::vector<std::string> schedules;
  CostArgs costs;
  LoweringChoice lowering;
  MemoryArgs memory;
  std::string format = "text";
  std::string output;
};

}  // namespace

std::function<int()> setup_compare(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  add_count_option(app, "-p,--pp", args->pp, "Pipeline-parallel degree (ranks)", limits::kMaxRanks,
                   " ranks")
      ->required();
  add_count_option(app, "-m,--microbatches", args->microbatches, "Number of microbatches",
                   limits::kMaxMicrobatches, " microbatches")
      ->required();
  add_stages_per_rank_option(app, args->stages_per_rank,
                             "Stages per rank (default: each schedule's own)");
  app.add_option("--schedules", args->schedules,
                 "Schedules to compare (default: every one that accepts the shape)")
      ->delimiter(',');
  add_cost_options(app, args->costs);
  add_lowering_options(app, args->lowering);
  add_memory_options(app, args->memory);
  app.add_option("-f,--format", args->format, "Report format")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("-o,--output", args->output, "Output file (default: stdout)");
  return [args]() {
    // Refuse a shape beyond the limits up front, before planning anything.
    if (args->pp >= 1 && args->microbatches >= 1)
      if (std::string why = limits::shape_problem(args->pp, std::max(args->stages_per_rank, 1),
                                                  args->microbatches);
          !why.empty())
        throw InputError(why);
    StageCosts file;
    SimOptions options = make_sim_options(args->costs, &file);
    if (file.absolute) {
      use_rank_share(options, file);
      const CostModel& c = options.costs;
      spdlog::info("calibrated costs as one rank's share: F={:.4g} B={:.4g} I={:.4g} W={:.4g} {}",
                   c.f, c.b, c.i, c.w,
                   file.time_unit.empty() ? std::string("units") : file.time_unit);
    }
    CompareRequest request;
    request.pp_degree = args->pp;
    request.num_microbatches = args->microbatches;
    request.stages_per_rank = args->stages_per_rank;
    request.schedules = args->schedules;
    request.shape_names[0] = "-p", request.shape_names[1] = "-m", request.shape_names[2] = "-v";
    request.lowering = lowering_choice(args->lowering, args->costs);
    request.memory = memory_policy(args->memory);
    request.layers = load_layers(args->costs);
    const std::vector<ComparisonRow> rows = compare_schedules(request, options);
    Output out(args->output);
    if (args->format == "json")
      write_compare_json(args->pp, args->microbatches, options, rows, out.stream());
    else write_compare_text(args->pp, args->microbatches, options, rows, out.stream());
    out.close();
    std::size_t ran = 0, failed = 0;
    for (const auto& r : rows) {
      if (r.skipped.empty()) ++ran;
      if (r.skipped.empty() && !r.problems.empty()) ++failed;
    }
    if (ran == 0) {
      spdlog::error("{}",
                    comparison_refusal(rows, args->pp, args->microbatches, args->stages_per_rank));
      return kExitUsage;
    }
    if (failed > 0) {
      spdlog::error("{} schedule(s) cannot run to completion under the {} model", failed,
                    std::string(to_string(options.transport)));
      return kExitInvalid;
    }
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
