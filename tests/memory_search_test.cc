// The search's memory phase against the targets of docs/memory.md ("Every
// example profile"): cells of scripts/memory_grid.py pinned where a search
// takes a second, and the fit's split-backward style on a zero-bubble order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <utility>

#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/search.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "search/greedy.h"
#include "search/memory.h"
#include "search/phases.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

LayerProfile example(const std::string& name) {
  const std::string path = "examples/layers/" + name + ".csv";
  return parse_layer_profile(test::read_source_file(path), path);
}

bool verifies_everywhere(const Plan& plan) {
  for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial})
    if (!verify(plan, {t}).ok()) return false;
  return true;
}

// The search's options without a budget nor memory actions ("free"); each
// search ends within a second or two.
SearchOptions free_search(int p, int m) {
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = p;
  o.num_microbatches = m;
  o.memory_limit = 1e9;
  o.recompute = false;
  o.time_limit = 60;
  return o;
}
SearchOptions free_p8() { return free_search(8, 16); }

// p = 8, m = 16, V mapping, v = 2 on `partition`.
PlanMeta v2_p8(Partition partition) {
  PlanMeta meta;
  meta.pp_degree = 8, meta.num_microbatches = 16, meta.stages_per_rank = 2;
  meta.mapping = StageMapping::V;
  meta.partition = std::move(partition);
  return meta;
}

}  // namespace

TEST_CASE("memory search: half of 1F1B's budget, recompute alone, within 25% of the free best",
          "[memory][search]") {
  // m = 2p, no transfer cost; "free": no budget, no memory actions. Before
  // the split-backward styles and polishing, gpt50 p=4 was 405 (+26.0%).
  for (const char* name : {"gpt50", "llama35"}) {
    CAPTURE(name);
    const LayerProfile prof = example(name);
    SearchOptions o;
    o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
    o.pp_degree = 4;
    o.num_microbatches = 8;
    o.time_limit = 60;  // each ends within a second: deterministic, whatever the load
    const double full = search(prof, o).memory_limit;
    SearchOptions free = o;
    free.memory_limit = 1e9;
    free.recompute = false;
    const double best = search(prof, free).makespan;
    o.memory_limit = full / 2;
    const SearchResult r = search(prof, o);
    CHECK(r.makespan <= 1.25 * best + 1e-9);
    CHECK(r.recomputed > 0);
    CHECK(r.offloaded == 0);
    CHECK(r.peak_memory <= *o.memory_limit + 1e-9);
    CHECK(verifies_everywhere(r.plan));
    REQUIRE(r.best_library_recompute);
    CHECK(r.makespan < r.best_library_recompute->makespan);
  }
}

TEST_CASE("memory fit: a zero-bubble order recomputes once its W follows its I",
          "[memory][search]") {
  // ZB-H1 on 32 uniform layers, p = 8, m = 16: rank 0 holds 8 microbatches of
  // 4 at 1F1B's peak (32). At half of it, I-done microbatches waiting for a
  // deferred W hold their whole activation: no choice of recomputes fits.
  // Pulling those Ws (and the recomputed ones') right after their I does.
  const LayerProfile prof = example("uniform32");
  const Planner planner(Problem{"zb-h1", 8, 16, 1});
  const Plan order = compute_projection(planner.compute());
  const Partition part = balanced_partition(prof, 8);
  Plan with_part = order;
  with_part.meta.partition = part;
  SimOptions so;
  so.costs = stage_costs(prof, part);
  const detail::StageTable table = detail::stage_table(so.costs, 8);
  const detail::MemoryAllowed recompute{true, false};
  CHECK_FALSE(detail::fit_memory(with_part, table, so.costs, 16, recompute, {}));
  const auto fit = detail::fit_memory(with_part, table, so.costs, 16, recompute,
                                      {detail::RecomputeRule::Cheapest, true});
  REQUIRE(fit);
  CHECK(fit->recomputed > 0);
  // Every recomputed (stage, microbatch)'s W follows its I at once.
  for (const auto& list : fit->plan.ranks)
    for (std::size_t i = 0; i + 1 < list.size(); ++i)
      if (list[i].type == ActionType::Recompute) {
        REQUIRE(i + 2 < list.size());
        CHECK(list[i + 1] == make(ActionType::I, list[i].stage, list[i].microbatch));
        CHECK(list[i + 2] == make(ActionType::W, list[i].stage, list[i].microbatch));
      }
  const Plan lowered = lower(fit->plan);
  CHECK(verifies_everywhere(lowered));
  const SimResult r = simulate(lowered, so);
  REQUIRE(r.ok());
  CHECK(r.makespan > simulate(lower(with_part), so).makespan);  // the recomputes cost time
}

