// Memory policies (--recompute, --offload, --offload-lead) on library
// schedules and plan files, and the search deciding memory per (stage,
// microbatch) under a budget (docs/memory.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/search.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::actions;
using pipeplan::test::run_cli;

namespace {

MemoryPolicy policy(const std::string& recompute, const std::string& offload, int lead = 1) {
  MemoryPolicy p;
  if (!recompute.empty()) p.recompute = parse_stage_set(recompute, "--recompute");
  if (!offload.empty()) p.offload = parse_stage_set(offload, "--offload");
  p.offload_lead = lead;
  return p;
}

std::string text_of(const Plan& p) {
  std::ostringstream s;
  write_text(p, s);
  return s.str();
}

LayerProfile example(const std::string& name) {
  const std::string path = "examples/layers/" + name + ".csv";
  return parse_layer_profile(test::read_source_file(path), path);
}

}  // namespace

TEST_CASE("memory policy: stage sets as users write them", "[memory][policy]") {
  CHECK(parse_stage_set("all", "--recompute").all);
  CHECK(parse_stage_set("0,2,4-7", "--recompute").stages == std::vector<int>{0, 2, 4, 5, 6, 7});
  CHECK(parse_stage_set("3,1,1", "--offload").stages == std::vector<int>{1, 3});
  CHECK(to_string(parse_stage_set("0,2,4-7,9", "x")) == "0,2,4-7,9");
  CHECK(to_string(parse_stage_set("all", "x")) == "all");
  for (const char* bad : {"", "a", "1-", "-1", "1,,2", "2.5", "all,1"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_stage_set(bad, "--recompute"), InputError);
  }
  CHECK_THROWS_WITH(parse_stage_set("3-1", "--offload"),
                    "--offload '3-1': the range 3-1 runs backwards");
  CHECK_THROWS_WITH(parse_stage_set("x", "--recompute"),
                    "--recompute 'x': expected 'all' or stages like 0,2,4-7 (got 'x')");
}

TEST_CASE("memory policy: exact orders on 1F1B", "[memory][policy]") {
  const Plan compute = plan_compute(Problem{"1f1b", 2, 3, 1});
  REQUIRE(text_of(compute) ==
          "rank 0: 0F0 0F1 0B0 0F2 0B1 0B2\n"
          "rank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n");
  CHECK(text_of(apply_memory_policy(compute, policy("all", ""))) ==
        "rank 0: 0F0 0F1 0RECOMPUTE0 0B0 0F2 0RECOMPUTE1 0B1 0RECOMPUTE2 0B2\n"
        "rank 1: 1F0 1RECOMPUTE0 1B0 1F1 1RECOMPUTE1 1B1 1F2 1RECOMPUTE2 1B2\n");
  // RELOAD one compute before the backward, never before its OFFLOAD.
  CHECK(text_of(apply_memory_policy(compute, policy("", "all"))) ==
        "rank 0: 0F0 0OFFLOAD0 0RELOAD0 0F1 0OFFLOAD1 0B0 0RELOAD1 0F2 0OFFLOAD2 0RELOAD2 0B1 "
        "0B2\n"
        "rank 1: 1F0 1OFFLOAD0 1RELOAD0 1B0 1F1 1OFFLOAD1 1RELOAD1 1B1 1F2 1OFFLOAD2 1RELOAD2 "
        "1B2\n");
  // Lead 0: right before the backward; both: RELOAD, then RECOMPUTE; stage 0 only.
  CHECK(text_of(apply_memory_policy(compute, policy("0", "0", 0))) ==
        "rank 0: 0F0 0OFFLOAD0 0F1 0OFFLOAD1 0RELOAD0 0RECOMPUTE0 0B0 0F2 0OFFLOAD2 0RELOAD1 "
        "0RECOMPUTE1 0B1 0RELOAD2 0RECOMPUTE2 0B2\n"
        "rank 1: 1F0 1B0 1F1 1B1 1F2 1B2\n");
  // Split backward: before the I; the W is untouched.
  const Plan zb = plan_compute(Problem{"zb-h1", 2, 2, 1});
  for (const auto& list : apply_memory_policy(zb, policy("all", "")).ranks)
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i].type == ActionType::I) {
        REQUIRE(i > 0);
        CHECK(list[i - 1] == make(ActionType::Recompute, list[i].stage, list[i].microbatch));
      }
}

