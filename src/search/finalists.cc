// The search's last phases (phases.h): the best candidates lowered,
// simulated under the user's transport and verified under all three; the
// library's best kept or refined; the exact search on tiny shapes; the
// winner's figures and the lower bound.
#include "search/phases.h"

#include <algorithm>

#include "pipeplan/lower.h"
#include "pipeplan/verify.h"
#include "search/exact.h"
#include "search/refine.h"

namespace pipeplan::detail {
namespace {

// The lowerings tried for a candidate: latency hiding for its stage costs
// (planner.h's planning_costs: the nominal latency when transfers are free),
// and the seed order (which reads per-type costs only: the stage averages)
// with either send placement; each with and without serial safety.
std::vector<LowerOptions> lowerings_for(const CostModel& stage, const detail::StageTable& t) {
  std::vector<LowerOptions> out;
  for (bool safe : {false, true}) {
    LowerOptions lo;
    lo.mode = LowerMode::LatencyHiding;
    lo.costs = planning_costs(stage);
    lo.serial_safe = safe;
    out.push_back(lo);
  }
  const double n = static_cast<double>(t.f.size());
  double f = 0, b = 0, i = 0, w = 0;
  for (std::size_t s = 0; s < t.f.size(); ++s) f += t.f[s], b += t.b[s], i += t.i[s], w += t.w[s];
  for (SendPlacement sp : {SendPlacement::Earliest, SendPlacement::ParityStaggered})
    for (bool safe : {false, true}) {
      LowerOptions lo;
      lo.mode = LowerMode::Seed;
      lo.send_placement = sp;
      lo.serial_safe = safe;
      if (n > 0 && f > 0) {
        lo.costs.f = f / n;
        lo.costs.b = std::max(b / n, kEps);
        lo.costs.i = std::max(i / n, kEps);
        lo.costs.w = std::max(w / n, kEps);
      }
      out.push_back(lo);
    }
  return out;
}

bool verifies_everywhere(const Plan& plan) {
  for (const TransportModel& t : kTransportModels)
    if (!verify(plan, VerifyOptions{t.id, 1}).ok()) return false;
  return true;
}

}  // namespace

// 4. Lower the finalists, simulate them under the user's transport, keep
// the fastest that verifies under all three.
void Search::lower_finalists() {
  sort_pool();
  std::vector<const Candidate*> finalists;
  for (const Candidate& c : pool_) {
    bool dup = false;
    for (const Candidate* f : finalists) dup = dup || f->compute == c.compute;
    if (!dup) finalists.push_back(&c);
    if (finalists.size() >= kFinalists) break;
  }
  keep_best_library();
  refine_library_partitions();
  for (const Candidate* c : finalists) {
    if (found_ && ctx_.expired()) break;  // a verified plan is in hand
    const Partition& part = c->compute.meta.partition;
    for (const LowerOptions& lo : lowerings_for(sim_options(part).costs, table_of(c->compute))) {
      if (found_ && ctx_.expired()) break;
      Plan lowered = lower(c->compute, lo);
      const SimResult r = simulate(lowered, sim_options(part));
      ++ctx_.evaluations;
      if (!r.ok() || (found_ && r.makespan >= res_.makespan - kEps)) continue;
      if (lowered.has_memory_actions() && !ctx_.budget.fits(r)) continue;  // copies moved
      if (!verifies_everywhere(lowered)) continue;
      offer(std::move(lowered), r.makespan, c->origin);
    }
  }
  if (!found_) throw InternalError("search: no finalist could be lowered and verified");
}

// The best library plan that fits, with the library's own lowering.
void Search::keep_best_library() {
  const auto& best = res_.best_library;
  for (std::size_t i = 0; i < library_plans_.size(); ++i)
    if (res_.library[i].fits && best && res_.library[i].schedule == best->schedule &&
        res_.library[i].stages_per_rank == best->stages_per_rank &&
        verifies_everywhere(library_plans_[i]))
      offer(library_plans_[i], best->makespan,
            library_origin(best->schedule, best->stages_per_rank));
}

// The fastest library plans that fit keep their order (and lowering) with
// a partition fitted to them: better on uneven profiles, never worse.
void Search::refine_library_partitions() {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < library_plans_.size(); ++i)
    if (res_.library[i].fits) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return res_.library[a].makespan < res_.library[b].makespan - kEps;
  });
  SimOptions so;
  so.costs = ctx_.comm;
  so.transport = o_.transport;
  for (std::size_t k = 0;
       k < order.size() && k < kLibraryRefine.starts && !ctx_.expired() && !o_.partition; ++k) {
    const Plan& lib = library_plans_[order[k]];
    if (!verifies_everywhere(lib)) continue;
    auto refined = detail::refine_partition(lib, profile_, so, ctx_);
    if (!refined || (found_ && refined->makespan >= res_.makespan - kEps)) continue;
    const LibraryRun& run = res_.library[order[k]];
    offer(std::move(refined->plan), refined->makespan,
          library_origin(run.schedule, run.stages_per_rank) + ", partition refined");
  }
}

// 7. Tiny shapes: the exhaustive search, from the heuristic's plan as the
// incumbent; a faster schedule it finds is lowered like the finalists and
// returned when it verifies everywhere and is no slower under --model.
void Search::solve_exactly() {
  // The exact search covers orders without memory actions only, of
  // microbatches that cost the same (its tables hold one cost per stage).
  if (!o_.exact || o_.partition || res_.plan.has_memory_actions() || ctx_.comm.variable_lengths() ||
      !detail::exact_is_tiny(profile_, o_))
    return;
  // The exact search works in the compute-only model: compare like with like.
  const double value =
      simulate(compute_projection(res_.plan), sim_options(res_.plan.meta.partition)).makespan;
  Plan best;
  res_.exact = detail::exact_search(profile_, o_, ctx_.budget.limit, value, expired_, &best);
  if (!res_.exact->complete && ctx_.expired()) res_.time_limited = true;
  if (best.ranks.empty()) return;
  const Partition part = best.meta.partition;
  const std::string origin = "exact branch and bound (" +
                             config_text({best.meta.mapping, best.meta.stages_per_rank}) + ")";
  for (const LowerOptions& lo : lowerings_for(sim_options(part).costs, table_of(best))) {
    Plan lowered = lower(best, lo);
    const SimResult r = simulate(lowered, sim_options(part));
    ++ctx_.evaluations;
    // Ties go to the exact plan: it is the faster one in the compute-only model.
    const double to_beat = res_.exact->returned ? res_.makespan - kEps : res_.makespan + kEps;
    if (!r.ok() || r.makespan > to_beat || !verifies_everywhere(lowered)) continue;
    offer(std::move(lowered), r.makespan, origin);
    res_.exact->returned = true;
  }
}

// The winner's own figures, the lower bound and (tiny models) the exact search.
void Search::finish() {
  const SimResult final_run = simulate(res_.plan, sim_options(res_.plan.meta.partition));
  res_.makespan = final_run.makespan;
  for (const RankStats& s : final_run.ranks) res_.rank_peak_memory.push_back(s.peak_memory);
  res_.peak_memory = max_peak(final_run);
  for (const auto& list : res_.plan.ranks)
    for (const Action& a : list) {
      res_.recomputed += a.type == ActionType::Recompute;
      res_.offloaded += a.type == ActionType::Offload;
    }
  res_.lower_bound = makespan_lower_bound(profile_, o_.pp_degree, ctx_.comm, o_.num_microbatches,
                                          &res_.lower_bound_reason, ctx_.budget.limit,
                                          {allowed().recompute, allowed().offload});
}

}  // namespace pipeplan::detail