TEST_CASE("memory fit: what recomputing adds to a 1F1B-like rank", "[memory][search]") {
  // A stage of activation 4 keeping 1, recompute 4, budget 16, m = 16.
  // 8 in flight: one run back (4) + 7 inputs = 11, room for one more whole
  // (+3): 6 of every 8 recomputed, 12 x 4 = 48.
  CHECK(detail::recompute_tax(4, 1, 4, 8, 16, 16) == Approx(48));
  CHECK(detail::recompute_tax(4, 1, 4, 4, 16, 16) == 0);  // 4 x 4 fits whole
  CHECK(detail::recompute_tax(4, 1, 4, 13, 16, 16) == Approx(16.0 * 12 / 13 * 4));
  CHECK(detail::recompute_tax(4, 1, 4, 8, 16, 10) == std::numeric_limits<double>::infinity());
  CHECK(detail::recompute_tax(1, 1, 1, 8, 16, 4) == std::numeric_limits<double>::infinity());
}

TEST_CASE("memory fit: a partition balancing recompute beats the balanced one",
          "[memory][search]") {
  // llama35, p = 8, m = 16, half of 1F1B's peak (17.2): the ranks near the
  // top hold the most microbatches and recompute the most, so they get fewer
  // layers. ZB-H1's order fitted on that partition is within 25% of the
  // unconstrained best; on the work-balanced one it is not.
  const LayerProfile prof = example("llama35");
  const std::optional<Partition> part = detail::recompute_balanced(prof, 8, 16, 17.2);
  REQUIRE(part);
  const Partition even = balanced_partition(prof, 8);
  CHECK(*part != even);
  const Plan order = compute_projection(Planner(Problem{"zb-h1", 8, 16, 1}).compute());
  const auto fitted = [&](const Partition& p) {
    Plan o = order;
    o.meta.partition = p;
    SimOptions so;
    so.costs = stage_costs(prof, p);
    const auto fit = detail::fit_memory(o, detail::stage_table(so.costs, 8), so.costs, 17.2,
                                        {true, false}, {detail::RecomputeRule::Cheapest, true});
    REQUIRE(fit);
    const Plan lowered = lower(fit->plan);
    CHECK(verifies_everywhere(lowered));
    return simulate(lowered, so).makespan;
  };
  const double best = search(prof, free_p8()).makespan;
  const double balanced = fitted(*part);
  CHECK(balanced < fitted(even));
  CHECK(balanced <= 1.25 * best);
}

TEST_CASE("memory fit: a recompute an action early runs while the rank waits for its gradient",
          "[memory][search]") {
  // moe40, p = 8, m = 16, half of 1F1B's peak (19.2), the zero-bubble order
  // at v = 1: a RECOMPUTE right before its backward delays the backward (and
  // the gradient chain down to rank 0) once the gradient is there; placed
  // before the action ahead of it, it mostly runs in the rank's wait.
  const LayerProfile prof = example("moe40");
  const Partition part = balanced_partition(prof, 8);
  Plan order = compute_projection(Planner(Problem{"interleaved-zb", 8, 16, 1}).compute());
  order.meta.partition = part;
  SimOptions so;
  so.costs = stage_costs(prof, part);
  const detail::StageTable table = detail::stage_table(so.costs, 8);
  const auto fitted = [&](bool early) {
    const auto fit = detail::fit_memory(order, table, so.costs, 19.2, {true, false},
                                        {detail::RecomputeRule::Cheapest, true, early});
    REQUIRE(fit);
    const Plan lowered = lower(fit->plan);
    CHECK(verifies_everywhere(lowered));
    const SimResult r = simulate(lowered, so);
    REQUIRE(r.ok());
    for (const RankStats& s : r.ranks) CHECK(s.peak_memory <= 19.2 + 1e-9);
    // RECOMPUTEs not right before their own backward.
    int ahead = 0;
    for (const auto& list : fit->plan.ranks)
      for (std::size_t i = 0; i + 1 < list.size(); ++i)
        if (list[i].type == ActionType::Recompute &&
            list[i + 1] != make(ActionType::I, list[i].stage, list[i].microbatch))
          ++ahead;
    CHECK((ahead > fit->recomputed / 2) == early);
    return r.makespan;
  };
  const double early = fitted(true);
  CHECK(early < fitted(false));

  // The search (early styles first, more candidates polished): was 460.8.
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 8;
  o.num_microbatches = 16;
  o.memory_limit = 19.2;
  o.time_limit = 60;
  const SearchResult r = search(prof, o);
  CHECK(r.makespan < 460.8 - 1e-9);
  CHECK(r.peak_memory <= 19.2 + 1e-9);
  CHECK(verifies_everywhere(r.plan));
}

