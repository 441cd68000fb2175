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
#include "pipeplan/cost_options.h"
#include "pipeplan/limits.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"
#include "search/exact.h"
#include "search/greedy.h"
#include "search/improve.h"
#include "search/refine.h"
#include "search/split.h"

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
  explicit Clock(double limit) : limit_(limit), start_(std::chrono::steady_clock::now()) {}
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  bool expired() const { return elapsed() > limit_; }
  /// Whether work on `actions` actions should end within the limit (false
  /// marks the search time-limited).
  bool affords(double actions) {
    const bool fits = elapsed() + actions * rate_ <= limit_;
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
  double limit_;
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

// What a lowering plans for: the stage costs the plan is simulated with,
// and kNominalLatency per transfer when transfers are free (as compare and
// the CLI do).
CostModel planning_costs(CostModel costs) {
  if (costs.transfer_time() == 0.0) {
    costs.comm_latency = kNominalLatency;
    costs.comm_bandwidth = 0.0;
  }
  return costs;
}

// The lowerings tried for a candidate: latency hiding for its stage costs,
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

Plan strip_comms(Plan p) {
  for (auto& list : p.ranks)
    list.erase(
        std::remove_if(list.begin(), list.end(), [](const Action& a) { return is_comm(a.type); }),
        list.end());
  return p;
}

}  // namespace

