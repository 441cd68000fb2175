// Bidirectional DualPipe (DeepSeek) and microbatch routes: compute orders
// equal DeepSeek's own step() (tests/golden/deepseek_dualpipe, provenance in
// its README); plans lower, verify under every model and runtime, simulate;
// routes survive JSON and are refused where a format cannot carry them;
// mutants off a route or short of one are named.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "pipeplan/compare.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"
#include "pipeplan/transport.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

const std::string kFixtureDir = std::string(PIPEPLAN_TEST_DIR) + "/golden/deepseek_dualpipe";

Problem problem(int p, int m, int v = 0, bool forward_only = false) {
  Problem pr;
  pr.schedule = "dualpipe";
  pr.pp_degree = p;
  pr.num_microbatches = m;
  pr.stages_per_rank = v;
  pr.forward_only = forward_only;
  return pr;
}

bool has_code(const std::vector<Diagnostic>& diags, const std::string& code) {
  return std::any_of(diags.begin(), diags.end(),
                     [&](const Diagnostic& d) { return d.code == code; });
}

}  // namespace

TEST_CASE("dualpipe: compute orders equal DeepSeek's DualPipe.step", "[schedules][dualpipe]") {
  const auto fixtures = pipeplan::test::order_fixtures(kFixtureDir);
  REQUIRE(fixtures.size() == 14);
  for (const auto& f : fixtures) {
    INFO(f.file);
    const std::vector<std::string>& expected = f.ranks;
    const Plan plan = plan_compute(problem(f.p, f.m));
    REQUIRE(plan.ranks.size() == expected.size());
    for (std::size_t r = 0; r < expected.size(); ++r) {
      INFO("rank " << r);
      CHECK(to_string(plan.ranks[r]) == expected[r]);
    }
  }
}

TEST_CASE("dualpipe: two routes, half the microbatches each, in opposite directions",
          "[schedules][dualpipe][routes]") {
  const Plan plan = plan_compute(problem(4, 8));
  const PlanMeta& meta = plan.meta;
  CHECK(meta.mapping == StageMapping::V);
  CHECK(meta.num_stages() == 8);
  REQUIRE(meta.routes.size() == 8);
  for (int mb = 0; mb < 4; ++mb) CHECK(meta.route_of(mb) == Route{0, 3});
  for (int mb = 4; mb < 8; ++mb) CHECK(meta.route_of(mb) == Route{4, 7});
  // The reverse pipeline starts on the last rank and ends on rank 0.
  CHECK(meta.rank_of(4) == 3);
  CHECK(meta.rank_of(7) == 0);
  CHECK(meta.on_route(2, 1));
  CHECK_FALSE(meta.on_route(5, 1));
  // Every microbatch runs F and B (or I and W) on exactly its p stages.
  std::size_t computes = 0;
  for (const auto& rank : plan.ranks)
    for (const Action& a : rank) {
      CHECK(meta.on_route(a.stage, a.microbatch));
      if (a.type == ActionType::OverlapFB) CHECK(meta.on_route(a.sub_stage, a.sub_microbatch));
      computes += a.type == ActionType::OverlapFB ? 2 : (a.type == ActionType::W ? 0 : 1);
    }
  CHECK(computes == std::size_t(2 * 8 * 4));  // F and B/I per (mb, stage on its route)
  // Plans without routes keep the default: every stage for every microbatch.
  const Plan v = plan_compute([] {
    Problem pr;
    pr.schedule = "dualpipev";
    pr.pp_degree = 4;
    pr.num_microbatches = 8;
    return pr;
  }());
  CHECK_FALSE(v.meta.has_routes());
  CHECK(v.meta.route_of(3) == Route{0, 7});
}

TEST_CASE("dualpipe: plans lower, verify under every model and runtime, and simulate",
          "[schedules][dualpipe][routes]") {
  for (int p : {2, 4, 6, 8})
    for (int m : {2 * p, 2 * p + 2, 4 * p, 6 * p}) {
      INFO("p=" << p << " m=" << m);
      const Plan pl = plan(problem(p, m));
      CHECK(pl.meta.has_routes());
      for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
        const VerifyResult r = verify(pl, {t});
        INFO(to_string(t) << ": "
                          << (r.diagnostics.empty() ? std::string() : r.diagnostics[0].message));
        CHECK(r.ok());
      }
      CHECK(verify(pl, verify_options(runtime_named("dualpipe"))).ok());
      const SimResult sim = simulate(pl);
      CHECK(sim.ok());
      CHECK(sim.makespan > 0);
      // Inference: the forward projection lowers and verifies too.
      const Plan fwd = plan(problem(p, m, 0, true));
      CHECK(verify(fwd, {Transport::Rendezvous}).ok());
      CHECK(verify(fwd, {Transport::Serial}).ok());
    }
}

