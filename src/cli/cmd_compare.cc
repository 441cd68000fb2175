// pipeplan compare: simulate several schedules on one shape, side by side.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sim_options.h"
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
  std::string format = "text";
  std::string output;
};

// The costs describe one rank's share of the model; a schedule with v
// stages per rank runs each stage at 1/v of them, so all do the same work.
SimOptions per_stage(SimOptions o, int v) {
  CostModel& c = o.costs;
  c.f /= v, c.b /= v, c.i /= v, c.w /= v;
  if (c.overlap) *c.overlap /= v;
  return o;
}

// A calibrated file times the stages of one measured layout; compare needs
// one rank's share: the mean stage duration times the measured stages per
// rank, for every schedule alike (per_stage divides it by each one's v).
void rank_share(SimOptions& o, const StageCosts& file) {
  CostModel& c = o.costs;
  double f = 0, b = 0, i = 0, w = 0;
  for (const auto& [stage, d] : file.stages) f += d.f, b += d.b, i += d.i, w += d.w;
  const double n = static_cast<double>(std::max<std::size_t>(1, file.stages.size()));
  const double v = std::max(1, file.stages_per_rank);
  c.f *= f / n * v, c.b *= b / n * v, c.i *= i / n * v, c.w *= w / n * v;
  c.stage_scales.clear();
  spdlog::info("calibrated costs as one rank's share: F={} B={} I={} W={} {}", c.f, c.b, c.i, c.w,
               file.time_unit.empty() ? std::string("units") : file.time_unit);
}
}  // namespace

std::function<int()> setup_compare(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  add_count_option(app, "-p,--pp", args->pp, "Pipeline-parallel degree (ranks)", limits::kMaxRanks, " ranks")
      ->required();
  add_count_option(app, "-m,--microbatches", args->microbatches, "Number of microbatches",
                   limits::kMaxMicrobatches, " microbatches")
      ->required();
  add_stages_per_rank_option(app, args->stages_per_rank, "Stages per rank (default: each schedule's own)");
  app.add_option("--schedules", args->schedules,
                 "Schedules to compare (default: every one that accepts the shape)")
      ->delimiter(',');
  add_cost_options(app, args->costs);
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
    if (file.absolute) rank_share(options, file);
    std::vector<std::string> names = args->schedules;
    if (names.empty())
      for (const auto& s : schedules()) names.push_back(s.name);
    std::vector<ComparisonRow> rows;
    for (const std::string& name : names) {
      ComparisonRow row;
      row.schedule = find_schedule(name).name;  // unknown names are usage errors
      Plan p;
      try {
        p = plan(Problem{row.schedule, args->pp, args->microbatches, args->stages_per_rank});
      } catch (const InputError& e) {
        // Shape errors start with the schedule's name; the row names it already.
        row.skipped = e.what();
        if (row.skipped.rfind(row.schedule + ": ", 0) == 0)
          row.skipped.erase(0, row.schedule.size() + 2);
        rows.push_back(row);
        continue;
      }
      row.stages_per_rank = p.meta.stages_per_rank;
      SimResult r;
      try {
        r = simulate(p, per_stage(options, p.meta.stages_per_rank));
      } catch (const InputError& e) {  // e.g. --stage-costs names stages this v lacks
        row.skipped = e.what();
        rows.push_back(row);
        continue;
      }
      row.problems = r.problems;
      row.makespan = r.makespan;
      row.bubble_fraction = r.bubble_fraction;
      row.ranks = r.ranks;
      rows.push_back(row);
    }
    sort_comparison(rows);
    Output out(args->output);
    if (args->format == "json")
      write_compare_json(args->pp, args->microbatches, options, rows, out.stream());
    else
      write_compare_text(args->pp, args->microbatches, options, rows, out.stream());
    out.close();
    std::size_t ran = 0, failed = 0;
    for (const auto& r : rows) {
      if (r.skipped.empty()) ++ran;
      if (r.skipped.empty() && !r.problems.empty()) ++failed;
    }
    if (ran == 0) {
      spdlog::error("no schedule accepts pp {} with {} microbatches{}", args->pp,
                    args->microbatches,
                    args->stages_per_rank > 0
                        ? " and " + std::to_string(args->stages_per_rank) + " stages per rank"
                        : std::string());
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