SearchResult search(const LayerProfile& profile, const SearchOptions& o) {
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
  // A stage needs a layer, and the plan must stay within the size limits.
  const auto v_fits = [&](int v) {
    return static_cast<std::size_t>(o.pp_degree) * static_cast<std::size_t>(v) <= profile.size() &&
           limits::shape_problem(o.pp_degree, v, o.num_microbatches).empty();
  };
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
  int fixed_v = 0;  // > 0: the partition is given (o.partition)
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
  Clock clock(o.time_limit);
  const std::function<bool()> expired = [&clock] { return clock.expired(); };
  SearchResult res;
  CostModel comm;
  comm.comm_latency = o.comm.comm_latency;
  comm.comm_bandwidth = o.comm.comm_bandwidth;
  comm.transfer_bytes = o.comm.transfer_bytes;
  const double transfer = comm.transfer_time();
  auto sim_options = [&](const Partition& partition) {
    SimOptions so;
    so.costs = stage_costs(profile, partition, comm);
    so.transport = o.transport;
    return so;
  };

  // 1. The library on the same profile (balanced partitions), as compare runs it.
  std::vector<Plan> library_plans;
  for (const ScheduleInfo& info : schedules()) {
    if (clock.expired()) break;  // a huge shape: the baseline stays partial
    std::vector<int> vs = info.allowed_stages_per_rank;
    if (vs.empty())
      for (int v = 1; v <= o.max_stages_per_rank; ++v) vs.push_back(v);
    if (fixed_v > 0)
      vs = std::count(vs.begin(), vs.end(), fixed_v) ? std::vector<int>{fixed_v}
                                                     : std::vector<int>{};
    for (int v : vs) {
      if (!v_fits(v)) continue;
      // After the first baseline, only those that can end in time.
      const double estimate = kActionsPerCell * o.pp_degree * v * o.num_microbatches;
      if (!res.library.empty() && !clock.affords(estimate)) continue;
      const double began = clock.elapsed();
      Plan p;
      LibraryRun run;
      run.schedule = info.name;
      run.stages_per_rank = v;
      try {
        const Problem problem{info.name, o.pp_degree, o.num_microbatches, v};
        const PlanMeta meta = resolve(problem);
        if (fixed_v > 0 && meta.mapping != StageMapping::Loop) continue;
        if (meta.mapping == StageMapping::V && o.max_v_stages_per_rank > 0 &&
            v > o.max_v_stages_per_rank)
          continue;
        run.partition = o.partition ? *o.partition
                                    : detail::split_min_max(profile, meta.num_stages(),
                                                            detail::SplitBy::Work, expired);
        // Lowered as compare lowers it: the schedule's own options, planning
        // for the stage costs it is simulated with.
        p = plan(problem, make_lower_options(meta, {}, sim_options(run.partition).costs,
                                             /*comm_given=*/false));
      } catch (const InputError&) {
        continue;  // the schedule rejects this shape
      }
      const SimResult r = simulate(p, sim_options(run.partition));
      clock.observe(static_cast<double>(p.num_actions()), clock.elapsed() - began);
      ++res.candidates;
      if (!r.ok()) continue;
      run.makespan = r.makespan;
      for (const RankStats& s : r.ranks) run.peak_memory = std::max(run.peak_memory, s.peak_memory);
      p.meta.partition = run.partition;
      res.library.push_back(run);
      library_plans.push_back(std::move(p));
    }
  }
  double budget = std::numeric_limits<double>::infinity();
  if (o.memory_limit) {
    budget = *o.memory_limit;
  } else if (fixed_v > 0) {
    // A given layout: the memory of the order Megatron runs on it (1F1B, or
    // interleaved 1F1B for v > 1), else 1F1B's on the balanced partition.
    const std::string own = fixed_v > 1 ? "interleaved-1f1b" : "1f1b";
    budget = one_f_one_b_peak(profile, o, sim_options);
    for (const LibraryRun& run : res.library)
      if (run.schedule == own) budget = run.peak_memory;
  } else {
    for (const LibraryRun& run : res.library)
      if (run.schedule == "1f1b") budget = run.peak_memory;
  }
  res.memory_limit = budget;
  for (LibraryRun& run : res.library) {
    run.fits = run.peak_memory <= budget + kEps;
    if (run.fits && (!res.best_library || run.makespan < res.best_library->makespan - kEps))
      res.best_library = run;
  }

  // 2. List-scheduled candidates: every (mapping, v), a few partitions, every knob.
  std::vector<Config> configs;
  if (fixed_v > 0) configs.push_back({StageMapping::Loop, fixed_v});
  for (int v = 1; v <= o.max_stages_per_rank && fixed_v == 0; ++v)
    if (v_fits(v)) configs.push_back({StageMapping::Loop, v});
  const int max_v = o.max_v_stages_per_rank > 0
                        ? std::min(o.max_v_stages_per_rank, o.max_stages_per_rank)
                        : o.max_stages_per_rank;
  for (int v = 2; v <= max_v && fixed_v == 0; ++v)
    if (v_fits(v)) configs.push_back({StageMapping::V, v});
  const std::vector<GreedyKnobs> knobs = all_knobs();
  std::vector<Candidate> pool;
  double smallest_peak = std::numeric_limits<double>::infinity();
  struct Seed {
    Config config;
    Partition partition;
    double makespan;
  };
  std::vector<Seed> seeds;
  auto try_one = [&](const Config& c, const Partition& part, const GreedyKnobs& k,
                     double limit) -> std::optional<GreedyOutcome> {
    const double estimate = kActionsPerCell * o.pp_degree * c.v * o.num_microbatches;
    if (!clock.affords(estimate)) return std::nullopt;  // would end past the limit
    const double began = clock.elapsed();
    const PlanMeta meta = make_meta(o, c, part);
    const detail::StageTable table =
        detail::stage_table(stage_costs(profile, part, comm), meta.num_stages());
    ++res.candidates;
    auto outcome = detail::list_schedule(meta, table, limit, k);
    clock.observe(estimate, clock.elapsed() - began);
    return outcome;
  };
  for (const Config& c : configs) {
    if (clock.expired()) break;
    const int S = o.pp_degree * c.v;
    std::vector<Partition> parts;
    if (o.partition) {
      parts = {*o.partition};
    } else {
      parts = {detail::split_min_max(profile, S, detail::SplitBy::Work, expired),
               detail::split_min_max(profile, S, detail::SplitBy::Memory, expired)};
      if (c.v > 1)
        parts.push_back(detail::split_rank_balanced(profile, make_meta(o, c, {}), expired));
    }
    std::sort(parts.begin(), parts.end());
    parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
    for (const Partition& part : parts) {
      // The least memory this split can run in: one microbatch alive per rank.
      const double floor = detail::rank_footprint(profile, make_meta(o, c, part));
      if (auto g = try_one(c, part, GreedyKnobs{false, false, true, 1.0}, floor)) {
        smallest_peak = std::min(smallest_peak, g->peak);
        if (g->peak <= budget + kEps)
          pool.push_back({g->plan, g->makespan, g->peak,
                          "list scheduler (" + config_text(c) + ", one microbatch in flight)"});
      }
      if (floor > budget + kEps) continue;
      for (const GreedyKnobs& k : knobs) {
        auto g = try_one(c, part, k, budget);
        if (!g || g->peak > budget + kEps) continue;
        smallest_peak = std::min(smallest_peak, g->peak);
        seeds.push_back({c, part, g->makespan});
        pool.push_back({std::move(g->plan), g->makespan, g->peak,
                        "list scheduler (" + config_text(c) + ", " + knob_text(k) + ")"});
      }
    }
  }
  for (const LibraryRun& run : res.library)
    smallest_peak = std::min(smallest_peak, run.peak_memory);

  // 3. Move partition boundaries of the best seeds while it helps.
  std::stable_sort(seeds.begin(), seeds.end(),
                   [](const Seed& a, const Seed& b) { return a.makespan < b.makespan; });
  std::vector<std::pair<int, Partition>> refined;  // (config index, partition) already climbed
  for (std::size_t si = 0;
       si < seeds.size() && refined.size() < 3 && !clock.expired() && !o.partition; ++si) {
    const Seed& seed = seeds[si];
    bool seen = false;
    for (const auto& [cv, part] : refined)
      if (cv == seed.config.v * 2 + (seed.config.mapping == StageMapping::V) &&
          part == seed.partition)
        seen = true;
    if (seen) continue;
    refined.push_back(
        {seed.config.v * 2 + (seed.config.mapping == StageMapping::V), seed.partition});
    Partition part = seed.partition;
    double best = seed.makespan;
    for (int round = 0; round < 64 && !clock.expired(); ++round) {
      bool improved = false;
      for (std::size_t b = 0; b + 1 < part.size() && !improved && !clock.expired(); ++b)
        for (int dir : {-1, 1}) {
          Partition next = part;
          next[b] += dir;
          next[b + 1] -= dir;
          if (next[b] < 1 || next[b + 1] < 1) continue;
          for (const GreedyKnobs& k : knobs) {
            auto g = try_one(seed.config, next, k, budget);
            if (!g || g->peak > budget + kEps) continue;
            if (g->makespan < best - kEps) {
              best = g->makespan;
              part = next;
              improved = true;
              pool.push_back({std::move(g->plan), g->makespan, g->peak,
                              "list scheduler (" + config_text(seed.config) + ", " + knob_text(k) +
                                  ", partition refined)"});
            }
          }
          if (improved) break;
        }
      if (!improved) break;
    }
  }
  res.time_limited = clock.limited();

  // Library orders that fit join the pool (their own lowering is tried too).
  for (std::size_t i = 0; i < library_plans.size(); ++i) {
    const LibraryRun& run = res.library[i];
    if (!run.fits) continue;
    Candidate c;
    c.compute = strip_comms(library_plans[i]);
    c.makespan = run.makespan;
    c.peak = run.peak_memory;
    c.origin = "library " + run.schedule + " (v=" + std::to_string(run.stages_per_rank) + ")";
    pool.push_back(std::move(c));
  }
  if (pool.empty()) {
    const std::string smallest = detail::format_number(smallest_peak, 4);
    throw BudgetError("no plan fits the memory budget " + detail::format_number(budget, 4) +
                          " per rank; the smallest budget that works is " + smallest +
                          " (--memory-limit " + smallest + ")",
                      smallest_peak);
  }

  // 3b. Local improvement of the best orders: pull ready work (a forward, a
  // backward, a deferred W) into idle time or ahead of a W while the budget
  // holds. The fastest library order that fits is always among the starts.
  {
    std::stable_sort(pool.begin(), pool.end(), [](const Candidate& a, const Candidate& b) {
      return a.makespan < b.makespan - kEps;
    });
    std::vector<const Candidate*> starts;
    const std::string best_origin =
        res.best_library ? "library " + res.best_library->schedule +
                               " (v=" + std::to_string(res.best_library->stages_per_rank) + ")"
                         : std::string();
    for (const Candidate& c : pool)
      if (c.origin == best_origin) starts.push_back(&c);
    for (const Candidate& c : pool) {
      if (starts.size() >= kImproveSeeds) break;
      bool dup = false;
      for (const Candidate* s : starts) dup = dup || s->compute == c.compute;
      if (!dup) starts.push_back(&c);
    }
    std::vector<Candidate> improved;
    for (const Candidate* c : starts) {
      if (clock.expired()) break;
      const Partition& part = c->compute.meta.partition;
      const detail::StageTable table =
          detail::stage_table(stage_costs(profile, part, comm), c->compute.meta.num_stages());
      std::size_t actions = 1;
      for (const auto& list : c->compute.ranks) actions += list.size();
      const long long evals =
          std::max<long long>(100, kImproveWork / static_cast<long long>(actions));
      auto imp = detail::improve_orders(c->compute, table, budget, evals, expired, &res.candidates);
      if (imp)
        improved.push_back({std::move(imp->plan), imp->makespan, imp->peak,
                            c->origin + ", orders improved locally"});
    }
    for (Candidate& c : improved) pool.push_back(std::move(c));
    res.time_limited = res.time_limited || clock.limited();
  }

  // 4. Lower the finalists, simulate them under the user's transport, keep
  // the fastest that verifies under all three.
  std::stable_sort(pool.begin(), pool.end(), [](const Candidate& a, const Candidate& b) {
    return a.makespan < b.makespan - kEps;
  });
  std::vector<const Candidate*> finalists;
  for (const Candidate& c : pool) {
    bool dup = false;
    for (const Candidate* f : finalists) dup = dup || f->compute == c.compute;
    if (!dup) finalists.push_back(&c);
    if (finalists.size() >= kFinalists) break;
  }
  for (std::size_t i = 0; i < library_plans.size(); ++i)  // the library's own lowering
    if (res.library[i].fits && res.best_library &&
        res.library[i].schedule == res.best_library->schedule &&
        res.library[i].stages_per_rank == res.best_library->stages_per_rank &&
        verifies_everywhere(library_plans[i])) {
      res.plan = library_plans[i];
      res.makespan = res.best_library->makespan;
      res.origin = "library " + res.best_library->schedule +
                   " (v=" + std::to_string(res.best_library->stages_per_rank) + ")";
    }
  bool found = !res.plan.ranks.empty();
  // The fastest library plans that fit keep their order (and lowering) with
  // a partition fitted to them: better on uneven profiles, never worse.
  {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < library_plans.size(); ++i)
      if (res.library[i].fits) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return res.library[a].makespan < res.library[b].makespan - kEps;
    });
    SimOptions so;
    so.costs = comm;
    so.transport = o.transport;
    for (std::size_t k = 0; k < order.size() && k < 2 && !clock.expired() && !o.partition; ++k) {
      const Plan& lib = library_plans[order[k]];
      if (!verifies_everywhere(lib)) continue;
      auto refined = detail::refine_partition(lib, profile, so, budget, expired, &res.candidates);
      if (!refined || (found && refined->makespan >= res.makespan - kEps)) continue;
      res.plan = std::move(refined->plan);
      res.makespan = refined->makespan;
      res.origin = "library " + res.library[order[k]].schedule +
                   " (v=" + std::to_string(res.library[order[k]].stages_per_rank) +
                   "), partition refined";
      found = true;
    }
  }
  for (const Candidate* c : finalists) {
    if (found && clock.expired()) break;  // a verified plan is in hand
    const Partition& part = c->compute.meta.partition;
    const detail::StageTable table =
        detail::stage_table(stage_costs(profile, part, comm), c->compute.meta.num_stages());
    for (const LowerOptions& lo : lowerings_for(sim_options(part).costs, table)) {
      if (found && clock.expired()) break;
      Plan lowered = lower(c->compute, lo);
      const SimResult r = simulate(lowered, sim_options(part));
      ++res.candidates;
      if (!r.ok() || (found && r.makespan >= res.makespan - kEps)) continue;
      if (!verifies_everywhere(lowered)) continue;
      res.plan = std::move(lowered);
      res.makespan = r.makespan;
      res.origin = c->origin;
      found = true;
    }
  }
  if (!found) throw InternalError("search: no finalist could be lowered and verified");

  const SimResult final_run = simulate(res.plan, sim_options(res.plan.meta.partition));
  res.makespan = final_run.makespan;
  for (const RankStats& s : final_run.ranks) {
    res.rank_peak_memory.push_back(s.peak_memory);
    res.peak_memory = std::max(res.peak_memory, s.peak_memory);
  }
  res.lower_bound = makespan_lower_bound(profile, o.pp_degree, o.num_microbatches, transfer,
                                         &res.lower_bound_reason);
  if (o.exact && !o.partition && detail::exact_is_tiny(profile, o)) {
    // The exact search works in the compute-only model: compare like with like.
    const double value =
        simulate(strip_comms(res.plan), sim_options(res.plan.meta.partition)).makespan;
    res.exact = detail::exact_search(profile, o, budget, value);
  }
  return res;
}

}  // namespace pipeplan