TEST_CASE("dualpipe: shape errors follow DeepSeek's asserts", "[schedules][dualpipe]") {
  CHECK(find_schedule("DualPipe").name == "dualpipe");
  CHECK(find_schedule("dualpipev").name == "dualpipev");
  CHECK_THROWS_WITH(plan_compute(problem(3, 12)),
                    "dualpipe: needs an even pp_degree (DualPipe asserts num_ranks % 2 == 0), got "
                    "3; use pp_degree 4");
  CHECK_THROWS_WITH(plan_compute(problem(4, 9)),
                    "dualpipe: needs an even number of microbatches, at least 2 * pp_degree = 8 "
                    "(DualPipe asserts num_chunks % 2 == 0 and num_chunks >= num_ranks * 2), got "
                    "9; use num_microbatches 10 or more, even");
  CHECK_THROWS_WITH(plan_compute(problem(4, 6)),
                    "dualpipe: needs an even number of microbatches, at least 2 * pp_degree = 8 "
                    "(DualPipe asserts num_chunks % 2 == 0 and num_chunks >= num_ranks * 2), got "
                    "6; use num_microbatches 8 or more, even");
  CHECK_THROWS_AS(plan_compute(problem(4, 8, 1)), ShapeError);
}

TEST_CASE("routes: a microbatch's work off its route or missing on it is named",
          "[verify][routes]") {
  const Plan good = plan(problem(4, 8));
  REQUIRE(verify(good).ok());

  SECTION("a forward on a stage off the route") {
    Plan bad = good;
    // Rank 0 holds stages 0 and 7; microbatch 1 crosses 0..3.
    bad.ranks[0].push_back(make(ActionType::F, 7, 1));
    const VerifyResult r = verify(bad);
    REQUIRE_FALSE(r.ok());
    REQUIRE(has_code(r.diagnostics, "off-route"));
    const Diagnostic& d = r.diagnostics.front();
    CHECK(d.code == "off-route");
    CHECK(d.rank == 0);
    CHECK(d.action == "7F1");
    CHECK(d.message == "rank 0 index " + std::to_string(good.ranks[0].size()) +
                           ": 7F1 runs stage 7 for microbatch 1, which does not cross it: its "
                           "route is stages 0..3");
  }
  SECTION("a missing backward on the route") {
    Plan bad = compute_projection(good);
    auto& list = bad.ranks[1];  // stages 1 and 6; 1B2 is a full backward there
    const auto it = std::find(list.begin(), list.end(), make(ActionType::B, 1, 2));
    REQUIRE(it != list.end());
    list.erase(it);
    const VerifyResult r = verify(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.diagnostics.front().code == "missing-backward");
    CHECK(r.diagnostics.front().message ==
          "stage 1 microbatch 2 has no backward (expected 1B2, or 1I2 and 1W2, on rank 1)");
  }
  SECTION("a send out of the route's last stage has no peer") {
    Plan bad = good;
    bad.ranks[3].push_back(make(ActionType::SendF, 3, 0));  // stage 3 ends route 0
    const VerifyResult r = verify(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.diagnostics.front().code == "bad-comm");
    CHECK(r.diagnostics.front().message ==
          "rank 3 index " + std::to_string(good.ranks[3].size()) +
              ": 3SEND_F0 has no peer: stage 3 is the last stage of microbatch 0's route "
              "(stages 0..3)");
  }
  SECTION("without its routes the plan owes every stage: refused as before") {
    Plan bare = good;
    bare.meta.routes.clear();
    const VerifyResult r = verify(bare);
    REQUIRE_FALSE(r.ok());
    CHECK(has_code(r.diagnostics, "missing-forward"));
  }
  SECTION("the simulator refuses work off a route") {
    Plan bad = compute_projection(good);
    bad.ranks[0].insert(bad.ranks[0].begin(), make(ActionType::F, 7, 1));
    const SimResult sim = simulate(bad);
    REQUIRE_FALSE(sim.ok());
    bool named = false;
    for (const Diagnostic& d : sim.problems)
      named |= d.message.find("off microbatch 1's route (stages 0..3)") != std::string::npos;
    CHECK(named);
  }
}

