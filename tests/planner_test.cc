// The schedule table, name lookup, shape checks and per-rank planning.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "pipeplan/error.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

using namespace pipeplan;

TEST_CASE("planner: schedule names are unique across names and aliases", "[planner]") {
  std::set<std::string> seen;
  for (const auto& s : schedules()) {
    INFO(s.name);
    CHECK(seen.insert(s.name).second);
    for (const auto& a : s.aliases) {
      INFO(a);
      CHECK(&find_schedule(a) == &s);
    }
    CHECK(!s.origin.empty());
    CHECK(!s.constraints.empty());
    CHECK(s.plan_rank);
    CHECK(s.check_shape);
  }
  CHECK(find_schedule("gpipe").name == "gpipe");
  CHECK(find_schedule("Schedule1F1B").name == "1f1b");
  CHECK(find_schedule("1F1B").name == "1f1b");
}

TEST_CASE("planner: an unknown schedule suggests the closest name", "[planner]") {
  CHECK_THROWS_AS(find_schedule("nope-nope-nope"), InputError);
  CHECK_THROWS_WITH(find_schedule("1f1c"),
                    Catch::StartsWith("unknown schedule '1f1c' (did you mean '1f1b'?)"));
  CHECK_THROWS_WITH(find_schedule("gpip"), Catch::Contains("did you mean 'gpipe'?"));
}

TEST_CASE("planner: 1f1b with fewer microbatches than stages is refused with a fix", "[planner]") {
  CHECK_THROWS_AS(plan(Problem{"1f1b", 4, 3, 0}), ShapeError);
  CHECK_THROWS_WITH(
      plan(Problem{"1f1b", 4, 3, 0}),
      "1f1b: needs at least pp_degree=4 microbatches, got 3 (the warmup cannot fill the "
      "pipeline); use num_microbatches 4 or more, fewer stages (pp_degree 3), or the gpipe "
      "schedule");
  CHECK_NOTHROW(plan(Problem{"gpipe", 4, 3, 0}));
  // The library names parameters; a front end spells them its own way.
  try {
    plan(Problem{"1f1b", 4, 3, 0});
    FAIL("1f1b with m < p was accepted");
  } catch (const ShapeError& e) {
    CHECK(e.message("-p", "-m", "-v") ==
          "1f1b: needs at least pp_degree=4 microbatches, got 3 (the warmup cannot fill the "
          "pipeline); use -m 4 or more, fewer stages (-p 3), or the gpipe schedule");
  }
}

TEST_CASE("planner: impossible shapes name the problem", "[planner]") {
  CHECK_THROWS_WITH(plan(Problem{"gpipe", 0, 3, 0}),
                    Catch::Contains("pp_degree must be at least 1, got 0"));
  CHECK_THROWS_WITH(plan(Problem{"gpipe", 2, 0, 0}),
                    Catch::Contains("needs at least 1 microbatch, got 0"));
  CHECK_THROWS_WITH(plan(Problem{"gpipe", 2, 2, 2}),
                    "gpipe: supports stages_per_rank 1, got 2; pass stages_per_rank 1");
  CHECK_THROWS_WITH(plan(Problem{"gpipe", 2, 2, -1}),
                    Catch::Contains("stages_per_rank must be positive"));
  // The limits readers and the verifier apply too (limits.h), checked up front.
  CHECK_THROWS_WITH(
      plan(Problem{"gpipe", 100000, 100000, 0}),
      Catch::Contains("gpipe: pp_degree 100000 is more than the supported 65536 ranks"));
  CHECK_THROWS_WITH(
      plan(Problem{"gpipe", 4096, 2048, 0}),
      Catch::Contains("stages x microbatches = 4096 x 2048 = 8388608 is more than the "
                      "supported 4194304"));
}

TEST_CASE("planner: compute orders of gpipe and 1f1b", "[planner]") {
  Plan g = plan_compute(Problem{"gpipe", 2, 3, 0});
  CHECK(to_string(g.ranks[1]) == "1F0 1F1 1F2 1B2 1B1 1B0");
  Plan o = plan_compute(Problem{"1f1b", 4, 6, 0});
  CHECK(to_string(o.ranks[0]) == "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0B3 0B4 0B5");
  CHECK(to_string(o.ranks[2]) == "2F0 2F1 2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2B5");
  CHECK(to_string(o.ranks[3]) == "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5");
}

