// The search's first phases (phases.h): the option checks, the library
// baselines on the same profile and the memory budget they set.
#include "search/phases.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/numbers.h"
#include "model/split.h"
#include "pipeplan/limits.h"
#include "pipeplan/lower.h"

namespace pipeplan::detail {
namespace {

// 1F1B's peak memory on the balanced partition: the default budget.
template <typename SimFor>
double one_f_one_b_peak(const LayerProfile& profile, const SearchOptions& o,
                        const SimFor& sim_for) {
  try {
    const Problem problem{"1f1b", o.pp_degree, o.num_microbatches, 1};
    const Partition part = balanced_partition(profile, o.pp_degree);
    const SimResult r = simulate(plan(problem), sim_for(part));
    if (r.ok()) return max_peak(r);
  } catch (const InputError&) {
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace

// search()'s refusals, before any work: bad shapes, limits, budgets. Returns
// the v of a given partition (0: none given).
int check_options(const LayerProfile& profile, const SearchOptions& o) {
  if (o.pp_degree < 1 || o.num_microbatches < 1) throw InputError("search needs p >= 1 and m >= 1");
  // The shared size limits: refuse up front; larger v are skipped below.
  if (std::string why = limits::shape_problem(o.pp_degree, 1, o.num_microbatches); !why.empty())
    throw ShapeError(why);
  if (o.max_v_stages_per_rank < 0 || o.max_v_stages_per_rank > limits::kMaxStagesPerRank)
    throw InputError("the largest v tried for the V mapping must be 0.." +
                     std::to_string(limits::kMaxStagesPerRank) + ", got " +
                     std::to_string(o.max_v_stages_per_rank));
  if (o.max_stages_per_rank < 1 || o.max_stages_per_rank > limits::kMaxStagesPerRank)
    throw InputError("the largest v tried must be 1.." + std::to_string(limits::kMaxStagesPerRank) +
                     ", got " + std::to_string(o.max_stages_per_rank));
  if (profile.size() < static_cast<std::size_t>(o.pp_degree))
    throw ShapeError("the layer profile has " + std::to_string(profile.size()) +
                     " layers, fewer than the " + std::to_string(o.pp_degree) +
                     " ranks (every rank needs a stage of at least one layer)");
  if (o.memory_limit && (!std::isfinite(*o.memory_limit) || *o.memory_limit <= 0))
    throw InputError("the memory limit must be a positive number, got " +
                     detail::format_number(*o.memory_limit));
  if (!(o.time_limit > 0) || !(o.time_limit <= limits::kMaxTimeLimit))
    throw InputError("the time limit must be a positive number of seconds up to " +
                     detail::format_number(limits::kMaxTimeLimit) + ", got " +
                     detail::format_number(o.time_limit));
  int fixed_v = 0;
  if (o.partition) {
    const int stages = static_cast<int>(o.partition->size());
    if (stages % o.pp_degree != 0)
      throw InputError("the given partition has " + std::to_string(stages) +
                       " stages, not a multiple of the " + std::to_string(o.pp_degree) + " ranks");
    check_partition(profile, *o.partition, stages);
    fixed_v = stages / o.pp_degree;
    if (std::string why = limits::shape_problem(o.pp_degree, fixed_v, o.num_microbatches);
        !why.empty())
      throw ShapeError(why);
  }
  // The least a search does: one plan built, simulated, verified under three
  // transports. Refused when even that cannot end in time on a fast machine.
  const double least_actions = kActionsPerCell * static_cast<double>(o.pp_degree) *
                               std::max(fixed_v, 1) * o.num_microbatches;
  if (least_actions * kFastSecondsPerAction > o.time_limit)
    throw InputError("the time limit " + detail::format_number(o.time_limit) +
                     " s is too short for p " + std::to_string(o.pp_degree) + " and m " +
                     std::to_string(o.num_microbatches) + ": one candidate plan holds up to " +
                     detail::format_number(least_actions / 1e6, 1) +
                     "M actions, and building, simulating and verifying it takes at least " +
                     detail::format_number(least_actions * kFastSecondsPerAction, 1) +
                     " s; give a longer --time-limit");
  return fixed_v;
}

std::string library_origin(const std::string& schedule, int v) {
  return "library " + schedule + " (v=" + std::to_string(v) + ")";
}

// 1. The library on the same profile (balanced partitions), as compare runs it.
void Search::run_library() {
  for (const ScheduleInfo& info : schedules()) {
    if (ctx_.clock.expired()) break;  // a huge shape: the baseline stays partial
    // A schedule with microbatch routes (dualpipe) holds the model twice: its
    // stages are not a split of one model, so the profile split and the
    // search's bound do not describe it.
    if (info.routes) continue;
    std::vector<int> vs = info.allowed_stages_per_rank;
    if (vs.empty())
      for (int v = 1; v <= o_.max_stages_per_rank; ++v) vs.push_back(v);
    if (fixed_v_ > 0)
      vs = std::count(vs.begin(), vs.end(), fixed_v_) ? std::vector<int>{fixed_v_}
                                                      : std::vector<int>{};
    for (int v : vs)
      if (v_fits(v)) {
        run_library_one(info, v, {}, res_.library, library_plans_);
        if (allowed().recompute)
          run_library_one(info, v, full_recompute(), res_.library_recompute, recompute_plans_);
      }
  }
}

void Search::run_library_one(const ScheduleInfo& info, int v, const MemoryPolicy& memory,
                             std::vector<LibraryRun>& runs, std::vector<Plan>& plans) {
  // After the first baseline, only those that can end in time.
  const double estimate = kActionsPerCell * o_.pp_degree * v * o_.num_microbatches;
  if (!res_.library.empty() && !ctx_.clock.affords(estimate)) return;
  const double began = ctx_.clock.elapsed();
  Plan p;
  LibraryRun run;
  run.schedule = info.name;
  run.stages_per_rank = v;
  try {
    const Planner planner(Problem{info.name, o_.pp_degree, o_.num_microbatches, v});
    const PlanMeta& meta = planner.meta();
    if (fixed_v_ > 0 && meta.mapping != StageMapping::Loop) return;
    if (meta.mapping == StageMapping::V && o_.max_v_stages_per_rank > 0 &&
        v > o_.max_v_stages_per_rank)
      return;
    run.partition = o_.partition ? *o_.partition
                                 : detail::split_min_max(profile_, meta.num_stages(),
                                                         detail::SplitBy::Work, expired_);
    // Lowered as compare lowers it: the schedule's own options, planning
    // for the stage costs it is simulated with.
    p = lower(apply_memory_policy(planner.compute(), memory),
              planner.lowering({}, sim_options(run.partition).costs));
  } catch (const InputError&) {
    return;  // the schedule rejects this shape
  }
  const SimResult r = simulate(p, sim_options(run.partition));
  ctx_.clock.observe(static_cast<double>(p.num_actions()), ctx_.clock.elapsed() - began);
  ++ctx_.evaluations;
  if (!r.ok()) return;
  run.makespan = r.makespan;
  run.peak_memory = max_peak(r);
  p.meta.partition = run.partition;
  runs.push_back(run);
  plans.push_back(std::move(p));
}

// The memory budget: the one given, else what 1F1B (or, on a given layout,
// the order Megatron runs on it) needs; which library runs fit it.
void Search::choose_budget() {
  double& budget = ctx_.budget.limit;
  budget = std::numeric_limits<double>::infinity();
  if (o_.memory_limit) {
    budget = *o_.memory_limit;
  } else if (fixed_v_ > 0) {
    // A given layout: the memory of the order Megatron runs on it (1F1B, or
    // interleaved 1F1B for v > 1), else 1F1B's on the balanced partition.
    const std::string own = fixed_v_ > 1 ? "interleaved-1f1b" : "1f1b";
    budget =
        one_f_one_b_peak(profile_, o_, [this](const Partition& part) { return sim_options(part); });
    for (const LibraryRun& run : res_.library)
      if (run.schedule == own) budget = run.peak_memory;
  } else {
    for (const LibraryRun& run : res_.library)
      if (run.schedule == "1f1b") budget = run.peak_memory;
  }
  res_.memory_limit = budget;
  for (LibraryRun& run : res_.library) {
    run.fits = ctx_.budget.fits(run.peak_memory);
    if (run.fits && (!res_.best_library || run.makespan < res_.best_library->makespan - kEps))
      res_.best_library = run;
  }
  for (LibraryRun& run : res_.library_recompute) {
    run.fits = ctx_.budget.fits(run.peak_memory);
    if (run.fits && (!res_.best_library_recompute ||
                     run.makespan < res_.best_library_recompute->makespan - kEps))
      res_.best_library_recompute = run;
  }
}

// Library orders that fit join the pool (their own lowering is tried too).
void Search::add_library_orders() {
  for (std::size_t i = 0; i < library_plans_.size(); ++i) {
    const LibraryRun& run = res_.library[i];
    if (!run.fits) continue;
    pool_.push_back({compute_projection(library_plans_[i]), run.makespan, run.peak_memory,
                     library_origin(run.schedule, run.stages_per_rank)});
  }
}

}  // namespace pipeplan::detail