TEST_CASE("routes: JSON round trip; CSV, torch's CSV refuse", "[io][routes]") {
  const Plan pl = plan(problem(2, 4));
  std::ostringstream json;
  write_json(pl, json);
  CHECK(json.str().find("  \"routes\": [\"0-1\", \"0-1\", \"2-3\", \"2-3\"],\n") !=
        std::string::npos);
  const Plan back = parse_json_plan(json.str());
  CHECK(back == pl);
  CHECK(back.meta.routes == pl.meta.routes);

  // A plan without routes writes no "routes" field (every golden file holds).
  Problem v;
  v.schedule = "dualpipev";
  v.pp_degree = 2;
  v.num_microbatches = 4;
  std::ostringstream plain;
  write_json(plan(v), plain);
  CHECK(plain.str().find("routes") == std::string::npos);

  std::ostringstream csv;
  CHECK_THROWS_WITH(write_csv(pl, csv),
                    "CSV cannot carry microbatch routes (the dualpipe plan routes its "
                    "microbatches over part of the stages): write it as json");
  CHECK_THROWS_WITH(write_torch_csv(pl, csv),
                    Catch::Contains("torch's runtime sends every microbatch through every stage"));

  // Bad route tables are input errors with their path.
  auto with_routes = [&](const std::string& routes) {
    std::string text = json.str();
    const std::size_t at = text.find("  \"routes\"");
    const std::size_t end = text.find('\n', at);
    return text.replace(at, end - at, "  \"routes\": " + routes + ",");
  };
  CHECK_THROWS_WITH(parse_json_plan(with_routes("[\"0-1\", \"0-1\", \"2-3\"]")),
                    Catch::Contains("routes: holds 3 routes for 4 microbatches"));
  CHECK_THROWS_WITH(parse_json_plan(with_routes("[\"0-1\", \"0-1\", \"2-3\", \"3-2\"]")),
                    Catch::Contains("routes[3]: expected \"first-last\" with first <= last"));
  CHECK_THROWS_WITH(parse_json_plan(with_routes("[\"0-1\", \"0-1\", \"2-3\", \"2-4\"]")),
                    Catch::Contains("routes[3]: stage 4 is out of range 0..3"));
  CHECK_THROWS_WITH(parse_json_plan(with_routes("[\"0-1\", \"0-1\", \"2-3\", 7]")),
                    Catch::Contains("routes[3]: expected a string \"first-last\", got number"));
  CHECK_THROWS_WITH(parse_json_plan(with_routes("{}")),
                    Catch::Contains("routes: expected an array"));
}

TEST_CASE("dualpipe: compare costs every rank m shares of work, as 1f1b", "[dualpipe][compare]") {
  CompareRequest req;
  req.pp_degree = 4;
  req.num_microbatches = 8;
  req.schedules = {"1f1b", "dualpipe", "dualpipev"};
  const std::vector<ComparisonRow> rows = compare_schedules(req, SimOptions{});
  std::map<std::string, const ComparisonRow*> by_name;
  for (const ComparisonRow& r : rows) by_name[r.schedule] = &r;
  REQUIRE(by_name.size() == 3);
  for (const auto& [name, row] : by_name) {
    INFO(name);
    REQUIRE(row->skipped.empty());
    // Each rank runs m = 8 microbatches of one rank's share: F = 1, B = 2.
    for (const RankStats& s : row->ranks) CHECK(s.busy == Approx(8 * 3.0));
  }
  // With a layer profile DualPipe's stages are not one split of the model.
  req.layers = parse_layer_profile("name,F,B,W,activation\na,1,2,1,1\nb,1,2,1,1\nc,1,2,1,1\n"
                                   "d,1,2,1,1\ne,1,2,1,1\nf,1,2,1,1\ng,1,2,1,1\nh,1,2,1,1\n");
  for (const ComparisonRow& r : compare_schedules(req, SimOptions{}))
    if (r.schedule == "dualpipe") CHECK(r.skipped.find("route") != std::string::npos);
}
