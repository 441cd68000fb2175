// compare_schedules: every schedule on one shape through the simulator. A
// client of the passes (planner, lower, simulate), as `pipeplan compare` and
// the Python module run it.
#include "pipeplan/cost_options.h"
#include "pipeplan/error.h"
#include "pipeplan/planner.h"

namespace pipeplan {
namespace {

// The costs describe one rank's share of the model; a schedule with v
// stages per rank runs each stage at 1/v of them, so all do the same work.
SimOptions per_stage(SimOptions o, int v) {
  CostModel& c = o.costs;
  c.f /= v, c.b /= v, c.i /= v, c.w /= v;
  if (c.overlap) *c.overlap /= v;
  return o;
}

}  // namespace

std::vector<ComparisonRow> compare_schedules(const CompareRequest& request,
                                             const SimOptions& options) {
  std::vector<std::string> names = request.schedules;
  if (names.empty())
    for (const auto& s : schedules()) names.push_back(s.name);
  std::vector<ComparisonRow> rows;
  for (const std::string& name : names) {
    ComparisonRow row;
    row.schedule = find_schedule(name).name;  // unknown names are input errors
    Plan p;
    try {
      const Problem problem{row.schedule, request.pp_degree, request.num_microbatches,
                            request.stages_per_rank};
      const PlanMeta meta = resolve(problem);
      // Lowered for the per-stage costs it is simulated with (a layer
      // profile's stage sums when there is one).
      LoweringChoice choice;
      choice.mode = request.lowering;
      choice.max_prefetch = request.max_prefetch;
      choice.serial_safe = request.serial_safe;
      const CostModel planned =
          request.layers
              ? stage_costs(*request.layers, partition_for(*request.layers, meta), options.costs)
              : per_stage(options, meta.stages_per_rank).costs;
      const LowerOptions lowering = make_lower_options(meta, choice, planned, /*comm_given=*/false);
      p = plan(problem, lowering);
    } catch (const InputError& e) {
      // Shape errors start with the schedule's name; the row names it already.
      const auto* shape = dynamic_cast<const ShapeError*>(&e);
      row.skipped = shape ? shape->message(request.shape_names[0], request.shape_names[1],
                                           request.shape_names[2])
                          : std::string(e.what());
      if (row.skipped.rfind(row.schedule + ": ", 0) == 0)
        row.skipped.erase(0, row.schedule.size() + 2);
      rows.push_back(row);
      continue;
    }
    row.stages_per_rank = p.meta.stages_per_rank;
    SimResult r;
    try {
      SimOptions o = options;
      if (request.layers) {
        row.partition = partition_for(*request.layers, p.meta);
        o.costs = stage_costs(*request.layers, row.partition, options.costs);
      } else {
        o = per_stage(options, p.meta.stages_per_rank);
      }
      r = simulate(p, o);
    } catch (const InputError& e) {  // e.g. stage costs name stages this v lacks,
                                     // or the profile has fewer layers than stages
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
  return rows;
}

}  // namespace pipeplan
