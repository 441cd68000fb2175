// Side-by-side comparison of schedules: every schedule on one shape through
// the planner and the simulator (compare_schedules), and the rows' order. A
// client of the passes, as `pipeplan compare` and the Python module run it.
#include "pipeplan/compare.h"

#include <algorithm>

#include "ir/numbers.h"
#include "pipeplan/error.h"
#include "pipeplan/lower.h"
#include "pipeplan/memory_policy.h"

namespace pipeplan {
namespace {

using detail::tidy;

int group(const ComparisonRow& r) { return !r.skipped.empty() ? 2 : !r.problems.empty() ? 1 : 0; }

// The costs describe one rank's share of the model; a schedule whose
// microbatches cross v stages per rank runs each stage at 1/v of them, so
// all do the same work (v = stages per rank, or for a routed plan such as
// DualPipe, whose microbatches cross p of its 2p stages, the stages a route
// crosses over p).
SimOptions per_stage(SimOptions o, double v) {
  CostModel& c = o.costs;
  c.f /= v, c.b /= v, c.i /= v, c.w /= v;
  if (c.overlap) *c.overlap /= v;
  return o;
}

// Why a schedule cannot run the request's shape, as its row says it (shape
// errors name the request's spelling of p, m and v; the row names the
// schedule already).
std::string skip_reason(const InputError& e, const ComparisonRow& row,
                        const CompareRequest& request) {
  const auto* shape = dynamic_cast<const ShapeError*>(&e);
  std::string why =
      shape ? shape->message(request.shape_names[0], request.shape_names[1], request.shape_names[2])
            : std::string(e.what());
  if (why.rfind(row.schedule + ": ", 0) == 0) why.erase(0, row.schedule.size() + 2);
  return why;
}

// One schedule planned and simulated: the plan is lowered for the costs it
// is simulated with (a layer profile's stage sums when there is one, else
// one rank's share split over its v stages).
void run_row(ComparisonRow& row, const CompareRequest& request, const SimOptions& options) {
  Plan p;
  SimOptions simulated = options;
  try {
    const Planner planner(Problem{row.schedule, request.pp_degree, request.num_microbatches,
                                  request.stages_per_rank});
    if (request.layers) {
      row.partition = partition_for(*request.layers, planner.meta());
      simulated.costs = stage_costs(*request.layers, row.partition, options.costs);
    } else {
      const PlanMeta& meta = planner.meta();
      const Route route = meta.route_of(0);
      simulated = per_stage(options, meta.has_routes()
                                         ? static_cast<double>(route.last - route.first + 1) /
                                               meta.pp_degree
                                         : meta.stages_per_rank);
    }
    p = lower(apply_memory_policy(planner.compute(), request.memory),
              planner.lowering(request.lowering, simulated.costs));
  } catch (const InputError& e) {
    row.partition.clear();
    row.skipped = skip_reason(e, row, request);
    return;
  }
  row.stages_per_rank = p.meta.stages_per_rank;
  SimResult r;
  try {
    r = simulate(p, simulated);
  } catch (const InputError& e) {  // e.g. stage costs name stages this v lacks
    row.skipped = e.what();
    return;
  }
  row.problems = r.problems;
  row.makespan = r.makespan;
  row.bubble_fraction = r.bubble_fraction;
  row.ranks = r.ranks;
}

}  // namespace

double ComparisonRow::peak_rank_activations() const {
  double peak = 0;
  for (const RankStats& r : ranks) peak = std::max(peak, r.peak_rank_activations);
  return peak;
}

double ComparisonRow::peak_memory() const {
  double peak = 0;
  for (const RankStats& r : ranks) peak = std::max(peak, r.peak_memory);
  return peak;
}

void sort_comparison(std::vector<ComparisonRow>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const ComparisonRow& a, const ComparisonRow& b) {
    if (group(a) != group(b)) return group(a) < group(b);
    if (group(a) == 0 && tidy(a.makespan) != tidy(b.makespan)) return a.makespan < b.makespan;
    return false;
  });
}

void use_rank_share(SimOptions& options, const StageCosts& file) {
  CostModel& c = options.costs;
  double f = 0, b = 0, i = 0, w = 0;
  for (const auto& [stage, d] : file.stages) f += d.f, b += d.b, i += d.i, w += d.w;
  const double n = static_cast<double>(std::max<std::size_t>(1, file.stages.size()));
  const double v = std::max(1, file.stages_per_rank);
  c.f *= f / n * v, c.b *= b / n * v, c.i *= i / n * v, c.w *= w / n * v;
  c.stage_scales.clear();
}

std::vector<ComparisonRow> compare_schedules(const CompareRequest& request,
                                             const SimOptions& options) {
  check_lowering_choice(request.lowering);  // not a reason to skip every row
  std::vector<std::string> names = request.schedules;
  if (names.empty())
    for (const auto& s : schedules()) names.push_back(s.name);
  std::vector<ComparisonRow> rows;
  for (const std::string& name : names) {
    ComparisonRow row;
    row.schedule = find_schedule(name).name;  // unknown names are input errors
    run_row(row, request, options);
    rows.push_back(std::move(row));
  }
  sort_comparison(rows);
  return rows;
}

std::string comparison_refusal(const std::vector<ComparisonRow>& rows, int pp_degree,
                               int num_microbatches, int stages_per_rank) {
  if (rows.empty()) return "no schedule to compare";
  for (const ComparisonRow& r : rows)
    if (r.skipped.empty()) return {};
  const bool shared = std::all_of(rows.begin(), rows.end(), [&](const ComparisonRow& r) {
    return r.skipped == rows.front().skipped;
  });
  if (shared && rows.size() > 1) return "no schedule ran: " + rows.front().skipped;
  return "no schedule accepts pp " + std::to_string(pp_degree) + " with " +
         std::to_string(num_microbatches) + " microbatches" +
         (stages_per_rank > 0 ? " and " + std::to_string(stages_per_rank) + " stages per rank"
                              : std::string());
}

}  // namespace pipeplan
