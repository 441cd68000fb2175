// search(): library baselines, then list-scheduled candidates over mapping,
// v, partition and scheduler knobs, refined by moving partition boundaries;
// the best few are lowered, simulated under the user's transport and
// verified under all three. A client of the passes: planner (library
// orders), lower, verify and simulate, never a copy of them.
#include "pipeplan/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>

#include "ir/numbers.h"
#include "model/split.h"
#include "pipeplan/limits.h"
#include "pipeplan/lower.h"
#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"
#include "search/exact.h"
#include "search/greedy.h"
#include "search/improve.h"
#include "search/memory.h"
#include "search/refine.h"
#include "search/wfill.h"

namespace pipeplan {
namespace {

using detail::GreedyKnobs;
using detail::GreedyOutcome;

constexpr double kEps = 1e-9;
constexpr std::size_t kFinalists = 6;
// Orders the local improvement starts from, and the work it may spend on
// each (plans timed x actions per plan; a fixed count keeps it deterministic).
constexpr std::size_t kImproveSeeds = 6;
constexpr long long kImproveWork = 8000000;
// The share of the time limit held back for the memory decisions (step 3c)
// when memory actions are allowed: the phases before it stop earlier, so a
// loaded machine still decides memory where orders do not fit.
constexpr double kMemoryShare = 0.3;
// The share of the time limit the memory decisions leave to the finalists
// (step 4): they stop at 90% of the limit.
constexpr double kFinalShare = 0.1;
// Split orders whose W passes are placed anew (the best of the pool).
constexpr std::size_t kRefillSeeds = 8;
// Of those, the best that the local improvement starts from too.
constexpr std::size_t kImproveRefilled = 2;

// Actions of a lowered plan per (stage, microbatch), at most: F, B (or I
// and W) and four SEND/RECV.
constexpr double kActionsPerCell = 7;
// What one candidate costs per action before any is measured: about a
// fifth of the 2-core development machine's (plan, lower, simulate, verify),
// so only work no machine finishes in time is refused up front.
constexpr double kFastSecondsPerAction = 1e-7;

// The time limit, and what work of n actions is expected to take (the rate
// of the largest candidate measured so far): a candidate that would end past
// the limit is not started, so the limit holds within the work the search
// must do to answer at all.
class Clock {
 public:
  explicit Clock(double limit)
      : limit_(limit), phase_limit_(limit), start_(std::chrono::steady_clock::now()) {}
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  bool expired() const { return elapsed() > phase_limit_; }
  /// Keeps the last `share` of the limit for a later phase: until release(),
  /// expired() and affords() answer for the rest.
  void hold_back(double share) { phase_limit_ = limit_ * (1.0 - share); }
  void release() { phase_limit_ = limit_; }
  /// Whether work on `actions` actions should end within the limit (false
  /// marks the search time-limited).
  bool affords(double actions) {
    const bool fits = elapsed() + actions * rate_ <= phase_limit_;
    limited_ = limited_ || !fits;
    return fits;
  }
  /// The limit passed, or work was left out to keep it.
  bool limited() const { return limited_ || expired(); }
  /// `actions` actions of candidate work took `seconds`.
  void observe(double actions, double seconds) {
    if (actions < largest_) return;
    largest_ = actions;
    rate_ = std::max(kFastSecondsPerAction, seconds / std::max(1.0, actions));
  }