TEST_CASE("memory fit: offloads decided again on the order the pulled Ws made",
          "[memory][search]") {
  // llama35, p = 8, m = 16, half of 1F1B's peak (17.2), a copy stream moving
  // one stage's activation in one forward's time. ZB-H2's order (the
  // unconstrained best, 75 per rank) holds its I-done microbatches until
  // deferred Ws: offloading alone never fits it. With their Ws pulled right
  // after their I (offloaded ones too) and the copies decided again on the
  // pulled order's own times (a RELOAD placed on the times before the pulls
  // lands right before its I), it fits, within 10% of the unconstrained best.
  const LayerProfile prof = example("llama35");
  const Partition part{5, 4, 5, 5, 5, 5, 5, 1};
  Plan order = compute_projection(Planner(Problem{"zb-h2", 8, 16, 1}).compute());
  order.meta.partition = part;
  SimOptions so;
  so.costs = stage_costs(prof, part);
  so.costs.host_bandwidth = 1;
  const detail::StageTable table = detail::stage_table(so.costs, 8);
  const detail::MemoryAllowed both{true, true};
  CHECK_FALSE(detail::fit_memory(order, table, so.costs, 17.2, both,
                                 {detail::RecomputeRule::Latest, true}));
  const auto fit = detail::fit_memory(order, table, so.costs, 17.2, both,
                                      {detail::RecomputeRule::Latest, true, false, true});
  REQUIRE(fit);
  CHECK(fit->offloaded > 0);
  CHECK(fit->recomputed == 0);
  const Plan lowered = lower(fit->plan);
  CHECK(verifies_everywhere(lowered));
  const SimResult fitted = simulate(lowered, so);
  REQUIRE(fitted.ok());
  for (const RankStats& s : fitted.ranks) CHECK(s.peak_memory <= 17.2 + 1e-9);

  const SearchOptions free = free_p8();
  const double best = search(prof, free).makespan;
  CHECK(fitted.makespan <= 1.1 * best);
  // The search at that budget (was 315.95, +16.5%: 1F1B's order offloaded).
  SearchOptions o = free;
  o.memory_limit = 17.2;
  o.recompute = true;
  o.comm.host_bandwidth = 1;
  const SearchResult r = search(prof, o);
  CHECK(r.makespan <= 1.1 * best + 1e-9);
  CHECK(r.offloaded > 0);
  CHECK(r.peak_memory <= 17.2 + 1e-9);
  CHECK(verifies_everywhere(r.plan));
}

TEST_CASE("list scheduler: paced admission holds a round trip's microbatches, not the budget's",
          "[memory][search]") {
  // uniform32 at p = 8, m = 16, V mapping, v = 2 (two layers a stage), half of
  // 1F1B's budget: unpaced, the scheduler lets in what the budget allows (and
  // without reserving a microbatch's memory on both stages it starves);
  // paced at the busiest rank's work per microbatch (12) after one, each rank
  // holds about one round trip's worth and the pipeline stays full (246; the
  // free best is 199, 1.25x is 248.75).
  const LayerProfile prof = example("uniform32");
  const PlanMeta meta = v2_p8(Partition(16, 2));
  const CostModel costs = stage_costs(prof, meta.partition, CostModel{});
  const detail::StageTable table = detail::stage_table(costs, 16);
  const detail::GreedyKnobs plain{true, true, true, 1.0};  // the search's best unpaced
  detail::GreedyKnobs paced{true, false, false, 1.0};
  CHECK_FALSE(detail::list_schedule(meta, table, 16, paced));
  paced.pace = 1.0;
  paced.burst = 1;
  const auto unpaced = detail::list_schedule(meta, table, 16, plain);
  const auto g = detail::list_schedule(meta, table, 16, paced);
  REQUIRE(unpaced);
  REQUIRE(g);
  CHECK(g->makespan <= 246 + 1e-9);
  CHECK(g->peak <= 16 + 1e-9);
  CHECK(g->makespan < unpaced->makespan - 10);
  SimOptions o;
  o.costs = costs;
  const SimResult r = simulate(g->plan, o);
  REQUIRE(r.ok());
  CHECK(r.makespan == Approx(g->makespan));
  // The order admits microbatches paced: rank 0's first-stage forward of
  // microbatch j comes after the backward work of microbatch j - 6 or so
  // (about one round trip, 64, over 12 a microbatch): never more than 8
  // microbatches past the oldest one whose stage-0 backward has not run.
  const auto& list = g->plan.ranks[0];
  int forwards = 0, backwards = 0, most = 0;
  for (const Action& a : list) {
    if (a.stage != 0) continue;
    if (a.type == ActionType::F) ++forwards;
    if (a.type == ActionType::I) ++backwards;
    most = std::max(most, forwards - backwards);
  }
  CHECK(forwards == 16);
  CHECK(most <= 8);
  // The search finds it (or better) at that budget and verifies it.
  SearchOptions s = free_p8();
  s.memory_limit = 16;
  s.recompute = true;
  const SearchResult best = search(prof, s);
  CHECK(best.makespan <= 1.25 * 199 + 1e-9);  // 231 measured
  CHECK(best.peak_memory <= 16 + 1e-9);
  CHECK(verifies_everywhere(best.plan));
}

