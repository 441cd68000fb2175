// Cost options as users give them (CLI flags, Python keywords) and the
// schedule comparison built on them.
#include <catch2/catch.hpp>

#include <string>

#include "pipeplan/compare.h"
#include "pipeplan/cost_options.h"
#include "pipeplan/error.h"
#include "pipeplan/planner.h"

using namespace pipeplan;

namespace {

std::string options_error(const CostOptions& given) {
  try {
    make_sim_options(given);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("cost options: text becomes SimOptions", "[cost_options]") {
  CostOptions given;
  given.cost = "F=2,B=3";
  given.comm = "0.5,100";
  given.bytes = 50;
  given.model = "eager";
  const SimOptions o = make_sim_options(given);
  CHECK(o.costs.f == 2);
  CHECK(o.costs.b == 3);
  CHECK(o.costs.transfer_time() == 1.0);
  CHECK(o.transport == Transport::Eager);

  given = CostOptions{};
  given.stage_costs = "stage,SCALE\n1,2\n";
  CHECK(make_sim_options(given).costs.stage_scales.at(1).b == 2);
}

TEST_CASE("cost options: a calibrated file brings absolute costs and its transfer",
          "[cost_options]") {
  CostOptions given;
  given.stage_costs =
      R"({"absolute": true, "time_unit": "ms", "calibrated_from": {"stages_per_rank": 2},
          "comm": {"latency": 0.2}, "stages": [{"stage": 0, "F": 2, "B": 4, "I": 2, "W": 2},
          {"stage": 1, "F": 1, "B": 2, "I": 1, "W": 1}]})";
  StageCosts file;
  SimOptions o = make_sim_options(given, &file);
  CHECK(file.absolute);
  CHECK(o.costs.f == 1);
  CHECK(o.costs.comm_latency == Approx(0.2));
  given.comm = "1";
  CHECK(make_sim_options(given).costs.comm_latency == 1);
  use_rank_share(o, file);  // mean stage (F 1.5, B 3) times the 2 measured stages per rank
  CHECK(o.costs.f == Approx(3.0));
  CHECK(o.costs.b == Approx(6.0));
  CHECK(o.costs.stage_scales.empty());
}

TEST_CASE("cost options: bad options are named in the library's words, the CLI adds --",
          "[cost_options]") {
  CostOptions given;
  given.comm = "x";
  CHECK(options_error(given) == "comm latency 'x' is not a non-negative number");
  given.name_prefix = "--";
  CHECK(options_error(given) == "--comm latency 'x' is not a non-negative number");
  given.comm = "1,-2";
  CHECK(options_error(given) == "--comm bandwidth '-2' is not a non-negative number");
  given = CostOptions{};
  given.bytes = -1;
  CHECK(options_error(given) == "bytes '-1' is not a non-negative number");
  given = CostOptions{};
  given.model = "nccl";
  CHECK(options_error(given) == "model 'nccl' is not a transport (rendezvous, eager, serial)");
  given = CostOptions{};
  given.cost = "F";
  given.name_prefix = "--";
  CHECK(options_error(given) == "--cost: 'F' is not KEY=VALUE (e.g. F=1,B=2,I=1,W=1)");
  given = CostOptions{};
  given.stage_costs = "stage,F\nx,1\n";
  given.stage_costs_source = "costs.csv";
  CHECK(options_error(given).rfind("costs.csv:", 0) == 0);
}

static CompareRequest request(int pp, int m, std::vector<std::string> schedules) {
  CompareRequest r;
  r.pp_degree = pp;
  r.num_microbatches = m;
  r.schedules = std::move(schedules);
  return r;
}

TEST_CASE("compare: every schedule on one shape, fastest first, rejections last",
          "[cost_options]") {
  const std::vector<ComparisonRow> rows = compare_schedules(request(4, 8, {}), SimOptions{});
  REQUIRE(rows.size() == schedules().size());
  bool skipped_seen = false;
  double last = 0;
  for (const ComparisonRow& r : rows) {
    if (!r.skipped.empty()) {
      skipped_seen = true;
      continue;
    }
    CHECK_FALSE(skipped_seen);  // rows that ran come first
    CHECK(r.problems.empty());
    CHECK(r.makespan >= last);
    last = r.makespan;
  }
  const auto two = compare_schedules(request(4, 2, {"1f1b", "gpipe"}), SimOptions{});
  REQUIRE(two.size() == 2);
  CHECK(two[0].schedule == "gpipe");
  CHECK(two[1].skipped.rfind("needs at least pp_degree=4 microbatches", 0) == 0);
  CHECK_THROWS_AS(compare_schedules(request(4, 8, {"nosuch"}), SimOptions{}), InputError);
}