 private:
  double limit_, phase_limit_;
  std::chrono::steady_clock::time_point start_;
  double rate_ = kFastSecondsPerAction;
  double largest_ = 0;
  bool limited_ = false;
};

struct Config {
  StageMapping mapping;
  int v;
};

// A compute-only plan the list scheduler built, or a library order.
struct Candidate {
  Plan compute;
  double makespan = 0.0;  // compute-only model
  double peak = 0.0;
  std::string origin;
  bool refilled = false;  // its W placed anew (step 3a)
};

std::string knob_text(const GreedyKnobs& k) {
  std::string s = k.split ? "I/W split" : "B whole";
  s += k.forward_first ? ", forward-first" : ", backward-first";
  if (k.reserve) s += ", reserving a microbatch's memory";
  if (k.memory_scale < 1)
    s += ", forwards within " + detail::format_number(k.memory_scale * 100, 0) + "% of the budget";
  return s;
}

std::string config_text(const Config& c) {
  return std::string(to_string(c.mapping)) + " mapping, v=" + std::to_string(c.v);
}

std::vector<GreedyKnobs> all_knobs() {
  std::vector<GreedyKnobs> out;
  for (bool split : {true, false})
    for (bool reserve : {false, true})
      for (bool fwd : {false, true})
        for (double scale : {1.0, 0.8}) out.push_back(GreedyKnobs{split, fwd, reserve, scale});
  return out;
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
  for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial})
    if (!verify(plan, VerifyOptions{t, 1}).ok()) return false;
  return true;
}

// 1F1B's peak memory on the balanced partition: the default budget.
template <typename SimFor>
double one_f_one_b_peak(const LayerProfile& profile, const SearchOptions& o,
                        const SimFor& sim_for) {
  try {
    const Problem problem{"1f1b", o.pp_degree, o.num_microbatches, 1};
    const Partition part = balanced_partition(profile, o.pp_degree);
    const SimResult r = simulate(plan(problem), sim_for(part));
    double peak = 0;
    for (const RankStats& s : r.ranks) peak = std::max(peak, s.peak_memory);
    if (r.ok()) return peak;
  } catch (const InputError&) {
  }
  return std::numeric_limits<double>::infinity();
}

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

// One search, its phases in run() order. They share the pool of compute-only
// candidates, the library's runs and plans, and the memory budget.
class Search {
 public:
  Search(const LayerProfile& profile, const SearchOptions& o, int fixed_v)
      : profile_(profile), o_(o), fixed_v_(fixed_v), clock_(o.time_limit) {
    comm_.comm_latency = o.comm.comm_latency;
    comm_.comm_bandwidth = o.comm.comm_bandwidth;
    comm_.transfer_bytes = o.comm.transfer_bytes;
    comm_.host_bandwidth = o.comm.host_bandwidth;
    comm_.host_latency = o.comm.host_latency;
  }