TEST_CASE("list scheduler: paced at 1.05x with 5% headroom, moe40 p8 at half of 1F1B's budget",
          "[memory][search]") {
  // moe40 at p = 8, m = 16, V mapping, v = 2 on the work-balanced partition,
  // half of 1F1B's budget (19.2): of the paced knobs every search pass tries
  // (all_knobs: pace 1, 1.1 or 1.2 after 0-2, the whole budget) the best
  // order runs 474.8; paced at 1.05x after one with forwards kept within 95%
  // of the budget (the first pass's extra knobs) it runs 457, and the search
  // then places its W passes anew and improves it locally to 433.2 without
  // a memory action (444.4 before; the free best is 344.8, 1.25x is 431).
  const LayerProfile prof = example("moe40");
  const PlanMeta meta = v2_p8({2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3});
  const detail::StageTable table =
      detail::stage_table(stage_costs(prof, meta.partition, CostModel{}), 16);
  double best_plain = std::numeric_limits<double>::infinity();
  for (const detail::GreedyKnobs& k : detail::all_knobs()) {
    if (k.pace <= 0) continue;
    if (const auto g = detail::list_schedule(meta, table, 19.2, k))
      best_plain = std::min(best_plain, g->makespan);
  }
  CHECK(best_plain == Approx(474.8));
  detail::GreedyKnobs k{true, false, false, 0.95};
  k.pace = 1.05;
  k.burst = 1;
  bool first_pass = false;
  for (const detail::GreedyKnobs& f : detail::first_pass_knobs())
    first_pass = first_pass || (f.split == k.split && f.forward_first == k.forward_first &&
                                f.reserve == k.reserve && f.memory_scale == k.memory_scale &&
                                f.pace == k.pace && f.burst == k.burst);
  CHECK(first_pass);
  const auto g = detail::list_schedule(meta, table, 19.2, k);
  REQUIRE(g);
  CHECK(g->makespan <= 457 + 1e-9);
  CHECK(g->peak <= 19.2 + 1e-9);
  SearchOptions s = free_p8();
  s.memory_limit = 19.2;
  s.recompute = true;
  const SearchResult r = search(prof, s);
  CHECK(r.makespan <= 433.2 + 1e-9);
  CHECK(r.peak_memory <= 19.2 + 1e-9);
  CHECK(verifies_everywhere(r.plan));
}

TEST_CASE("memory plan: wlight32 p4 at half of 1F1B's budget has a plan within 25% of free",
          "[memory][search]") {
  // The cell docs/memory.md lists as missed by the search (260): a plan
  // found offline by a local search over orders and recompute decisions
  // (tests/golden/memory/, loop v = 2, 4-layer stages). It shows the target
  // is reachable there: lowered, it is deadlock-free under all three
  // transports, runs 246.4 within the budget of 16 (free: 198, so +24.4%),
  // and recomputes 27 (stage, microbatch)s, most of ranks 0-2's first stage.
  const LayerProfile prof = example("wlight32");
  const std::string path = "tests/golden/memory/wlight32_p4_m8_b16.json";
  const Plan order = parse_json_plan(test::read_source_file(path), path);
  REQUIRE(order.is_compute_only());
  REQUIRE(order.meta.partition == Partition(8, 4));
  LowerOptions lo;
  lo.serial_safe = true;
  const Plan lowered = lower(order, lo);
  CHECK(verifies_everywhere(lowered));
  SimOptions so;
  so.costs = stage_costs(prof, order.meta.partition);
  const SimResult r = simulate(lowered, so);
  REQUIRE(r.ok());
  CHECK(r.makespan == Approx(246.4).margin(1e-9));
  int recomputes = 0;
  for (const auto& list : order.ranks)
    recomputes += static_cast<int>(std::count_if(
        list.begin(), list.end(), [](const Action& a) { return a.type == ActionType::Recompute; }));
  CHECK(recomputes == 27);
  for (const RankStats& s : r.ranks) CHECK(s.peak_memory <= 16 + 1e-9);
  CHECK(r.makespan <= 1.25 * search(prof, free_search(4, 8)).makespan + 1e-9);
}
