// torch-compatible schedules: Interleaved1F1B, LoopedBFS,
// InterleavedZeroBubble, ZBVZeroBubble, DualPipeV. Goldens come from
// tests/golden/torch/gen_torch_orders.py, an independent transcription of
// torch 2.11's algorithms (see docs/schedules.md).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "pipeplan/error.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"

using namespace pipeplan;

namespace {

const std::string kGoldenDir = std::string(PIPEPLAN_TEST_DIR) + "/golden/torch";

using Shape = std::tuple<std::string, int, int, int>;  // schedule, p, m, v

/// The test grid: p 1..8, m 1..32, and each schedule's v values.
const std::vector<std::pair<std::string, std::vector<int>>> kGrid = {
    {"interleaved-1f1b", {1, 2, 3, 4}},
    {"looped-bfs", {1, 2, 3, 4}},
    {"interleaved-zb", {1, 2, 3, 4}},
    {"zbv", {2}},
    {"dualpipev", {2}},
};

Problem problem(const std::string& name, int p, int m, int v) {
  Problem pr;
  pr.schedule = name;
  pr.pp_degree = p;
  pr.num_microbatches = m;
  pr.stages_per_rank = v;
  return pr;
}

/// "zbv_p4_m8_v2.txt" -> ("zbv", 4, 8, 2).
Shape parse_golden_name(const std::string& file) {
  std::string stem = file.substr(0, file.size() - 4);
  std::vector<std::string> parts;
  std::stringstream ss(stem);
  for (std::string part; std::getline(ss, part, '_');) parts.push_back(part);
  REQUIRE(parts.size() == 4);
  return {parts[0], std::stoi(parts[1].substr(1)), std::stoi(parts[2].substr(1)),
          std::stoi(parts[3].substr(1))};
}

std::vector<std::string> golden_files() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(kGoldenDir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".txt" && name != "refused.txt") out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::set<Shape> refused_shapes() {
  std::ifstream in(kGoldenDir + "/refused.txt");
  REQUIRE(in.good());
  std::set<Shape> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name;
    int p = 0, m = 0, v = 0;
    ls >> name >> p >> m >> v;
    out.insert({name, p, m, v});
  }
  return out;
}

std::string shape_text(const std::string& name, int p, int m, int v) {
  return name + " p=" + std::to_string(p) + " m=" + std::to_string(m) + " v=" + std::to_string(v);
}

}  // namespace

TEST_CASE("schedules_torch: compute orders equal the torch 2.11 goldens", "[schedules][torch]") {
  const auto files = golden_files();
  // Every schedule has goldens, including the p=2, m=4, v=2 ones checked by hand.
  REQUIRE(files.size() == 27);
  for (const auto& [name, vs] : kGrid) {
    (void)vs;
    CHECK(std::find(files.begin(), files.end(), name + "_p2_m4_v2.txt") != files.end());
  }
  for (const auto& file : files) {
    const auto [name, p, m, v] = parse_golden_name(file);
    INFO(file);
    std::ifstream in(kGoldenDir + "/" + file);
    std::vector<std::string> expected;
    for (std::string line; std::getline(in, line);) expected.push_back(line);
    const Plan plan = plan_compute(problem(name, p, m, v));
    REQUIRE(static_cast<int>(expected.size()) == p);
    REQUIRE(plan.ranks.size() == expected.size());
    for (int r = 0; r < p; ++r) {
      INFO("rank " << r);
      CHECK(to_string(plan.ranks[static_cast<std::size_t>(r)]) ==
            expected[static_cast<std::size_t>(r)]);
    }
  }
}

