// search(): library baselines, then list-scheduled candidates over mapping,
// v, partition and scheduler knobs, refined by moving partition boundaries;
// the best few are lowered, simulated under the user's transport and
// verified under all three. A client of the passes: planner (library
// orders), lower, verify and simulate, never a copy of them.
#include "pipeplan/search.h"

#include <algorithm>
#include <numeric>

#include "pipeplan/limits.h"
#include "pipeplan/lower.h"
#include "pipeplan/step.h"
#include "search/phases.h"

namespace pipeplan::detail {

Search::Search(const LayerProfile& profile, const SearchOptions& o, int fixed_v)
    : profile_(profile), o_(o), fixed_v_(fixed_v), ctx_(o.time_limit) {
  CostModel& comm = ctx_.comm;
  comm.comm_latency = o.comm.comm_latency;
  comm.comm_bandwidth = o.comm.comm_bandwidth;
  comm.transfer_bytes = o.comm.transfer_bytes;
  comm.host_bandwidth = o.comm.host_bandwidth;
  comm.host_latency = o.comm.host_latency;
  // Microbatch lengths (docs/lengths.md): every plan is simulated at them.
  comm.take_lengths(o.comm);
}

SearchResult Search::run() {
  if (allowed().any()) ctx_.clock.hold_back(kMemoryShare);
  run_library();
  choose_budget();
  list_schedule();
  refine_partitions();
  res_.time_limited = ctx_.clock.limited();
  add_library_orders();
  refill_weights();
  improve_locally();
  decide_memory();
  require_candidates();
  lower_finalists();
  solve_exactly();
  finish();
  res_.candidates = ctx_.evaluations;
  return std::move(res_);
}

// A stage needs a layer, and the plan must stay within the size limits.
bool Search::v_fits(int v) const {
  return static_cast<std::size_t>(o_.pp_degree) * static_cast<std::size_t>(v) <= profile_.size() &&
         limits::shape_problem(o_.pp_degree, v, o_.num_microbatches).empty();
}

SimOptions Search::sim_options(const Partition& partition) const {
  SimOptions so;
  so.costs = stage_costs(profile_, partition, ctx_.comm);
  so.transport = o_.transport;
  return so;
}

detail::StageTable Search::table_of(const Plan& compute) const {
  return detail::stage_table(stage_costs(profile_, compute.meta.partition, ctx_.comm),
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
  return {o_.recompute, o_.offload && ctx_.comm.host_bandwidth > 0};
}

MemoryPolicy Search::full_recompute() {
  MemoryPolicy p;
  p.recompute.all = true;
  return p;
}

}  // namespace pipeplan::detail

namespace pipeplan {

double default_transfer_latency(const LayerProfile& profile) {
  double f = 0.0;
  for (const Layer& l : profile.layers) f += l.f;
  return profile.size() == 0 ? 0.0 : kNominalLatency * f / static_cast<double>(profile.size());
}

CostModel search_costs(const LayerProfile& profile, const SearchOptions& o) {
  CostModel c = o.comm;
  if (!o.transfer_cost_stated && c.transfer_time() == 0.0) {
    c.comm_latency = default_transfer_latency(profile);
    c.comm_bandwidth = 0.0;
  }
  return c;
}

namespace {

// search() at the stated costs: with microbatches of different lengths, the
// order for the step is chosen first by the per-step path (library
// schedules x order rules, simulated), then searched at that order.
SearchResult search_in_order(const LayerProfile& profile, const SearchOptions& o, int fixed_v) {
  if (!o.comm.variable_lengths() || o.keep_order) {
    SearchResult r = detail::Search(profile, o, fixed_v).run();
    r.microbatch_order.resize(o.comm.microbatch_tokens.size());
    std::iota(r.microbatch_order.begin(), r.microbatch_order.end(), 0);
    return r;
  }
  StepRequest step;
  step.pp_degree = o.pp_degree;
  step.lengths = o.comm.microbatch_tokens;
  step.layers = profile;
  step.costs = o.comm;
  step.costs.microbatch_tokens.clear(), step.costs.length_ratio.clear();
  step.costs.square_ratio.clear(), step.costs.microbatch_sequences.clear();
  step.transport = o.transport;
  std::vector<int> order(o.comm.microbatch_tokens.size());
  std::iota(order.begin(), order.end(), 0);
  try {
    order = plan_step(step).microbatch_order;
  } catch (const InputError&) {
    // No library schedule takes the shape: the arrival order.
  }
  SearchOptions ordered = o;
  if (o.comm.microbatch_sequences.empty()) {
    std::vector<double> tokens;
    for (int k : order) tokens.push_back(o.comm.microbatch_tokens[static_cast<std::size_t>(k)]);
    ordered.comm.set_lengths(std::move(tokens), o.comm.stated_tokens);
  } else {
    std::vector<std::vector<double>> sequences;
    for (int k : order)
      sequences.push_back(o.comm.microbatch_sequences[static_cast<std::size_t>(k)]);
    ordered.comm.set_sequences(std::move(sequences), o.comm.stated_tokens);
  }
  SearchResult r = detail::Search(profile, ordered, fixed_v).run();
  r.microbatch_order = std::move(order);
  return r;
}

}  // namespace

SearchResult search(const LayerProfile& profile, const SearchOptions& o) {
  const int fixed_v = detail::check_options(profile, o);
  o.comm.check_lengths(o.num_microbatches);
  // Every phase (library baselines, candidates, bound, exact search, the
  // order for the step) sees the one cost the report states.
  SearchOptions charged = o;
  charged.comm = search_costs(profile, o);
  charged.transfer_cost_stated = true;
  SearchResult r = search_in_order(profile, charged, fixed_v);
  r.transfer_time = charged.comm.transfer_time();
  r.transfer_cost_default = charged.comm.comm_latency != o.comm.comm_latency;
  return r;
}

SearchResult search_sequences(const LayerProfile& profile, SearchOptions o,
                              const std::vector<double>& sequences, double microbatch_tokens) {
  StepRequest step;
  step.pp_degree = o.pp_degree;
  step.sequences = sequences;
  step.microbatch_tokens = microbatch_tokens;
  step.layers = profile;
  step.costs = search_costs(profile, o);  // the messages the search will charge
  step.transport = o.transport;
  step.memory_limit = o.memory_limit;
  const StepPlan chosen = plan_step(step);
  o.num_microbatches = static_cast<int>(chosen.microbatches.size());
  // Stated at a full microbatch unless the profile states its length, as
  // the packings were compared (plan_step).
  o.comm.set_sequences(packed_tokens(sequences, chosen.microbatches), microbatch_tokens);
  o.keep_order = true;  // chosen with the packing
  SearchResult r = search(profile, o);
  r.microbatch_order = chosen.microbatch_order;
  r.microbatches = chosen.microbatches;
  r.first_fit_makespan = chosen.first_fit_makespan;
  return r;
}

}  // namespace pipeplan