TEST_CASE("memory policy: misuse is an input error naming it", "[memory][policy]") {
  const Plan compute = plan_compute(Problem{"1f1b", 2, 3, 1});
  CHECK_THROWS_WITH(apply_memory_policy(compute, policy("5", "")),
                    "the recompute policy names stage 5, but the plan has 2 stages (0..1)");
  CHECK_THROWS_WITH(apply_memory_policy(compute, policy("", "all", -1)),
                    "the offload lead must be >= 0 computes, got -1");
  Problem fo{"1f1b", 2, 3, 1};
  fo.forward_only = true;
  CHECK_THROWS_WITH(apply_memory_policy(plan_compute(fo), policy("all", "")),
                    "a forward-only plan keeps no activations for a backward: nothing to "
                    "recompute or offload");
  const Plan twice = apply_memory_policy(compute, policy("all", ""));
  CHECK_THROWS_AS(apply_memory_policy(twice, policy("all", "")), InputError);
  CHECK(apply_memory_policy(compute, MemoryPolicy{}) == compute);
}

TEST_CASE("memory policy: every schedule x shapes with --recompute all and --offload all verifies",
          "[memory][policy]") {
  SimOptions host;
  host.costs.host_bandwidth = 2.0;
  for (const ScheduleInfo& info : schedules())
    for (int p : {2, 4})
      for (int m : {p, 2 * p + 1})
        for (const MemoryPolicy& pol : {policy("all", ""), policy("", "all"),
                                        policy("all", "all", 2), policy("", "all", 0)}) {
          std::vector<int> vs = info.allowed_stages_per_rank;
          if (vs.empty()) vs = {1, 2};
          for (int v : vs) {
            CAPTURE(info.name, p, m, v, to_string(pol.recompute), to_string(pol.offload));
            std::optional<Planner> planner;
            try {
              planner.emplace(Problem{info.name, p, m, v});
            } catch (const InputError&) {
              continue;  // the schedule rejects this shape
            }
            const Plan compute = apply_memory_policy(planner->compute(), pol);
            REQUIRE(compute.has_memory_actions());
            CHECK(check_structure(compute).empty());
            // Serial-safe: so that the order also runs under the serial model.
            LoweringChoice safe;
            safe.serial_safe = true;
            const Plan lowered = lower(compute, planner->lowering(safe));
            for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
              CAPTURE(to_string(t));
              CHECK(verify(lowered, {t}).ok());
            }
            const SimResult r = simulate(lowered, host);
            CHECK(r.ok());
            // Offloaded: while on host, off the device.
            if (pol.recompute.empty()) {
              double host_peak = 0;
              for (const RankStats& s : r.ranks)
                host_peak = std::max(host_peak, s.peak_host_memory);
              CHECK(host_peak > 0);
            }
          }
        }
}

