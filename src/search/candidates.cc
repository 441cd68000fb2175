// The search's compute-only candidates (phases.h): list-scheduled orders
// over mapping, v, partition and scheduler knobs, their partitions refined,
// W passes placed anew, local improvement and the memory decisions.
#include "search/phases.h"

#include <algorithm>

#include "ir/numbers.h"
#include "model/split.h"
#include "search/climb.h"
#include "search/improve.h"
#include "search/wfill.h"

namespace pipeplan::detail {
namespace {

std::string knob_text(const GreedyKnobs& k) {
  std::string s = k.split ? "I/W split" : "B whole";
  s += k.forward_first ? ", forward-first" : ", backward-first";
  if (k.reserve) s += ", reserving a microbatch's memory";
  if (k.memory_scale < 1)
    s += ", forwards within " + detail::format_number(k.memory_scale * 100, 0) + "% of the budget";
  if (k.pace > 0)
    s += ", paced at " + detail::format_number(k.pace, 2) +
         "x the busiest rank's work per microbatch after " + std::to_string(k.burst);
  return s;
}

PlanMeta make_meta(const SearchOptions& o, const Config& c, const Partition& partition) {
  PlanMeta meta;
  meta.schedule = "search";
  meta.pp_degree = o.pp_degree;
  meta.num_microbatches = o.num_microbatches;
  meta.stages_per_rank = c.v;
  meta.mapping = c.mapping;
  meta.partition = partition;
  return meta;
}

}  // namespace

std::string config_text(const Config& c) {
  return std::string(to_string(c.mapping)) + " mapping, v=" + std::to_string(c.v);
}

std::vector<GreedyKnobs> all_knobs() {
  std::vector<GreedyKnobs> out;
  for (bool split : {true, false})
    for (bool reserve : {false, true})
      for (bool fwd : {false, true})
        for (double scale : {1.0, 0.8}) out.push_back(GreedyKnobs{split, fwd, reserve, scale});
  // Paced admission (greedy.h): fewer microbatches in flight than the budget
  // allows, each rank holding about one round trip's worth.
  for (double pace : {1.0, 1.1, 1.2})
    for (int burst : {0, 1, 2}) {
      GreedyKnobs k{true, false, false, 1.0};
      k.pace = pace;
      k.burst = burst;
      out.push_back(k);
    }
  return out;
}

std::vector<GreedyKnobs> first_pass_knobs() {
  std::vector<GreedyKnobs> out = all_knobs();
  // Paced at 1.05x too, and every pace with forwards kept within 95% of the
  // budget (a W or a later local stage's forward runs before a forward that
  // would fill the last 5%): where the budget binds, a slightly slower
  // admission or a little headroom keeps a rank from filling up and waiting.
  for (double pace : {1.0, 1.05, 1.1, 1.2})
    for (int burst : {0, 1, 2})
      for (double scale : {1.0, 0.95}) {
        if (pace != 1.05 && scale == 1.0) continue;  // in all_knobs()
        GreedyKnobs k{true, false, false, scale};
        k.pace = pace;
        k.burst = burst;
        out.push_back(k);
      }
  return out;
}

std::optional<GreedyOutcome> Search::try_one(const Config& c, const Partition& part,
                                             const GreedyKnobs& k, double limit) {
  const double estimate = kActionsPerCell * o_.pp_degree * c.v * o_.num_microbatches;
  if (!ctx_.clock.affords(estimate)) return std::nullopt;  // would end past the limit
  const double began = ctx_.clock.elapsed();
  const PlanMeta meta = make_meta(o_, c, part);
  const detail::StageTable table =
      detail::stage_table(stage_costs(profile_, part, ctx_.comm), meta.num_stages());
  ++ctx_.evaluations;
  auto outcome = detail::list_schedule(meta, table, limit, k);
  ctx_.clock.observe(estimate, ctx_.clock.elapsed() - began);
  return outcome;
}

// 2. List-scheduled candidates: every (mapping, v), a few partitions, every knob.
std::vector<Config> Search::configs() const {
  std::vector<Config> configs;
  if (fixed_v_ > 0) configs.push_back({StageMapping::Loop, fixed_v_});
  for (int v = 1; v <= o_.max_stages_per_rank && fixed_v_ == 0; ++v)
    if (v_fits(v)) configs.push_back({StageMapping::Loop, v});
  const int max_v = o_.max_v_stages_per_rank > 0
                        ? std::min(o_.max_v_stages_per_rank, o_.max_stages_per_rank)
                        : o_.max_stages_per_rank;
  for (int v = 2; v <= max_v && fixed_v_ == 0; ++v)
    if (v_fits(v)) configs.push_back({StageMapping::V, v});
  return configs;
}

void Search::list_schedule() {
  for (const Config& c : configs()) {
    if (ctx_.expired()) break;
    for (const Partition& part : partitions_for(c)) list_schedule_one(c, part);
  }
  for (const LibraryRun& run : res_.library)
    smallest_peak_ = std::min(smallest_peak_, run.peak_memory);
  for (const LibraryRun& run : res_.library_recompute)
    smallest_peak_ = std::min(smallest_peak_, run.peak_memory);
}

std::vector<Partition> Search::partitions_for(const Config& c) const {
  const int S = o_.pp_degree * c.v;
  std::vector<Partition> parts;
  if (o_.partition) {
    parts = {*o_.partition};
  } else {
    parts = {detail::split_min_max(profile_, S, detail::SplitBy::Work, expired_),
             detail::split_min_max(profile_, S, detail::SplitBy::Memory, expired_)};
    if (c.v > 1)
      parts.push_back(detail::split_rank_balanced(profile_, make_meta(o_, c, {}), expired_));
  }
  std::sort(parts.begin(), parts.end());
  parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
  return parts;
}

void Search::list_schedule_one(const Config& c, const Partition& part) {
  // The least memory this split can run in: one microbatch alive per rank.
  const double floor = detail::rank_footprint(profile_, make_meta(o_, c, part));
  if (auto g = try_one(c, part, GreedyKnobs{false, false, true, 1.0}, floor)) {
    smallest_peak_ = std::min(smallest_peak_, g->peak);
    if (ctx_.budget.fits(g->peak))
      pool_.push_back({g->plan, g->makespan, g->peak,
                       "list scheduler (" + config_text(c) + ", one microbatch in flight)"});
  }
  if (!ctx_.budget.fits(floor)) return;
  const std::size_t first = pool_.size();
  for (std::size_t ki = 0; ki < first_knobs_.size(); ++ki) {
    const GreedyKnobs& k = first_knobs_[ki];
    auto g = try_one(c, part, k, ctx_.budget.limit);
    if (!g || !ctx_.budget.fits(g->peak)) continue;
    smallest_peak_ = std::min(smallest_peak_, g->peak);
    // A first-pass-only knob adds only an order the others did not build.
    bool dup = false;
    for (std::size_t i = first; i < pool_.size() && ki >= knobs_.size() && !dup; ++i)
      dup = pool_[i].compute == g->plan;
    if (dup) continue;
    seeds_.push_back({c, part, g->makespan, k.pace > 0});
    pool_.push_back({std::move(g->plan), g->makespan, g->peak,
                     "list scheduler (" + config_text(c) + ", " + knob_text(k) + ")"});
  }
}

// 3. Move partition boundaries of the best seeds while it helps.
void Search::refine_partitions() {
  std::stable_sort(seeds_.begin(), seeds_.end(),
                   [](const Seed& a, const Seed& b) { return a.makespan < b.makespan; });
  std::vector<std::pair<int, Partition>> refined;  // (config index, partition) already climbed
  for (std::size_t si = 0;
       si < seeds_.size() && refined.size() < kClimb.starts && !ctx_.expired() && !o_.partition;
       ++si) {
    const Seed& seed = seeds_[si];
    const int key = seed.config.v * 2 + (seed.config.mapping == StageMapping::V);
    bool seen = false;
    for (const auto& [cv, part] : refined)
      if (cv == key && part == seed.partition) seen = true;
    if (seen) continue;
    refined.push_back({key, seed.partition});
    climb(seed);
  }
}

// A move is kept when some knob's order on it fits and beats the best so
// far; every knob's order that does joins the pool.
void Search::climb(const Seed& seed) {
  Partition part = seed.partition;
  double best = seed.makespan;
  climb_partition(part, kClimb.rounds, expired_, [&](const Partition& next) {
    bool improved = false;
    for (const GreedyKnobs& k : knobs_) {
      if (k.pace > 0 && !seed.paced) continue;  // pacing did not make this seed
      auto g = try_one(seed.config, next, k, ctx_.budget.limit);
      if (!g || !ctx_.budget.fits(g->peak)) continue;
      if (g->makespan < best - kEps) {
        best = g->makespan;
        improved = true;
        pool_.push_back({std::move(g->plan), g->makespan, g->peak,
                         "list scheduler (" + config_text(seed.config) + ", " + knob_text(k) +
                             ", partition refined)"});
      }
    }
    return improved;
  });
}

// 3a. The W passes of the best split orders placed anew (wfill.h): where
// they fill a wait without delaying the work behind it, or free memory.
void Search::refill_weights() {
  sort_pool();
  std::vector<Candidate> refilled;
  // False when the time limit refuses it; `c` an order whose W are placed anew.
  const auto refill = [&](const Candidate& c) {
    std::size_t actions = 0;
    for (const auto& list : c.compute.ranks) actions += list.size();
    if (!ctx_.clock.affords(static_cast<double>(actions))) return false;
    const detail::StageTable table = table_of(c.compute);
    for (double slack : {0.0, table.transfer}) {
      auto g = detail::refill_weights(c.compute, table, ctx_.budget.limit, slack);
      ++ctx_.evaluations;
      if (g && ctx_.budget.fits(g->peak) && g->makespan < c.makespan - kEps)
        refilled.push_back(
            {std::move(g->plan), g->makespan, g->peak, c.origin + ", W passes placed anew", true});
      if (table.transfer <= 0) break;
    }
    return true;
  };
  const auto split = [](const Candidate& c) {
    for (const auto& list : c.compute.ranks)
      for (const Action& a : list)
        if (a.type == ActionType::I) return true;
    return false;
  };
  // The best split orders, then every library order that fits and was not
  // among them (more list-scheduled orders must not crowd the library's
  // out: zbv's order placed anew is the best at some shapes).
  std::vector<char> tried(pool_.size(), 0);
  std::size_t n = 0;
  bool in_time = true;
  for (std::size_t i = 0; i < pool_.size() && n < kRefillSeeds && in_time; ++i) {
    if (!split(pool_[i])) continue;
    ++n;
    tried[i] = 1;
    in_time = refill(pool_[i]);
  }
  for (std::size_t i = 0; i < pool_.size() && in_time; ++i)
    if (!tried[i] && pool_[i].origin.rfind("library ", 0) == 0 && split(pool_[i]))
      in_time = refill(pool_[i]);
  for (Candidate& c : refilled) pool_.push_back(std::move(c));
}

// 3b. Local improvement of the best orders: pull ready work (a forward, a
// backward, a deferred W) into idle time or ahead of a W while the budget
// holds. The fastest library order that fits is always among the starts.
void Search::improve_locally() {
  sort_pool();
  std::vector<const Candidate*> starts;
  const std::string best_origin =
      res_.best_library
          ? library_origin(res_.best_library->schedule, res_.best_library->stages_per_rank)
          : std::string();
  for (const Candidate& c : pool_)
    if (c.origin == best_origin) starts.push_back(&c);
  // The best orders as built, then the best whose W were placed anew (a
  // re-placed order is close to its source: it gets seeds of its own).
  for (bool refilled : {false, true}) {
    const std::size_t limit = refilled ? starts.size() + kImproveRefilled : kImprove.starts;
    for (const Candidate& c : pool_) {
      if (starts.size() >= limit) break;
      if (c.refilled != refilled) continue;
      bool dup = false;
      for (const Candidate* s : starts) dup = dup || s->compute == c.compute;
      if (!dup) starts.push_back(&c);
    }
  }
  std::vector<Candidate> improved;
  for (const Candidate* c : starts) {
    if (ctx_.expired()) break;
    auto imp =
        detail::improve_within(c->compute, table_of(c->compute), ctx_.budget, kImprove.work, ctx_);
    if (imp)
      improved.push_back({std::move(imp->plan), imp->makespan, imp->peak,
                          c->origin + ", orders improved locally"});
  }
  for (Candidate& c : improved) pool_.push_back(std::move(c));
  res_.time_limited = res_.time_limited || ctx_.clock.limited();
}

// 3c. Memory decisions (search/memory.h): orders built for more memory than
// the budget (and every library order) get per (stage, microbatch) keep,
// offload or recompute so that they fit; the library with full recompute
// that fits joins them.
void Search::decide_memory() {
  ctx_.clock.hold_back(kFinalShare);
  const detail::MemoryAllowed memory = allowed();
  if (!memory.any() || ctx_.expired()) return ctx_.clock.release();
  std::vector<detail::MemorySeed> seeds;
  for (std::size_t i = 0; i < library_plans_.size(); ++i) {
    const LibraryRun& run = res_.library[i];
    if (run.fits) continue;
    seeds.push_back({library_plans_[i].meta, sim_options(run.partition),
                     compute_projection(library_plans_[i]),
                     library_origin(run.schedule, run.stages_per_rank)});
  }
  for (const Config& c : configs())
    for (const Partition& part : partitions_for(c))
      seeds.push_back({make_meta(o_, c, part), sim_options(part), Plan{},
                       "list scheduler (" + config_text(c) + ")"});
  for (detail::MemoryCandidate& c :
       detail::memory_candidates(seeds, o_.partition ? nullptr : &profile_, memory, ctx_))
    pool_.push_back({std::move(c.plan), c.makespan, c.peak, std::move(c.origin), false});
  for (std::size_t i = 0; i < recompute_plans_.size(); ++i) {
    const LibraryRun& run = res_.library_recompute[i];
    if (run.fits)
      pool_.push_back({compute_projection(recompute_plans_[i]), run.makespan, run.peak_memory,
                       library_origin(run.schedule, run.stages_per_rank) + ", full recompute",
                       false});
  }
  res_.time_limited = res_.time_limited || ctx_.clock.limited();
  ctx_.clock.release();
}

// Nothing fits, memory actions included: say what would.
void Search::require_candidates() {
  if (pool_.empty()) {
    const std::string smallest = detail::format_number(smallest_peak_, 4);
    // The number is the least peak of the plans built without a budget to
    // fit (orders and full-recompute library plans); memory actions fitted to
    // a budget can go below it, so where they are allowed the message says so.
    const std::string below =
        allowed().any() ? "; recompute or offload fitted to a budget may also make a smaller "
                          "one work"
                        : "";
    throw BudgetError("no plan fits the memory budget " +
                          detail::format_number(ctx_.budget.limit, 4) +
                          " per rank; the smallest budget that works is " + smallest +
                          " (--memory-limit " + smallest + ") of the plans tried" + below,
                      smallest_peak_);
  }
}

}  // namespace pipeplan::detail