TEST_CASE("schedules_torch: hand-checked p=2 m=4 v=2 orders", "[schedules][torch]") {
  // Worked out by hand in docs/schedules.md from torch's formulas.
  Plan p = plan_compute(problem("Interleaved1F1B", 2, 4, 2));
  CHECK(to_string(p.ranks[0]) == "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3");
  CHECK(to_string(p.ranks[1]) == "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3");
  p = plan_compute(problem("DualPipeV", 2, 4, 2));
  CHECK(to_string(p.ranks[0]) ==
        "0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B 3B2 "
        "(3F3;0B1)OVERLAP_F_B 3B3 0I2 0W2 0I3 0W3");
  CHECK(to_string(p.ranks[1]) ==
        "1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0)OVERLAP_F_B (1F3;2B1)OVERLAP_F_B "
        "(2F3;1B1)OVERLAP_F_B 2B2 1B2 2I3 1I3 2W3 1W3");
  p = plan_compute(problem("ZBVZeroBubble", 2, 4, 2));
  CHECK(to_string(p.ranks[0]) ==
        "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 "
        "0I2 0W2 0I3 0W3");
  // m < 2p-1: ZB-V plans 3 microbatches and drops microbatch 2.
  p = plan_compute(problem("zbv", 2, 2, 2));
  CHECK(to_string(p.ranks[0]) == "0F0 0F1 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 0I1 0W1");
  CHECK(to_string(p.ranks[1]) == "1F0 2F0 1F1 2F1 2I0 2W0 1I0 1W0 2I1 2W1 1I1 1W1");
}

TEST_CASE("schedules_torch: refuses exactly the shapes torch refuses", "[schedules][torch]") {
  const std::set<Shape> refused = refused_shapes();
  std::size_t thrown = 0;
  for (const auto& [name, vs] : kGrid) {
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 32; ++m)
        for (int v : vs) {
          const bool expect_refusal = refused.count({name, p, m, v}) > 0;
          INFO(shape_text(name, p, m, v));
          if (expect_refusal) {
            CHECK_THROWS_AS(plan_compute(problem(name, p, m, v)), ShapeError);
            ++thrown;
          } else {
            CHECK_NOTHROW(plan_compute(problem(name, p, m, v)));
          }
        }
  }
  CHECK(thrown == refused.size());
  CHECK(thrown == 372 + 372 + 64);
}

TEST_CASE("schedules_torch: shape errors name the constraint and a fix", "[schedules][torch]") {
  CHECK_THROWS_WITH(
      plan_compute(problem("interleaved-1f1b", 4, 9, 2)),
      "interleaved-1f1b: needs num_microbatches divisible by its number of rounds "
      "max(1, m / pp_degree) = 2, got m=9 with pp_degree=4 (torch refuses this shape); "
      "use num_microbatches 8 or num_microbatches 10 (any multiple of pp_degree=4 works)");
  CHECK_THROWS_WITH(
      plan_compute(problem("InterleavedZeroBubble", 4, 13, 3)),
      "interleaved-zb: needs num_microbatches divisible by its number of rounds "
      "max(1, m / pp_degree) = 3, got m=13 with pp_degree=4 (torch refuses this shape); "
      "use num_microbatches 12 or num_microbatches 15 (any multiple of pp_degree=4 works)");
  CHECK_THROWS_WITH(plan_compute(problem("dualpipev", 4, 5, 2)),
                    "dualpipev: needs at least as many microbatches as stages (2 * pp_degree = "
                    "8), got 5 (torch refuses this shape); use num_microbatches 8 or more, or at "
                    "most pp_degree 2");
  CHECK_THROWS_WITH(plan_compute(problem("dualpipev", 3, 1, 2)),
                    "dualpipev: needs at least as many microbatches as stages (2 * pp_degree = "
                    "6), got 1 (torch refuses this shape); use num_microbatches 6 or more");
  CHECK_THROWS_WITH(plan_compute(problem("ZBVZeroBubble", 4, 8, 3)),
                    "zbv: supports stages_per_rank 2, got 3; pass stages_per_rank 2");
  for (int v : {1, 3, 4}) {
    CHECK_THROWS_AS(plan_compute(problem("zbv", 4, 8, v)), ShapeError);
    CHECK_THROWS_AS(plan_compute(problem("dualpipev", 4, 8, v)), ShapeError);
  }
  // The checks also hold when called without resolve()'s v filter.
  PlanMeta meta;
  meta.schedule = "zbv";
  meta.pp_degree = 2;
  meta.num_microbatches = 4;
  meta.stages_per_rank = 3;
  meta.mapping = StageMapping::V;
  CHECK_THROWS_WITH(
      find_schedule("zbv").check_shape(meta),
      "zbv: needs exactly 2 stages per rank (V mapping), got 3; pass stages_per_rank 2");
}