TEST_CASE("memory policy: hand-computed peaks", "[memory][policy][simulate]") {
  // 1F1B p=4 m=8, full recompute, stages of activation 4 keeping 0.5: rank r
  // holds the inputs of its 4 - r in-flight microbatches plus one activation.
  std::string csv = "name,F,B,W,activation,input\n";
  for (int l = 0; l < 8; ++l) csv += "l" + std::to_string(l) + ",1,2,1,2,0.5\n";
  const LayerProfile profile = parse_layer_profile(csv);
  SimOptions o;
  o.costs = stage_costs(profile, balanced_partition(profile, 4));
  const Planner planner(Problem{"1f1b", 4, 8, 1});
  const SimResult r = simulate(
      lower(apply_memory_policy(planner.compute(), policy("all", "")), planner.lowering()), o);
  REQUIRE(r.ok());
  for (int rank = 0; rank < 4; ++rank)
    CHECK(r.ranks[static_cast<std::size_t>(rank)].peak_memory == Approx(0.5 * (4 - rank) + 4.0));
  // Offload on one rank, copies free (no --host-bw): the forward's
  // activation, and the one reloaded a compute ahead of its backward.
  Plan one;
  one.meta.schedule = "custom";
  one.meta.pp_degree = 1;
  one.meta.num_microbatches = 3;
  one.rank_ids = {0};
  one.ranks = {actions("0F0 0F1 0F2 0B2 0B1 0B0")};
  const Plan off = apply_memory_policy(one, policy("", "all"));
  CHECK(text_of(off) ==
        "rank 0: 0F0 0OFFLOAD0 0F1 0OFFLOAD1 0F2 0OFFLOAD2 0RELOAD2 0RELOAD1 0B2 0RELOAD0 0B1 "
        "0B0\n");
  const SimResult ro = simulate(off);
  REQUIRE(ro.ok());
  CHECK(ro.ranks[0].peak_memory == 2.0);  // 3 kept
  CHECK(ro.ranks[0].peak_host_memory == 2.0);
  CHECK(ro.makespan == simulate(one).makespan);
}

TEST_CASE("memory policy: the CLI flags on plan, lower, simulate, render and compare",
          "[memory][policy][cli]") {
  auto r = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "3", "--recompute", "all",
                    "--compute-only", "-f", "text"});
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "rank 0: 0F0 0F1 0RECOMPUTE0 0B0 0F2 0RECOMPUTE1 0B1 0RECOMPUTE2 0B2\n"
        "rank 1: 1F0 1RECOMPUTE0 1B0 1F1 1RECOMPUTE1 1B1 1F2 1RECOMPUTE2 1B2\n");
  r = run_cli({"plan", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", "2", "--offload",
               "all", "--offload-lead", "2", "-f", "csv"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("OFFLOAD") != std::string::npos);
  CHECK(r.out.find("SEND_F") != std::string::npos);
  // lower a compute-only file with a policy
  r = run_cli({"lower", "-", "--recompute", "1", "-f", "text"},
              "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("1RECOMPUTE0 1B0") != std::string::npos);
  CHECK(r.out.find("0RECOMPUTE") == std::string::npos);
  r = run_cli({"simulate", "-s", "1f1b", "-p", "4", "-m", "8", "--offload", "all", "--host-bw", "1",
               "-f", "json"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("\"peak_host_memory\"") != std::string::npos);
  r = run_cli({"render", "-s", "1f1b", "-p", "2", "-m", "3", "--offload", "all", "--host-bw", "1",
               "--svg", "-"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find(">copy</text>") != std::string::npos);
  r = run_cli({"compare", "-p", "4", "-m", "8", "--recompute", "all", "--schedules", "1f1b,zb-h1"});
  CHECK(r.exit_code == 0);
  // Misuse: exit 2 with the reason.
  r = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "3", "--offload-lead", "2"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--offload-lead places the RELOADs of --offload: give --offload too") !=
        std::string::npos);
  r = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "3", "--recompute", "7"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("names stage 7, but the plan has 2 stages") != std::string::npos);
  r = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "3", "--recompute", "x-y"});
  CHECK(r.exit_code == 2);
  r = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "3", "--forward-only", "--offload", "all"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("forward-only") != std::string::npos);
}

