// V-Half and V-Min (Qi et al., "Pipeline Parallelism with Controllable
// Memory", 2024): compute orders equal the orders of sail-sg's generator
// (tests/golden/sail_vshape, provenance in its README), and the peak
// activation per rank is about a half / a third of 1F1B's at F = I = W.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "pipeplan/error.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

const std::string kFixtureDir = std::string(PIPEPLAN_TEST_DIR) + "/golden/sail_vshape";

Problem problem(const std::string& name, int p, int m, int v = 0) {
  Problem pr;
  pr.schedule = name;
  pr.pp_degree = p;
  pr.num_microbatches = m;
  pr.stages_per_rank = v;
  return pr;
}

/// The most live activation on any rank, in whole-rank units (1F1B's
/// microbatch on its one stage), simulated at F = I = W = 1 (B = 2).
double peak_rank_activation(const std::string& name, int p, int m) {
  const SimResult r = simulate(plan(problem(name, p, m)));
  REQUIRE(r.ok());
  double peak = 0;
  for (const RankStats& s : r.ranks) peak = std::max(peak, s.peak_rank_activations);
  return peak;
}

}  // namespace

TEST_CASE("v_shape: compute orders equal sail-sg's zbv_greedy.py", "[schedules][v-shape]") {
  const auto fixtures = pipeplan::test::order_fixtures(kFixtureDir);
  REQUIRE(fixtures.size() == 44);  // 22 shapes each of v-half and v-min
  for (const auto& f : fixtures) {
    INFO(f.file);
    const std::vector<std::string>& expected = f.ranks;
    const Plan plan = plan_compute(problem(f.name, f.p, f.m));
    REQUIRE(plan.ranks.size() == expected.size());
    for (std::size_t r = 0; r < expected.size(); ++r) {
      INFO("rank " << r);
      CHECK(to_string(plan.ranks[r]) == expected[r]);
    }
  }
}

TEST_CASE("v_shape: peak activation is about 1/2 (V-Half) and 1/3 (V-Min) of 1F1B's",
          "[schedules][v-shape][memory]") {
  // The paper's figures: 1F1B holds p microbatches on its first rank; V-Half
  // about p/2 and V-Min about p/3, plus one, on every rank.
  for (int p : {2, 3, 4, 5, 6, 8, 12, 16})
    for (int m : {2 * p, 3 * p, 4 * p}) {
      INFO("p=" << p << " m=" << m);
      const double base = peak_rank_activation("1f1b", p, m);
      const double half = peak_rank_activation("v-half", p, m);
      const double min = peak_rank_activation("v-min", p, m);
      CHECK(base == p);
      CHECK(half == p / 2 + 1);
      CHECK(min == (p + 1) / 3 + 1);
      CHECK(half <= base / 2 + 1);
      CHECK(min <= (base + 4) / 3);
      // and no more than ZB-V's (1F1B's) anywhere
      CHECK(min <= half);
      CHECK(half <= base);
    }
  // Large p: the ratios approach the paper's.
  CHECK(peak_rank_activation("v-half", 16, 48) / 16 == Approx(9.0 / 16));
  CHECK(peak_rank_activation("v-min", 16, 48) / 16 == Approx(6.0 / 16));
}

TEST_CASE("v_shape: every rank runs 6m actions; plans verify under every transport model",
          "[schedules][v-shape]") {
  for (const std::string name : {"v-half", "v-min"})
    for (int p : {1, 2, 3, 4, 5, 8})
      for (int m : {1, 2, p, 2 * p + 1, 3 * p}) {
        INFO(name << " p=" << p << " m=" << m);
        const Plan pl = plan(problem(name, p, m));
        for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial})
          CHECK(verify(pl, {t}).ok());
        const Plan compute = plan_compute(problem(name, p, m));
        for (const auto& rank : compute.ranks) CHECK(rank.size() == std::size_t(6 * m));
      }
}

TEST_CASE("v_shape: names, the V mapping and shape errors", "[schedules][v-shape]") {
  CHECK(find_schedule("V-Half").name == "v-half");
  CHECK(find_schedule("v_min").name == "v-min");
  for (const std::string name : {"v-half", "v-min"}) {
    const ScheduleInfo& info = find_schedule(name);
    CHECK(info.mapping == StageMapping::V);
    CHECK(info.default_stages_per_rank == 2);
  }
  CHECK_THROWS_WITH(plan_compute(problem("v-half", 4, 8, 3)),
                    "v-half: supports stages_per_rank 2, got 3; pass stages_per_rank 2");
  PlanMeta meta;
  meta.schedule = "v-min";
  meta.pp_degree = 2;
  meta.num_microbatches = 4;
  meta.stages_per_rank = 1;
  meta.mapping = StageMapping::V;
  CHECK_THROWS_WITH(
      find_schedule("v-min").check_shape(meta),
      "v-min: needs exactly 2 stages per rank (V mapping), got 1; pass stages_per_rank 2");
}