TEST_CASE("planner: one rank's plan equals that rank of the whole plan", "[planner]") {
  for (const auto& s : {"gpipe", "1f1b"}) {
    Problem pr{s, 4, 8, 0};
    Plan whole = plan(pr);
    Plan whole_c = plan_compute(pr);
    for (int r = 0; r < 4; ++r) {
      Plan one = plan_rank(pr, r);
      REQUIRE(one.rank_ids == std::vector<int>{r});
      CHECK(one.ranks[0] == whole.ranks[static_cast<std::size_t>(r)]);
      CHECK(plan_compute_rank(pr, r).ranks[0] == whole_c.ranks[static_cast<std::size_t>(r)]);
    }
    CHECK_THROWS_WITH(plan_rank(pr, 4), "rank 4 is out of range for pp_degree 4 (valid: 0..3)");
  }
}

TEST_CASE("planner: lowering choices apply to the schedule's own lowering, for the costs given",
          "[planner]") {
  const PlanMeta zbv = resolve(Problem{"zbv", 4, 8, 0});
  const PlanMeta one = resolve(Problem{"1f1b", 4, 8, 0});
  CostModel free_transfers;
  CostModel slow = free_transfers;
  slow.comm_latency = 0.1;
  slow.comm_bandwidth = 100;
  slow.transfer_bytes = 40;
  LoweringChoice stated;
  stated.transfer_cost_stated = true;

  // Nothing chosen: the schedule's own mode; latency hiding plans for the
  // nominal latency when no transfer cost was stated and transfers are free.
  LowerOptions o = lower_options(zbv, {}, free_transfers);
  CHECK(o.mode == LowerMode::LatencyHiding);
  CHECK(o.costs.transfer_time() == kNominalLatency);
  CHECK(o.costs.comm_bandwidth == 0.0);
  CHECK(lower_options(one, stated, slow).mode == LowerMode::Seed);
  // A transfer cost stated (--comm 0 included), or brought by a calibrated
  // file (costs with a transfer time), is planned for as it is.
  CHECK(lower_options(zbv, stated, free_transfers).costs.transfer_time() == 0.0);
  CHECK(lower_options(zbv, {}, slow).costs.transfer_time() == 0.5);
  CHECK(lower_options(zbv, stated, slow).costs.transfer_time() == 0.5);
  // The rule itself, for callers that build LowerOptions of their own.
  CHECK(planning_costs(free_transfers).comm_latency == kNominalLatency);
  CHECK(planning_costs(free_transfers, stated).comm_latency == 0.0);
  CHECK(planning_costs(slow).comm_latency == slow.comm_latency);
  CHECK(planning_costs(slow).comm_bandwidth == slow.comm_bandwidth);

  LoweringChoice choice = stated;
  choice.mode = LowerMode::LatencyHiding;
  choice.max_prefetch = 3;
  choice.serial_safe = true;
  o = lower_options(one, choice, slow);
  CHECK(o.mode == LowerMode::LatencyHiding);
  CHECK(o.max_prefetch == 3);
  CHECK(o.serial_safe);
  CHECK(o.costs.transfer_time() == 0.5);
  choice.mode = LowerMode::Seed;
  CHECK(lower_options(zbv, choice, slow).mode == LowerMode::Seed);
  choice.max_prefetch = -1;
  CHECK_THROWS_AS(lower_options(zbv, choice, slow), InputError);
}