TEST_CASE("memory search: below 1F1B's budget, plans with memory actions fit and verify",
          "[memory][search]") {
  const LayerProfile prof = example("gpt50");
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 4;
  o.num_microbatches = 8;
  o.time_limit = 60;  // ends well before: deterministic, whatever the load
  const double full = search(prof, o).memory_limit;
  for (double factor : {0.5, 0.25}) {
    CAPTURE(factor);
    o.memory_limit = full * factor;
    const SearchResult r = search(prof, o);
    CHECK(r.peak_memory <= *o.memory_limit + 1e-9);
    CHECK(r.plan.has_memory_actions());
    CHECK(r.recomputed > 0);
    for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial})
      CHECK(verify(r.plan, {t}).ok());
    if (r.best_library_recompute) CHECK(r.makespan < r.best_library_recompute->makespan);
    CHECK(r.lower_bound <= r.makespan + 1e-9);
  }
  // Forbidding recompute at a quarter: nothing fits.
  o.memory_limit = full * 0.25;
  o.recompute = false;
  CHECK_THROWS_AS(search(prof, o), BudgetError);
  // Offload with a host bandwidth: fits and verifies, never slower than recompute alone.
  o.recompute = true;
  o.memory_limit = full * 0.5;
  const SearchResult rec = search(prof, o);
  o.comm.host_bandwidth = 1.0;
  const SearchResult off = search(prof, o);
  CHECK(off.peak_memory <= *o.memory_limit + 1e-9);
  CHECK(off.makespan <= rec.makespan + 1e-9);
  CHECK(verify(off.plan, {Transport::Serial}).ok());
}

TEST_CASE("memory search: the lower bound's memory term with recompute and offload",
          "[memory][search]") {
  // Four layers on two ranks (F 1, B 2, activation 1), m = 8, transfer 0.5,
  // budget 1.5: kept, the first stage holds one microbatch at a time,
  // 1 + 8 x 9 = 73 (the head's F, eight round trips of 9).
  LayerProfile prof;
  for (int l = 0; l < 4; ++l) prof.layers.push_back({"l" + std::to_string(l), 1, 2, 1, 1, {}, {}});
  const double plain = makespan_lower_bound(prof, 2, 8, 0.5);  // no memory term
  CHECK(plain < 73);
  CHECK(makespan_lower_bound(prof, 2, 8, 0.5, nullptr, 1.5) == Approx(73));
  // Recomputing keeps the input (default: the activation, 1): still one at a time.
  CHECK(makespan_lower_bound(prof, 2, 8, 0.5, nullptr, 1.5, {true, false}) == Approx(73));
  // Offloaded, a microbatch may leave the device: no memory term.
  CHECK(makespan_lower_bound(prof, 2, 8, 0.5, nullptr, 1.5, {false, true}) == Approx(plain));
  // Inputs of 0.1: fifteen recomputed microbatches fit, 1 + 1 x 9 = 10 binds
  // nothing. The drain term still sees the budget: a forward its rank runs
  // unheld before its first backward is recomputed after it, at the cost of
  // its F, so at most 1.5 of that rank's 16 of F run before its wait of
  // 4 + 1 + 3 x 0.5: 6.5 + 32 + 14.5 = 53 (49.5 without a budget).
  for (Layer& l : prof.layers) l.input = 0.1;
  std::string why;
  CHECK(makespan_lower_bound(prof, 2, 8, 0.5, &why, 1.5, {true, false}) == Approx(53));
  CHECK(why.find("drain") != std::string::npos);  // not the memory term
  CHECK(makespan_lower_bound(prof, 2, 8, 0.5, nullptr, 1.5) == Approx(73));
  // A recompute cheaper than the forward saves work: back to no budget at all.
  LayerProfile cheap = prof;
  for (Layer& l : cheap.layers) l.recompute = 0.5;
  CHECK(makespan_lower_bound(cheap, 2, 8, 0.5, nullptr, 1.5, {true, false}) == Approx(plain));
  // The search at that budget recomputes, beats every plan keeping its
  // activations (>= 73) and stays above its own bound.
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 2;
  o.num_microbatches = 8;
  o.comm.comm_latency = 0.5;
  o.memory_limit = 1.5;
  o.time_limit = 60;
  const SearchResult r = search(prof, o);
  CHECK(r.recomputed > 0);
  CHECK(r.peak_memory <= 1.5 + 1e-9);
  CHECK(r.makespan < 73);
  CHECK(r.lower_bound == Approx(53));
  CHECK(r.lower_bound <= r.makespan + 1e-9);
}