  SearchResult run() {
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

 private:
  struct Seed {
    Config config;
    Partition partition;
    double makespan;
  };

  // A stage needs a layer, and the plan must stay within the size limits.
  bool v_fits(int v) const {
    return static_cast<std::size_t>(o_.pp_degree) * static_cast<std::size_t>(v) <=
               profile_.size() &&
           limits::shape_problem(o_.pp_degree, v, o_.num_microbatches).empty();
  }

  SimOptions sim_options(const Partition& partition) const {
    SimOptions so;
    so.costs = stage_costs(profile_, partition, comm_);
    so.transport = o_.transport;
    return so;
  }

  detail::StageTable table_of(const Plan& compute) const {
    return detail::stage_table(stage_costs(profile_, compute.meta.partition, comm_),
                               compute.meta.num_stages());
  }

  std::optional<GreedyOutcome> try_one(const Config& c, const Partition& part, const GreedyKnobs& k,
                                       double limit) {
    const double estimate = kActionsPerCell * o_.pp_degree * c.v * o_.num_microbatches;
    if (!clock_.affords(estimate)) return std::nullopt;  // would end past the limit
    const double began = clock_.elapsed();
    const PlanMeta meta = make_meta(o_, c, part);
    const detail::StageTable table =
        detail::stage_table(stage_costs(profile_, part, comm_), meta.num_stages());
    ++res_.candidates;
    auto outcome = detail::list_schedule(meta, table, limit, k);
    clock_.observe(estimate, clock_.elapsed() - began);
    return outcome;
  }

  // 1. The library on the same profile (balanced partitions), as compare runs it.
  void run_library() {
    for (const ScheduleInfo& info : schedules()) {
      if (clock_.expired()) break;  // a huge shape: the baseline stays partial
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

  void run_library_one(const ScheduleInfo& info, int v, const MemoryPolicy& memory,
                       std::vector<LibraryRun>& runs, std::vector<Plan>& plans) {
    // After the first baseline, only those that can end in time.
    const double estimate = kActionsPerCell * o_.pp_degree * v * o_.num_microbatches;
    if (!res_.library.empty() && !clock_.affords(estimate)) return;
    const double began = clock_.elapsed();
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
    clock_.observe(static_cast<double>(p.num_actions()), clock_.elapsed() - began);
    ++res_.candidates;
    if (!r.ok()) return;
    run.makespan = r.makespan;
    for (const RankStats& s : r.ranks) run.peak_memory = std::max(run.peak_memory, s.peak_memory);
    p.meta.partition = run.partition;
    runs.push_back(run);
    plans.push_back(std::move(p));
  }

  // The memory budget: the one given, else what 1F1B (or, on a given layout,
  // the order Megatron runs on it) needs; which library runs fit it.
  void choose_budget() {
    budget_ = std::numeric_limits<double>::infinity();
    if (o_.memory_limit) {
      budget_ = *o_.memory_limit;
    } else if (fixed_v_ > 0) {
      // A given layout: the memory of the order Megatron runs on it (1F1B, or
      // interleaved 1F1B for v > 1), else 1F1B's on the balanced partition.
      const std::string own = fixed_v_ > 1 ? "interleaved-1f1b" : "1f1b";
      budget_ = one_f_one_b_peak(profile_, o_,
                                 [this](const Partition& part) { return sim_options(part); });
      for (const LibraryRun& run : res_.library)
        if (run.schedule == own) budget_ = run.peak_memory;
    } else {
      for (const LibraryRun& run : res_.library)
        if (run.schedule == "1f1b") budget_ = run.peak_memory;
    }
    res_.memory_limit = budget_;
    for (LibraryRun& run : res_.library) {
      run.fits = run.peak_memory <= budget_ + kEps;
      if (run.fits && (!res_.best_library || run.makespan < res_.best_library->makespan - kEps))
        res_.best_library = run;
    }
    for (LibraryRun& run : res_.library_recompute) {
      run.fits = run.peak_memory <= budget_ + kEps;
      if (run.fits && (!res_.best_library_recompute ||
                       run.makespan < res_.best_library_recompute->makespan - kEps))
        res_.best_library_recompute = run;
    }
  }

  // 2. List-scheduled candidates: every (mapping, v), a few partitions, every knob.
  std::vector<Config> configs() const {
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

  void list_schedule() {
    for (const Config& c : configs()) {
      if (clock_.expired()) break;
      for (const Partition& part : partitions_for(c)) list_schedule_one(c, part);
    }
    for (const LibraryRun& run : res_.library)
      smallest_peak_ = std::min(smallest_peak_, run.peak_memory);
    for (const LibraryRun& run : res_.library_recompute)
      smallest_peak_ = std::min(smallest_peak_, run.peak_memory);
  }

  std::vector<Partition> partitions_for(const Config& c) const {
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

  void list_schedule_one(const Config& c, const Partition& part) {
    // The least memory this split can run in: one microbatch alive per rank.
    const double floor = detail::rank_footprint(profile_, make_meta(o_, c, part));
    if (auto g = try_one(c, part, GreedyKnobs{false, false, true, 1.0}, floor)) {
      smallest_peak_ = std::min(smallest_peak_, g->peak);
      if (g->peak <= budget_ + kEps)
        pool_.push_back({g->plan, g->makespan, g->peak,
                         "list scheduler (" + config_text(c) + ", one microbatch in flight)"});
    }
    if (floor > budget_ + kEps) return;
    for (const GreedyKnobs& k : knobs_) {
      auto g = try_one(c, part, k, budget_);
      if (!g || g->peak > budget_ + kEps) continue;
      smallest_peak_ = std::min(smallest_peak_, g->peak);
      seeds_.push_back({c, part, g->makespan});
      pool_.push_back({std::move(g->plan), g->makespan, g->peak,
                       "list scheduler (" + config_text(c) + ", " + knob_text(k) + ")"});
    }
  }

  // 3. Move partition boundaries of the best seeds while it helps.
  void refine_partitions() {
    std::stable_sort(seeds_.begin(), seeds_.end(),
                     [](const Seed& a, const Seed& b) { return a.makespan < b.makespan; });
    std::vector<std::pair<int, Partition>> refined;  // (config index, partition) already climbed
    for (std::size_t si = 0;
         si < seeds_.size() && refined.size() < 3 && !clock_.expired() && !o_.partition; ++si) {
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

  void climb(const Seed& seed) {
    Partition part = seed.partition;
    double best = seed.makespan;
    for (int round = 0; round < 64 && !clock_.expired(); ++round) {
      bool improved = false;
      for (std::size_t b = 0; b + 1 < part.size() && !improved && !clock_.expired(); ++b)
        for (int dir : {-1, 1}) {
          Partition next = part;
          next[b] += dir;
          next[b + 1] -= dir;
          if (next[b] < 1 || next[b + 1] < 1) continue;
          for (const GreedyKnobs& k : knobs_) {
            auto g = try_one(seed.config, next, k, budget_);
            if (!g || g->peak > budget_ + kEps) continue;
            if (g->makespan < best - kEps) {
              best = g->makespan;
              part = next;
              improved = true;
              pool_.push_back({std::move(g->plan), g->makespan, g->peak,
                               "list scheduler (" + config_text(seed.config) + ", " + knob_text(k) +
                                   ", partition refined)"});
            }
          }
          if (improved) break;
        }
      if (!improved) break;
    }
  }

  // Library orders that fit join the pool (their own lowering is tried too).
  void add_library_orders() {
    for (std::size_t i = 0; i < library_plans_.size(); ++i) {
      const LibraryRun& run = res_.library[i];
      if (!run.fits) continue;
      pool_.push_back({compute_projection(library_plans_[i]), run.makespan, run.peak_memory,
                       library_origin(run.schedule, run.stages_per_rank)});
    }
  }

  // Nothing fits, memory actions included: say what would.
  void require_candidates() {
    if (pool_.empty()) {
      const std::string smallest = detail::format_number(smallest_peak_, 4);
      throw BudgetError("no plan fits the memory budget " + detail::format_number(budget_, 4) +
                            " per rank; the smallest budget that works is " + smallest +
                            " (--memory-limit " + smallest + ")",
                        smallest_peak_);
    }
  }

  // 3a. The W passes of the best split orders placed anew (wfill.h): where
  // they fill a wait without delaying the work behind it, or free memory.
  void refill_weights() {
    sort_pool();
    std::vector<Candidate> refilled;
    std::size_t tried = 0;
    for (const Candidate& c : pool_) {
      if (tried >= kRefillSeeds) break;
      std::size_t actions = 0;
      for (const auto& list : c.compute.ranks) actions += list.size();
      if (!clock_.affords(static_cast<double>(actions))) break;
      bool split = false;
      for (const auto& list : c.compute.ranks)
        for (const Action& a : list) split = split || a.type == ActionType::I;
      if (!split) continue;
      ++tried;
      const detail::StageTable table = table_of(c.compute);
      for (double slack : {0.0, table.transfer}) {
        auto g = detail::refill_weights(c.compute, table, budget_, slack);
        ++res_.candidates;
        if (g && g->peak <= budget_ + kEps && g->makespan < c.makespan - kEps)
          refilled.push_back({std::move(g->plan), g->makespan, g->peak,
                              c.origin + ", W passes placed anew", true});
        if (table.transfer <= 0) break;
      }
    }
    for (Candidate& c : refilled) pool_.push_back(std::move(c));
  }

  // 3b. Local improvement of the best orders: pull ready work (a forward, a
  // backward, a deferred W) into idle time or ahead of a W while the budget
  // holds. The fastest library order that fits is always among the starts.
  void improve_locally() {
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
      const std::size_t limit = refilled ? starts.size() + kImproveRefilled : kImproveSeeds;
      for (const Candidate& c : pool_) {
        if (starts.size() >= limit) break;
        if (c.refilled != refilled) continue;
        bool dup = false;
        for (const Candidate* s : starts) dup = dup || s->compute == c.compute;
        if (!dup) starts.push_back(&c);
      }
    }
    const auto expired = [this] { return clock_.expired(); };
    std::vector<Candidate> improved;
    for (const Candidate* c : starts) {
      if (clock_.expired()) break;
      std::size_t actions = 1;
      for (const auto& list : c->compute.ranks) actions += list.size();
      const long long evals =
          std::max<long long>(100, kImproveWork / static_cast<long long>(actions));
      auto imp = detail::improve_orders(c->compute, table_of(c->compute), budget_, evals, expired,
                                        &res_.candidates);
      if (imp)
        improved.push_back({std::move(imp->plan), imp->makespan, imp->peak,
                            c->origin + ", orders improved locally"});
    }
    for (Candidate& c : improved) pool_.push_back(std::move(c));
    res_.time_limited = res_.time_limited || clock_.limited();
  }

  void sort_pool() {
    std::stable_sort(pool_.begin(), pool_.end(), [](const Candidate& a, const Candidate& b) {
      return a.makespan < b.makespan - kEps;
    });
  }

  // Keeps `plan` when it beats the best so far.
  void offer(Plan plan, double makespan, std::string origin) {
    res_.plan = std::move(plan);
    res_.makespan = makespan;
    res_.origin = std::move(origin);
    found_ = true;
  }

  // 4. Lower the finalists, simulate them under the user's transport, keep
  // the fastest that verifies under all three.
  void lower_finalists() {
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
      if (found_ && clock_.expired()) break;  // a verified plan is in hand
      const Partition& part = c->compute.meta.partition;
      for (const LowerOptions& lo : lowerings_for(sim_options(part).costs, table_of(c->compute))) {
        if (found_ && clock_.expired()) break;
        Plan lowered = lower(c->compute, lo);
        const SimResult r = simulate(lowered, sim_options(part));
        ++res_.candidates;
        if (!r.ok() || (found_ && r.makespan >= res_.makespan - kEps)) continue;
        if (lowered.has_memory_actions() && !within_budget(r)) continue;  // copies moved
        if (!verifies_everywhere(lowered)) continue;
        offer(std::move(lowered), r.makespan, c->origin);
      }
    }
    if (!found_) throw InternalError("search: no finalist could be lowered and verified");
  }

  // The best library plan that fits, with the library's own lowering.
  void keep_best_library() {
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
  void refine_library_partitions() {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < library_plans_.size(); ++i)
      if (res_.library[i].fits) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return res_.library[a].makespan < res_.library[b].makespan - kEps;
    });
    SimOptions so;
    so.costs = comm_;
    so.transport = o_.transport;
    const auto expired = [this] { return clock_.expired(); };
    for (std::size_t k = 0; k < order.size() && k < 2 && !clock_.expired() && !o_.partition; ++k) {
      const Plan& lib = library_plans_[order[k]];
      if (!verifies_everywhere(lib)) continue;
      auto refined =
          detail::refine_partition(lib, profile_, so, budget_, expired, &res_.candidates);
      if (!refined || (found_ && refined->makespan >= res_.makespan - kEps)) continue;
      const LibraryRun& run = res_.library[order[k]];
      offer(std::move(refined->plan), refined->makespan,
            library_origin(run.schedule, run.stages_per_rank) + ", partition refined");
    }
  }

  // The winner's own figures, the lower bound and (tiny models) the exact search.
  void finish() {
    const SimResult final_run = simulate(res_.plan, sim_options(res_.plan.meta.partition));
    res_.makespan = final_run.makespan;
    for (const RankStats& s : final_run.ranks) {
      res_.rank_peak_memory.push_back(s.peak_memory);
      res_.peak_memory = std::max(res_.peak_memory, s.peak_memory);
    }
    for (const auto& list : res_.plan.ranks)
      for (const Action& a : list) {
        res_.recomputed += a.type == ActionType::Recompute;
        res_.offloaded += a.type == ActionType::Offload;
      }
    res_.lower_bound = makespan_lower_bound(profile_, o_.pp_degree, o_.num_microbatches,
                                            comm_.transfer_time(), &res_.lower_bound_reason,
                                            budget_, {allowed().recompute, allowed().offload});
  }

  // 7. Tiny shapes: the exhaustive search, from the heuristic's plan as the
  // incumbent; a faster schedule it finds is lowered like the finalists and
  // returned when it verifies everywhere and is no slower under --model.
  void solve_exactly() {
    // The exact search covers orders without memory actions only.
    if (!o_.exact || o_.partition || res_.plan.has_memory_actions() ||
        !detail::exact_is_tiny(profile_, o_))
      return;
    // The exact search works in the compute-only model: compare like with like.
    const double value =
        simulate(compute_projection(res_.plan), sim_options(res_.plan.meta.partition)).makespan;
    Plan best;
    res_.exact = detail::exact_search(profile_, o_, budget_, value, expired_, &best);
    if (!res_.exact->complete && clock_.expired()) res_.time_limited = true;
    if (best.ranks.empty()) return;
    const Partition part = best.meta.partition;
    const std::string origin = "exact branch and bound (" +
                               config_text({best.meta.mapping, best.meta.stages_per_rank}) + ")";
    for (const LowerOptions& lo : lowerings_for(sim_options(part).costs, table_of(best))) {
      Plan lowered = lower(best, lo);
      const SimResult r = simulate(lowered, sim_options(part));
      ++res_.candidates;
      // Ties go to the exact plan: it is the faster one in the compute-only model.
      const double to_beat = res_.exact->returned ? res_.makespan - kEps : res_.makespan + kEps;
      if (!r.ok() || r.makespan > to_beat || !verifies_everywhere(lowered)) continue;
      offer(std::move(lowered), r.makespan, origin);
      res_.exact->returned = true;
    }
  }

  // 3c. Memory decisions (search/memory.h): orders built for more memory than
  // the budget (and every library order) get per (stage, microbatch) keep,
  // offload or recompute so that they fit; the library with full recompute
  // that fits joins them.
  void decide_memory() {
    clock_.hold_back(kFinalShare);
    const detail::MemoryAllowed memory = allowed();
    if (!memory.any() || clock_.expired()) return clock_.release();
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
         detail::memory_candidates(seeds, o_.partition ? nullptr : &profile_, budget_, memory,
                                   expired_, &res_.candidates))
      pool_.push_back({std::move(c.plan), c.makespan, c.peak, std::move(c.origin), false});
    for (std::size_t i = 0; i < recompute_plans_.size(); ++i) {
      const LibraryRun& run = res_.library_recompute[i];
      if (run.fits)
        pool_.push_back({compute_projection(recompute_plans_[i]), run.makespan, run.peak_memory,
                         library_origin(run.schedule, run.stages_per_rank) + ", full recompute",
                         false});
    }
    res_.time_limited = res_.time_limited || clock_.limited();
    clock_.release();
  }

  detail::MemoryAllowed allowed() const {
    return {o_.recompute, o_.offload && comm_.host_bandwidth > 0};
  }

  static MemoryPolicy full_recompute() {
    MemoryPolicy p;
    p.recompute.all = true;
    return p;
  }

  bool within_budget(const SimResult& r) const {
    for (const RankStats& s : r.ranks)
      if (s.peak_memory > budget_ + kEps) return false;
    return true;
  }

  const LayerProfile& profile_;
  const SearchOptions& o_;
  const int fixed_v_;
  Clock clock_;
  const std::function<bool()> expired_ = [this] { return clock_.expired(); };
  CostModel comm_;
  const std::vector<GreedyKnobs> knobs_ = all_knobs();
  SearchResult res_;
  std::vector<Plan> library_plans_;    // with res_.library, index for index
  std::vector<Plan> recompute_plans_;  // with res_.library_recompute
  std::vector<Candidate> pool_;
  std::vector<Seed> seeds_;
  double budget_ = std::numeric_limits<double>::infinity();
  double smallest_peak_ = std::numeric_limits<double>::infinity();
  bool found_ = false;
};

}  // namespace

SearchResult search(const LayerProfile& profile, const SearchOptions& o) {
  const int fixed_v = check_options(profile, o);
  return Search(profile, o, fixed_v).run();
}

}  // namespace pipeplan