TEST_CASE("planner: loop-mapped multi-stage schedules keep one transfer order per rank",
          "[planner]") {
  // Their wrap-around (rank p-1 to rank 0) makes per-pair orders cross under
  // the serial model; one order per rank costs nothing under rendezvous for
  // the nominal costs, so their default keeps it there.
  const std::set<std::string> one_order = {
      "interleaved-1f1b", "looped-bfs", "interleaved-zb", "vpp", "vpp-fthenb", "vpp-balanced"};
  for (const auto& info : schedules()) {
    INFO(info.name);
    CHECK(info.lowering.serial_safe == (one_order.count(info.name) > 0));
  }
  const Problem issue{"interleaved-1f1b", 4, 4, 2};
  const Planner planner(issue);
  const PlanMeta& meta = planner.meta();
  CostModel none, slow;
  slow.comm_latency = 1.0;
  LoweringChoice stated;
  stated.transfer_cost_stated = true;
  CHECK(planner.lowering().serial_safe);
  CHECK(lower_options(meta, {}, none).serial_safe);
  // Stated costs (--comm 0 included) get per-pair orders, searched for them.
  CHECK_FALSE(lower_options(meta, stated, slow).serial_safe);
  CHECK_FALSE(lower_options(meta, stated, none).serial_safe);
  CHECK_FALSE(lower_options(meta, {}, slow).serial_safe);
  // Other modes: the exact lowering takes no serial-safe order; the seed's.
  LoweringChoice exact, seed;
  exact.mode = LowerMode::Exact;
  seed.mode = LowerMode::Seed;
  CHECK_FALSE(lower_options(meta, exact, none).serial_safe);
  CHECK_FALSE(lower_options(meta, seed, none).serial_safe);
  // Asked for, serial safety holds whatever the costs.
  LoweringChoice safe = stated;
  safe.serial_safe = true;
  CHECK(lower_options(meta, safe, slow).serial_safe);
  // Why: the default plan runs under serial, the per-pair one deadlocks, and
  // both take the same time under rendezvous.
  const Plan plan_default = plan(issue);
  LowerOptions per_pair = planner.lowering();
  per_pair.serial_safe = false;
  const Plan plan_pairs = planner.plan(per_pair);
  CHECK(verify(plan_default, {Transport::Serial}).ok());
  CHECK_FALSE(verify(plan_pairs, {Transport::Serial}).ok());
  SimOptions so;
  so.costs = nominal_costs();
  CHECK(simulate(plan_default, so).makespan == simulate(plan_pairs, so).makespan);
}

TEST_CASE("planner: a Planner plans as the planner's free functions do", "[planner]") {
  CostModel costs;
  costs.comm_latency = 0.5;
  LoweringChoice choice;
  choice.max_prefetch = 2;
  for (const ScheduleInfo& s : schedules()) {
    INFO(s.name);
    const Problem pr{s.name, 4, 8, 0};
    const Planner planner(pr);
    CHECK(planner.meta() == resolve(pr));
    CHECK(&planner.schedule() == &find_schedule(s.name));
    const LowerOptions own = planner.lowering();
    CHECK(own.mode == schedule_lowering(planner.meta()).mode);
    CHECK(own.send_placement == schedule_lowering(planner.meta()).send_placement);
    CHECK(planner.compute() == plan_compute(pr));
    const Plan lowered = planner.plan(own);
    CHECK(lowered == plan(pr));
    CHECK(planner.plan_rank(3, own) == plan_rank(pr, 3));
    CHECK(planner.compute_rank(1) == plan_compute_rank(pr, 1));
    // The front ends' entry: the problem, the choice and the cost model.
    CHECK(plan(pr, choice, costs) ==
          lower(plan_compute(pr), lower_options(resolve(pr), choice, costs)));
  }
  CHECK_THROWS_WITH(Planner(Problem{"1f1b", 4, 8, 0}).compute_rank(-1),
                    "rank -1 is out of range for pp_degree 4 (valid: 0..3)");
  CHECK_THROWS_AS(Planner(Problem{"1f1b", 4, 2, 0}), ShapeError);
}

TEST_CASE("planner: the table's rows are whole", "[planner]") {
  for (const ScheduleInfo& s : schedules()) {
    INFO(s.name);
    CHECK(!s.aliases.empty());
    CHECK(!s.description.empty());
    CHECK(s.default_stages_per_rank >= 1);
    if (!s.allowed_stages_per_rank.empty())
      CHECK(std::count(s.allowed_stages_per_rank.begin(), s.allowed_stages_per_rank.end(),
                       s.default_stages_per_rank) == 1);
    CHECK(default_lowering(s.name).mode == s.lowering.mode);
  }
  // gpipe and 1f1b keep the seed driver's order; the rest hide latency.
  CHECK(find_schedule("gpipe").lowering.mode == LowerMode::Seed);
  CHECK(find_schedule("1f1b").lowering.send_placement == SendPlacement::ParityStaggered);
  CHECK(find_schedule("zbv").lowering.mode == LowerMode::LatencyHiding);
  CHECK(find_schedule("zbv").mapping == StageMapping::V);
  CHECK(find_schedule("vpp-balanced").allowed_stages_per_rank.empty());
}
