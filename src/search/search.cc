// search(): library baselines, then list-scheduled candidates over mapping,
// v, partition and scheduler knobs, refined by moving partition boundaries;
// the best few are lowered, simulated under the user's transport and
// verified under all three. A client of the passes: planner (library
// orders), lower, verify and simulate, never a copy of them.
#include "pipeplan/search.h"

#include <algorithm>

#include "pipeplan/limits.h"
#include "search/phases.h"

namespace pipeplan::detail {
namespace {

// The share of the time limit held back for the memory decisions (step 3c)
// when memory actions are allowed: the phases before it stop earlier, so a
// loaded machine still decides memory where orders do not fit.
constexpr double kMemoryShare = 0.3;

}  // namespace

Search::Search(const LayerProfile& profile, const SearchOptions& o, int fixed_v)
    : profile_(profile), o_(o), fixed_v_(fixed_v), clock_(o.time_limit) {
  comm_.comm_latency = o.comm.comm_latency;
  comm_.comm_bandwidth = o.comm.comm_bandwidth;
  comm_.transfer_bytes = o.comm.transfer_bytes;
  comm_.host_bandwidth = o.comm.host_bandwidth;
  comm_.host_latency = o.comm.host_latency;
}

SearchResult Search::run() {
  if (allowed().any()) clock_.hold_back(kMemoryShare);
  run_library();
  choose_budget();
  list_schedule();
  refine_partitions();
  res_.time_limited = clock_.limited();
  add_library_orders();
  refill_weights();
  improve_locally();
  decide_memory();
  require_candidates();
  lower_finalists();
  solve_exactly();
  finish();
  return std::move(res_);
}

// A stage needs a layer, and the plan must stay within the size limits.
bool Search::v_fits(int v) const {
  return static_cast<std::size_t>(o_.pp_degree) * static_cast<std::size_t>(v) <= profile_.size() &&
         limits::shape_problem(o_.pp_degree, v, o_.num_microbatches).empty();
}

SimOptions Search::sim_options(const Partition& partition) const {
  SimOptions so;
  so.costs = stage_costs(profile_, partition, comm_);
  so.transport = o_.transport;
  return so;
}

detail::StageTable Search::table_of(const Plan& compute) const {
  return detail::stage_table(stage_costs(profile_, compute.meta.partition, comm_),
                             compute.meta.num_stages());
}

void Search::sort_pool() {
  std::stable_sort(pool_.begin(), pool_.end(), [](const Candidate& a, const Candidate& b) {
    return a.makespan < b.makespan - kEps;
  });
}

// Keeps `plan` when it beats the best so far.
void Search::offer(Plan plan, double makespan, std::string origin) {
  res_.plan = std::move(plan);
  res_.makespan = makespan;
  res_.origin = std::move(origin);
  found_ = true;
}

detail::MemoryAllowed Search::allowed() const {
  return {o_.recompute, o_.offload && comm_.host_bandwidth > 0};
}

MemoryPolicy Search::full_recompute() {
  MemoryPolicy p;
  p.recompute.all = true;
  return p;
}

bool Search::within_budget(const SimResult& r) const {
  for (const RankStats& s : r.ranks)
    if (s.peak_memory > budget_ + kEps) return false;
  return true;
}

}  // namespace pipeplan::detail

namespace pipeplan {

SearchResult search(const LayerProfile& profile, const SearchOptions& o) {
  const int fixed_v = detail::check_options(profile, o);
  return detail::Search(profile, o, fixed_v).run();
}

}  // namespace pipeplan