TEST_CASE("schedules_torch: names, aliases, mappings and defaults", "[schedules][torch]") {
  const std::vector<std::pair<std::string, std::string>> aliases = {
      {"Interleaved1F1B", "interleaved-1f1b"},
      {"ScheduleInterleaved1F1B", "interleaved-1f1b"},
      {"LoopedBFS", "looped-bfs"},
      {"ScheduleLoopedBFS", "looped-bfs"},
      {"InterleavedZeroBubble", "interleaved-zb"},
      {"ScheduleInterleavedZeroBubble", "interleaved-zb"},
      {"ZBVZeroBubble", "zbv"},
      {"ScheduleZBVZeroBubble", "zbv"},
      {"DualPipeV", "dualpipev"},
      {"ScheduleDualPipeV", "dualpipev"},
      {"interleaved_zb", "interleaved-zb"},
      {"zb-v", "zbv"},
  };
  for (const auto& [alias, name] : aliases) CHECK(find_schedule(alias).name == name);
  for (const char* name : {"interleaved-1f1b", "looped-bfs", "interleaved-zb"}) {
    const ScheduleInfo& info = find_schedule(name);
    CHECK(info.mapping == StageMapping::Loop);
    CHECK(info.default_stages_per_rank == 2);
    CHECK(info.allowed_stages_per_rank.empty());
    CHECK(plan_compute(problem(name, 4, 8, 0)).meta.stages_per_rank == 2);
  }
  for (const char* name : {"zbv", "dualpipev"}) {
    const ScheduleInfo& info = find_schedule(name);
    CHECK(info.mapping == StageMapping::V);
    CHECK(info.allowed_stages_per_rank == std::vector<int>{2});
  }
}

TEST_CASE("schedules_torch: every action runs on the rank owning its stage", "[schedules][torch]") {
  // V mapping as torch places it: rank r holds stages r and 2p-1-r.
  for (int p = 1; p <= 8; ++p) {
    const Plan zbv = plan_compute(problem("zbv", p, 2 * p + 1, 2));
    const Plan dpv = plan_compute(problem("dualpipev", p, 2 * p + 1, 2));
    for (int r = 0; r < p; ++r) {
      CHECK(zbv.meta.stages_of(r) == std::vector<int>{r, 2 * p - 1 - r});
      for (const Plan* plan : {&zbv, &dpv})
        for (const Action& a : plan->ranks[static_cast<std::size_t>(r)]) {
          CHECK(plan->meta.rank_of(a.stage) == r);
          if (a.type == ActionType::OverlapFB) CHECK(plan->meta.rank_of(a.sub_stage) == r);
        }
    }
  }
  for (const char* name : {"interleaved-1f1b", "looped-bfs", "interleaved-zb"}) {
    const Plan plan = plan_compute(problem(name, 3, 6, 3));
    for (int r = 0; r < 3; ++r)
      for (const Action& a : plan.ranks[static_cast<std::size_t>(r)]) CHECK(a.stage % 3 == r);
  }
}

TEST_CASE("schedules_torch: sweep plans, lowers and verifies under rendezvous and eager",
          "[schedules][torch][sweep]") {
  std::size_t accepted = 0, refused = 0, failures = 0;
  for (const auto& [name, vs] : kGrid) {
    const ScheduleInfo& info = find_schedule(name);
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 32; ++m)
        for (int v : vs) {
          Plan compute;
          try {
            compute = plan_compute(problem(name, p, m, v));
          } catch (const ShapeError&) {
            ++refused;
            continue;
          }
          ++accepted;
          const Plan lowered = lower(compute, info.lowering);
          for (Transport t : {Transport::Rendezvous, Transport::Eager}) {
            VerifyOptions options;
            options.transport = t;
            const VerifyResult result = verify(lowered, options);
            if (!result.ok()) {
              ++failures;
              INFO(shape_text(name, p, m, v) << " under " << to_string(t));
              CHECK(format_diagnostics(result.diagnostics) == "");
            }
          }
        }
  }
  CHECK(failures == 0);
  CHECK(refused == 372 + 372 + 64);
  CHECK(accepted == 3 * 8 * 32 * 4 + 2 * 8 * 32 - refused);
}
