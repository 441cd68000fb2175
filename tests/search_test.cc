// Layer profiles, partitions and the plan search.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ir/numbers.h"
#include "model/split.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/search.h"
#include "pipeplan/verify.h"
#include "search/exact.h"
#include "search/greedy.h"
#include "search/improve.h"
#include "search/refine.h"
#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <tuple>

using namespace pipeplan;
using pipeplan::test::run_cli;

namespace {

LayerProfile uniform(int n, double f = 1, double b = 2, double w = 1, double act = 1) {
  LayerProfile p;
  for (int i = 0; i < n; ++i) p.layers.push_back({"l" + std::to_string(i), f, b, w, act});
  return p;
}

LayerProfile example(const std::string& name) {
  const std::string path = "examples/layers/" + name + ".csv";
  return parse_layer_profile(test::read_source_file(path), path);
}

std::string error_of(const std::string& text) {
  try {
    parse_layer_profile(text, "m.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("profile: reads name,F,B,W,activation with comments", "[search]") {
  const LayerProfile p = parse_layer_profile(
      "# a model\nname,F,B,W,activation\nembed, 0.5, 1, 0.5, 2 # cheap\n\nhead,3,6,2,1\n", "m.csv");
  REQUIRE(p.size() == 2);
  CHECK(p.layers[0] == Layer{"embed", 0.5, 1, 0.5, 2});
  CHECK(p.layers[1].i() == 4);
}

TEST_CASE("profile: bad rows are located errors", "[search]") {
  CHECK(error_of("embed,1,2,1,1\n") ==
        "m.csv:1: expected the header 'name,F,B,W,activation', got 'embed,1,2,1,1'");
  CHECK(error_of("name,F,B,W,activation\na,1,2,1\n") ==
        "m.csv:2: expected 5 columns (name,F,B,W,activation), got 4");
  CHECK(error_of("name,F,B,W,activation\na,1,x,1,1\n") ==
        "m.csv:2: column 'B' of layer 'a': 'x' is not a finite non-negative number");
  CHECK(error_of("name,F,B,W,activation\na,1,2,1,1\nb,1,2,3,1\n") ==
        "m.csv:3: layer 'b': W (3) exceeds B (2); W is the weight-gradient part of the backward");
  CHECK(error_of("name,F,B,W,activation\na,1,2,1,-1\n").find("column 'activation'") !=
        std::string::npos);
  CHECK(error_of("# nothing\n") ==
        "m.csv: empty layer profile (expected the header 'name,F,B,W,activation')");
  CHECK(error_of("name,F,B,W,activation\n") == "m.csv: the layer profile lists no layers");
  // The shared limits: costs beyond kMaxCost, long text quoted in part.
  CHECK(error_of("name,F,B,W,activation\na,1e13,2,1,1\n") ==
        "m.csv:2: column 'F' of layer 'a': 1e13 is more than the supported 1e+12");
  const std::string long_name(100, 'n');
  CHECK(error_of("name,F,B,W,activation\n" + long_name + ",1,x,1,1\n") ==
        "m.csv:2: column 'B' of layer '" + std::string(64, 'n') +
            "... (100 bytes)': 'x' is not a finite non-negative number");
}

TEST_CASE("search: shapes beyond the shared limits are refused up front", "[search]") {
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 2;
  o.num_microbatches = 1 << 21;
  CHECK_THROWS_AS(search(uniform(4), o), ShapeError);
  o.num_microbatches = 4;
  o.max_stages_per_rank = 0;
  CHECK_THROWS_WITH(search(uniform(4), o), "the largest v tried must be 1..4096, got 0");
}

namespace {

// The partition as pipeplan computed it before issue 25: two passes of one
// O(stages x layers^2) DP over prefix sums. The reference the fast split
// must reproduce.
Partition reference_split(const LayerProfile& profile, int num_stages, bool by_work) {
  const std::size_t N = profile.size(), S = static_cast<std::size_t>(num_stages);
  std::vector<double> prefix(N + 1, 0.0);
  for (std::size_t l = 0; l < N; ++l)
    prefix[l + 1] = prefix[l] + (by_work ? profile.layers[l].f + profile.layers[l].b
                                         : profile.layers[l].activation);
  auto cost = [&](std::size_t b, std::size_t e) { return prefix[e] - prefix[b]; };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(N + 1, inf));
  best[0][0] = 0;
  for (std::size_t s = 1; s <= S; ++s)
    for (std::size_t e = s; e + (S - s) <= N; ++e)
      for (std::size_t b = s - 1; b < e; ++b)
        if (best[s - 1][b] < inf)
          best[s][e] = std::min(best[s][e], std::max(best[s - 1][b], cost(b, e)));
  const double limit = best[S][N] * (1 + 1e-12) + 1e-12;
  std::vector<std::vector<double>> sq(S + 1, std::vector<double>(N + 1, inf));
  std::vector<std::vector<int>> from(S + 1, std::vector<int>(N + 1, -1));
  sq[0][0] = 0;
  for (std::size_t s = 1; s <= S; ++s)
    for (std::size_t e = s; e + (S - s) <= N; ++e)
      for (std::size_t b = s - 1; b < e; ++b) {
        const double c = cost(b, e);
        if (sq[s - 1][b] == inf || c > limit) continue;
        const double v = sq[s - 1][b] + c * c;
        if (v < sq[s][e]) sq[s][e] = v, from[s][e] = static_cast<int>(b);
      }
  Partition counts(S);
  std::size_t e = N;
  for (std::size_t s = S; s >= 1; --s) {
    const auto b = static_cast<std::size_t>(from[s][e]);
    counts[s - 1] = static_cast<int>(e - b);
    e = b;
  }
  return counts;
}

double most_expensive(const LayerProfile& profile, const Partition& part) {
  double top = 0;
  int layer = 0;
  for (int n : part) {
    top = std::max(top, layer_work(profile, layer, layer + n));
    layer += n;
  }
  return top;
}

}  // namespace

TEST_CASE("profile: the fast split is the exhaustive DP's, on ties and uneven profiles",
          "[search]") {
  // Issue 25: the DP took O(stages x layers^2); the split is now a bisection
  // on the bottleneck and a windowed least-squares evening. Same answers.
  std::mt19937 rng(25);
  int compared = 0;
  for (int round = 0; round < 400; ++round) {
    const int n = 1 + static_cast<int>(rng() % 36);
    LayerProfile p;
    for (int l = 0; l < n; ++l) {
      Layer x;
      x.name = "l" + std::to_string(l);
      switch (round % 4) {
        case 0: x.f = 1, x.b = 2; break;                  // uniform: many ties
        case 1: x.f = rng() % 4, x.b = rng() % 5; break;  // small integers, zeros
        case 2: x.f = 0.1 + (rng() % 1000) / 97.0, x.b = (rng() % 1000) / 31.0; break;  // fractions
        default: x.f = l == n / 2 ? 40 : 1, x.b = l == 0 ? 9 : 2; break;  // heavy outliers
      }
      x.w = x.b / 2;
      x.activation = 1 + rng() % 3;
      p.layers.push_back(x);
    }
    for (int stages = 1; stages <= n; stages += 1 + static_cast<int>(rng() % 3)) {
      INFO("round " << round << ", " << n << " layers, " << stages << " stages");
      CHECK(balanced_partition(p, stages) == reference_split(p, stages, true));
      CHECK(detail::split_min_max(p, stages, detail::SplitBy::Memory) ==
            reference_split(p, stages, false));
      ++compared;
    }
  }
  CHECK(compared > 1000);
}

TEST_CASE("profile: large profiles split in time by the layers, the bottleneck exact", "[search]") {
  // 2^20 layers (the documented limit) into 16 and into 65,536 stages; a
  // profile whose one heavy layer leaves every other stage slack (the
  // evening falls back to shares there, the bottleneck stays exact).
  LayerProfile big = uniform(1 << 20);
  for (std::size_t l = 0; l < big.size(); l += 7) big.layers[l].f = 1.5;
  for (int stages : {16, 65536}) {
    const Partition part = balanced_partition(big, stages);
    REQUIRE(part.size() == static_cast<std::size_t>(stages));
    check_partition(big, part, stages);
  }
  LayerProfile slack = uniform(100000);
  slack.layers[50000].f = 300000;
  const Partition part = balanced_partition(slack, 1000);
  check_partition(slack, part, 1000);
  CHECK(most_expensive(slack, part) == Approx(300002));
  for (int n : part) CHECK(n <= 100000 / 500);  // evened, not one stage taking the rest
  // A time limit stops the rank balancing (search --time-limit).
  PlanMeta meta;
  meta.pp_degree = 8;
  meta.stages_per_rank = 4;
  const Partition stopped = detail::split_rank_balanced(uniform(4096), meta, [] { return true; });
  check_partition(uniform(4096), stopped, 32);
}

TEST_CASE("profile: balanced partition minimises the most expensive stage", "[search]") {
  LayerProfile p = uniform(6);
  p.layers[5].f = 6, p.layers[5].b = 12;  // a head as heavy as six layers
  CHECK(balanced_partition(p, 2) == Partition{5, 1});
  CHECK(balanced_partition(uniform(8), 4) == Partition{2, 2, 2, 2});
  CHECK_THROWS_AS(balanced_partition(uniform(3), 4), ShapeError);
  CHECK_THROWS_WITH(check_partition(uniform(4), {1, 2}, 2),
                    "the partition covers 3 layers, but the layer profile has 4");
}

TEST_CASE("profile: stage costs sum their layers and peak memory is weighted", "[search]") {
  LayerProfile p = uniform(4);
  p.layers[3] = {"head", 2, 5, 1, 3};
  const CostModel c = stage_costs(p, {3, 1});
  CHECK(c.duration(make(ActionType::F, 0, 0)) == 3);
  CHECK(c.duration(make(ActionType::B, 1, 0)) == 5);
  CHECK(c.duration(make(ActionType::I, 1, 0)) == 4);
  CHECK(c.duration(make(ActionType::W, 1, 0)) == 1);
  CHECK(c.stage_memory == std::vector<double>{3, 3});
  SimOptions o;
  o.costs = c;
  const SimResult r = simulate(plan(Problem{"gpipe", 2, 3, 1}), o);
  REQUIRE(r.ok());
  // gpipe holds every microbatch: 3 x 3 on both ranks.
  CHECK(r.ranks[0].peak_memory == 9);
  CHECK(r.ranks[1].peak_memory == 9);
  CHECK(r.ranks[0].peak_activations == 3);
}

TEST_CASE("profile: a plan's partition survives the JSON round trip", "[search]") {
  Plan p = plan(Problem{"1f1b", 2, 2, 1});
  p.meta.partition = {3, 1};
  std::ostringstream out;
  write_json(p, out);
  CHECK(out.str().find("\"partition\": [3, 1],") != std::string::npos);
  CHECK(parse_json_plan(out.str()) == p);
  std::string bad = out.str();
  bad.replace(bad.find("[3, 1]"), 6, "[3, 0]");
  CHECK_THROWS_WITH(parse_json_plan(bad, "x.json"),
                    "x.json: partition[1]: 0 is below the minimum 1");
  bad = out.str();
  bad.replace(bad.find("[3, 1]"), 6, "[4]");
  CHECK_THROWS_WITH(
      parse_json_plan(bad, "x.json"),
      "x.json: partition: holds 1 layer counts for 2 stages (pp_degree * stages_per_rank)");
}

TEST_CASE("search: the list scheduler's makespan is the simulator's", "[search]") {
  const LayerProfile prof = example("gpt50");
  for (StageMapping mapping : {StageMapping::Loop, StageMapping::V}) {
    PlanMeta meta;
    meta.pp_degree = 4, meta.num_microbatches = 8, meta.stages_per_rank = 2, meta.mapping = mapping;
    meta.partition = balanced_partition(prof, 8);
    CostModel comm;
    comm.comm_latency = 0.3;
    const CostModel costs = stage_costs(prof, meta.partition, comm);
    for (bool split : {false, true}) {
      auto g = detail::list_schedule(meta, detail::stage_table(costs, 8), 1e9,
                                     detail::GreedyKnobs{split, false, false, 1.0});
      REQUIRE(g);
      SimOptions o;
      o.costs = costs;
      const SimResult r = simulate(g->plan, o);
      REQUIRE(r.ok());
      CHECK(r.makespan == Approx(g->makespan));
      double peak = 0;
      for (const auto& s : r.ranks) peak = std::max(peak, s.peak_memory);
      CHECK(peak == Approx(g->peak));
    }
  }
}

namespace {
void check_result(const SearchResult& r, const SearchOptions& o) {
  CHECK(r.peak_memory <= r.memory_limit + 1e-9);
  CHECK(r.lower_bound <= r.makespan + 1e-9);
  REQUIRE(r.best_library);
  CHECK(r.makespan <= r.best_library->makespan + 1e-9);
  CHECK(r.plan.meta.partition.size() == static_cast<std::size_t>(r.plan.meta.num_stages()));
  for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial})
    CHECK(verify(r.plan, {t}).ok());
  // The plan file alone reproduces the reported numbers.
  std::ostringstream out;
  write_json(r.plan, out);
  const Plan back = parse_json_plan(out.str());
  CHECK(back == r.plan);
  (void)o;
}
}  // namespace

TEST_CASE("search: never worse than the library, fits the budget, verifies everywhere",
          "[search]") {
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 4;
  o.num_microbatches = 8;
  for (const char* name : {"uniform32", "gpt50", "wheavy32"}) {
    CAPTURE(name);
    const SearchResult r = search(example(name), o);
    check_result(r, o);
  }
}

TEST_CASE("search: beats the library on an uneven profile with communication", "[search]") {
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 4;
  o.num_microbatches = 8;
  o.comm.comm_latency = 0.5;
  // Far above what it needs (about a second): a loaded or sanitized run must
  // not cut a phase short; the result is decided by work, not by the clock.
  o.time_limit = 120;
  const SearchResult r = search(example("gpt50"), o);
  check_result(r, o);
  CHECK_FALSE(r.time_limited);
  CHECK(r.makespan < r.best_library->makespan * 0.97);
}

TEST_CASE("search: budgets between the library's memory levels", "[search]") {
  const LayerProfile prof = example("uniform32");
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 4;
  o.num_microbatches = 8;
  const double one_f_one_b = search(prof, o).memory_limit;
  for (double factor : {0.6, 1.5}) {
    CAPTURE(factor);
    o.memory_limit = one_f_one_b * factor;
    const SearchResult r = search(prof, o);
    CHECK(r.peak_memory <= *o.memory_limit + 1e-9);
    if (r.best_library) CHECK(r.makespan <= r.best_library->makespan + 1e-9);
    CHECK(r.lower_bound <= r.makespan);
  }
}

TEST_CASE("search: no plan fits names the smallest budget that works", "[search]") {
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 4;
  o.num_microbatches = 8;
  o.memory_limit = 0.5;
  const LayerProfile prof = example("uniform32");
  double smallest = 0;
  try {
    search(prof, o);
    FAIL("expected BudgetError");
  } catch (const BudgetError& e) {
    smallest = e.smallest_budget;
    CHECK(std::string(e.what()).find("the smallest budget that works is") != std::string::npos);
  }
  o.memory_limit = smallest;
  const SearchResult r = search(prof, o);
  CHECK(r.peak_memory <= smallest + 1e-9);
}

TEST_CASE("search: deterministic", "[search]") {
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 4;
  o.num_microbatches = 8;
  o.comm.comm_latency = 0.2;
  // Work limits decide, not the wall clock: under ASan on two busy cores the
  // default 3 s cut the two searches at different points.
  o.time_limit = 300;
  const LayerProfile prof = example("moe40");
  const SearchResult a = search(prof, o), b = search(prof, o);
  CHECK_FALSE(a.time_limited);
  CHECK_FALSE(b.time_limited);
  CHECK(a.plan == b.plan);
}

TEST_CASE("search: tiny shapes are measured against the exact optimum", "[search]") {
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 2;
  o.num_microbatches = 3;
  const SearchResult r = search(example("tiny4"), o);
  REQUIRE(r.exact);
  CHECK(r.exact->complete);
  CHECK(r.exact->optimum <= r.exact->search_value + 1e-9);
  CHECK(r.exact->optimum >= r.lower_bound - 1e-9);
}

TEST_CASE("search: the CLI writes a plan every command accepts", "[search][cli]") {
  const std::string layers = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/gpt50.csv";
  const std::string plan_path = test::temp_file("searched.json", "");
  auto s = run_cli({"search", "-p", "4", "-m", "8", "--layers", layers, "--comm", "0.5", "-o",
                    plan_path, "-f", "json"});
  REQUIRE(s.exit_code == 0);
  const auto doc = nlohmann::json::parse(s.out);
  for (const char* key : {"makespan", "peak_memory", "lower_bound", "mapping", "stages_per_rank",
                          "partition", "best_library"})
    CHECK(doc.contains(key));
  auto v = run_cli({"verify", plan_path, "--model", "all"});
  CHECK(v.exit_code == 0);
  auto sim = run_cli({"simulate", plan_path, "--layers", layers, "--comm", "0.5", "-f", "json"});
  REQUIRE(sim.exit_code == 0);
  const auto sdoc = nlohmann::json::parse(sim.out);
  CHECK(sdoc["makespan"].get<double>() == Approx(doc["makespan"].get<double>()));
  CHECK(sdoc["ranks"][0].contains("peak_memory"));
  CHECK(sdoc["peak_memory"].get<double>() == Approx(doc["peak_memory"].get<double>()));
  CHECK(run_cli({"render", plan_path, "--layers", layers, "--svg", "-"}).exit_code == 0);
  CHECK(run_cli({"convert", plan_path, "-f", "csv"}).exit_code == 0);
  auto none =
      run_cli({"search", "-p", "4", "-m", "8", "--layers", layers, "--memory-limit", "0.1"});
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("smallest budget that works") != std::string::npos);
}

TEST_CASE("search: a calibrated stage-costs file fixes the partition", "[search][cli]") {
  // As `pipeplan calibrate` writes it: measured ms per stage, the transfer cost.
  const std::string calibrated = R"({"format": "pipeplan.stage-costs", "version": 1,
    "absolute": true, "time_unit": "ms",
    "calibrated_from": {"schedule": "interleaved-1f1b", "pp_degree": 2, "stages_per_rank": 2},
    "stages": [{"stage": 0, "F": 1, "B": 2, "I": 1, "W": 1},
               {"stage": 1, "F": 1.5, "B": 3, "I": 2, "W": 1},
               {"stage": 2, "F": 1, "B": 2, "I": 1.5, "W": 0.5},
               {"stage": 3, "F": 2, "B": 4, "I": 3, "W": 1}],
    "comm": {"latency": 0.25, "bandwidth": 0, "bytes": 0}})";
  const StageCosts file = read_stage_costs(calibrated, "costs.json");
  const LayerProfile prof = stage_cost_profile(file, "costs.json");
  REQUIRE(prof.size() == 4);
  CHECK(prof.layers[1].name == "stage1");
  CHECK(prof.layers[1].f == 1.5);
  CHECK(prof.layers[1].b == 3);
  CHECK(prof.layers[1].w == 1);
  CHECK(prof.layers[3].activation == 1);
  // W keeps its measured share of B when I + W differs from B.
  StageCosts odd = file;
  odd.stages[0] = StageScale{1, 3, 2, 2};
  CHECK(stage_cost_profile(odd, "x").layers[0].w == 1.5);
  StageCosts gap = file;
  gap.stages.erase(1);
  CHECK_THROWS_WITH(stage_cost_profile(gap, "x"),
                    "x: stage 1 is missing (the stages must be 0..3 without a gap)");
  const StageCosts scales = read_stage_costs("stage,F,B,I,W\n0,1,1,1,1\n", "s.csv");
  CHECK_THROWS_WITH(stage_cost_profile(scales, "s.csv"),
                    Catch::Matchers::StartsWith("s.csv: a file of cost multipliers gives no "
                                                "stage's duration"));

  const std::string path = test::temp_file("calibrated.json", calibrated);
  const std::string plan_path = test::temp_file("calibrated-plan.json", "");
  auto s = run_cli({"search", "-p", "2", "-m", "4", "--stage-costs", path, "-o", plan_path, "-f",
                    "json", "--time-limit", "1"});
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  const auto doc = nlohmann::json::parse(s.out);
  CHECK(doc["partition"] == nlohmann::json::array({1, 1, 1, 1}));
  CHECK(doc["stages_per_rank"] == 2);
  CHECK(doc["mapping"] == "loop");
  // simulate --stage-costs times the plan as the search did (I + W = B here),
  // with the file's transfer cost.
  auto sim = run_cli({"simulate", plan_path, "--stage-costs", path, "-f", "json"});
  REQUIRE(sim.exit_code == 0);
  CHECK(nlohmann::json::parse(sim.out)["makespan"].get<double>() ==
        Approx(doc["makespan"].get<double>()));
  CHECK(run_cli({"verify", plan_path, "--model", "all"}).exit_code == 0);

  const std::string layers = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/tiny4.csv";
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--stage-costs", path, "--layers", layers},
            "give --layers or --stage-costs, not both"},
           {{}, "give the model's costs: --layers FILE (a layer profile) or --stage-costs FILE"},
           {{"--stage-costs", path, "--layout", "E|t|t|L"}, "--layout fixes the partition"},
           {{"--stage-costs", path, "-p", "3"}, "4 measured stages do not divide among 3 ranks"}}) {
    std::vector<std::string> argv{"search", "-m", "4"};
    if (std::find(args.begin(), args.end(), "-p") == args.end())
      argv.insert(argv.end(), {"-p", "2"});
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_cli(argv);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
}

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
}  // namespace

TEST_CASE("search: simulate prints 1F1B's peak memory, the search's default budget",
          "[search][cli]") {
  const std::string layers = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/gpt50.csv";
  auto sim = run_cli({"simulate", "-s", "1f1b", "-p", "4", "-m", "8", "--layers", layers});
  REQUIRE(sim.exit_code == 0);
  const std::string line = "peak memory: ";
  const std::size_t at = sim.out.find(line);
  REQUIRE(at != std::string::npos);
  const double peak = std::stod(sim.out.substr(at + line.size()));
  CHECK(sim.out.find(" on rank ", at) != std::string::npos);
  auto s = run_cli({"search", "-p", "4", "-m", "8", "--layers", layers, "--comm", "0",
                    "--time-limit", "0.5", "-f", "json"});
  REQUIRE(s.exit_code == 0);
  CHECK(nlohmann::json::parse(s.out)["memory_limit"].get<double>() == Approx(peak));
}

TEST_CASE("search: states the message cost it charges, not free unless told", "[search][cli]") {
  const std::string layers = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/gpt50.csv";
  const LayerProfile prof = parse_layer_profile(read_text(layers), layers);
  double f = 0;
  for (const Layer& l : prof.layers) f += l.f;
  const double want = kNominalLatency * f / static_cast<double>(prof.size());
  CHECK(default_transfer_latency(prof) == Approx(want));
  const std::vector<std::string> shape{"search", "-p",           "4",  "-m", "8", "--layers",
                                       layers,   "--time-limit", "0.5"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = shape;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_cli(argv);
  };
  auto text = with({});
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("transfer cost: " + detail::format_number(want, 4) +
                      " per message (default: 0.25 x the profile's mean layer F; --comm states "
                      "it, --comm 0 for free messages)\n") != std::string::npos);
  auto json = nlohmann::json::parse(with({"-f", "json"}).out);
  CHECK(json["transfer_time"].get<double>() == Approx(want));
  CHECK(json["transfer_cost"] == "default");
  // --comm 0 keeps free messages, stated.
  auto free_text = with({"--comm", "0"});
  CHECK(free_text.out.find("transfer cost: 0 per message\n") != std::string::npos);
  auto free_json = nlohmann::json::parse(with({"--comm", "0", "-f", "json"}).out);
  CHECK(free_json["transfer_time"].get<double>() == 0.0);
  CHECK(free_json["transfer_cost"] == "stated");
  // The library: the same default, unless stated.
  SearchOptions o;
  o.pp_degree = 2;
  o.num_microbatches = 4;
  o.time_limit = 0.5;
  CHECK(search_costs(prof, o).comm_latency == Approx(want));
  o.transfer_cost_stated = true;
  CHECK(search_costs(prof, o).comm_latency == 0.0);
  o.transfer_cost_stated = false;
  o.comm.comm_latency = 0.5;
  CHECK(search_costs(prof, o).comm_latency == 0.5);
}

TEST_CASE("search: the report counts the chosen plan's memory actions, once", "[search][cli]") {
  const std::string layers = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/gpt50.csv";
  const std::string plan_path = test::temp_file("recomputing.json", "");
  auto s = run_cli({"search", "-p", "4", "-m", "8", "--layers", layers, "--comm", "0",
                    "--memory-limit", "25", "--time-limit", "1", "-o", plan_path});
  INFO(s.out << s.err);
  REQUIRE(s.exit_code == 0);
  const Plan plan = parse_plan(read_text(plan_path), plan_path);
  int recomputed = 0;
  for (const auto& rank : plan.ranks)
    for (const Action& a : rank) recomputed += a.type == ActionType::Recompute;
  // Within 1 s the search usually ends on a recomputing plan; slower builds
  // (sanitizers) may stop at one that fits without: then no count is shown.
  if (recomputed > 0)
    CHECK(s.out.find("memory actions: " + std::to_string(recomputed) +
                     " (stage, microbatch) recomputed") != std::string::npos);
  else {
    const std::size_t line = s.out.find("memory actions: ");
    const std::string zero = "memory actions: 0 ";
    const bool none_claimed =
        line == std::string::npos || s.out.compare(line, zero.size(), zero) == 0;
    CHECK(none_claimed);
  }
  // The chosen line says how the plan was made, not a count a later phase changed.
  const std::size_t chosen = s.out.find("chosen: ");
  REQUIRE(chosen != std::string::npos);
  const std::string line = s.out.substr(chosen, s.out.find('\n', chosen) - chosen);
  CHECK_FALSE(std::regex_search(line, std::regex("[0-9]+ (recomputed|offloaded)")));
}

TEST_CASE("search: compare --layers reports peak memory per schedule", "[search][cli]") {
  const std::string layers = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/gpt50.csv";
  auto c = run_cli({"compare", "-p", "4", "-m", "8", "--layers", layers, "-f", "json",
                    "--schedules", "1f1b,zbv,interleaved-1f1b"});
  REQUIRE(c.exit_code == 0);
  const auto doc = nlohmann::json::parse(c.out);
  for (const auto& row : doc["results"]) {
    CHECK(row.contains("peak_memory"));
    CHECK(row["partition"].size() == 4 * row["stages_per_rank"].get<std::size_t>());
  }
  auto bad = run_cli(
      {"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--layers", layers, "--cost", "F=1"});
  CHECK(bad.exit_code == 2);
}

TEST_CASE("search: the exhaustive search finds the optimum without an incumbent", "[search]") {
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 2;
  o.num_microbatches = 4;
  o.comm.comm_latency = 0.5;
  o.max_stages_per_rank = 2;
  const LayerProfile prof = uniform(4);
  const SearchResult r = search(prof, o);
  REQUIRE(r.exact);
  REQUIRE(r.exact->complete);
  // A weaker incumbent: the exhaustive search must find the optimum itself.
  const ExactResult free_run = detail::exact_search(
      prof, o, r.memory_limit, r.exact->search_value + 2, [] { return false; });
  REQUIRE(free_run.complete);
  CHECK(free_run.max_stages_per_rank == 2);
  CHECK(free_run.nodes > 100);
  CHECK(free_run.optimum == Approx(r.exact->optimum));
  CHECK(free_run.optimum <= r.exact->search_value + 1e-9);
  // A budget of one microbatch per rank forces a sequential plan: slower.
  // Fewer microbatches with a budget of one microbatch per rank: a
  // sequential plan, slower than the unconstrained optimum.
  o.num_microbatches = 2;
  const SearchResult loose = search(prof, o);
  o.memory_limit = 2.0;
  const SearchResult tight = search(prof, o);
  REQUIRE(loose.exact);
  REQUIRE(tight.exact);
  REQUIRE(loose.exact->complete);
  REQUIRE(tight.exact->complete);
  CHECK(tight.exact->optimum > loose.exact->optimum);
  CHECK(tight.peak_memory <= 2.0);
}

TEST_CASE("search: refining a library plan's partition keeps its actions and the budget",
          "[search]") {
  // ZBV's V mapping puts the first and last layers on rank 0: the balanced
  // split (by stage) is not the best one for it.
  const LayerProfile prof = example("llama35");
  Plan lib = plan(Problem{"zbv", 4, 8, 2});
  lib.meta.partition = balanced_partition(prof, 8);
  SimOptions o;
  o.costs.comm_latency = 0.5;
  SimOptions balanced = o;
  balanced.costs = stage_costs(prof, lib.meta.partition, o.costs);
  const SimResult before = simulate(lib, balanced);
  double budget = 0;
  for (const auto& s : before.ranks) budget = std::max(budget, s.peak_memory);
  detail::SearchContext ctx(3600.0);  // the clock never stops these
  ctx.budget.limit = budget;
  const auto refined = detail::refine_partition(lib, prof, o, ctx);
  REQUIRE(refined);
  CHECK(ctx.evaluations > 1);
  CHECK(refined->makespan < before.makespan - 1e-9);
  CHECK(refined->peak <= budget + 1e-9);
  CHECK(refined->plan.ranks == lib.ranks);  // only the split moved
  CHECK(refined->plan.meta.partition != lib.meta.partition);
  SimOptions again = o;
  again.costs = stage_costs(prof, refined->plan.meta.partition, o.costs);
  CHECK(simulate(refined->plan, again).makespan == Approx(refined->makespan));
}

TEST_CASE("search: improving a library order keeps its work, the budget and the simulator's times",
          "[search]") {
  // W-heavy blocks (W = 2/3 B): ZBV's order at its own peak memory.
  const LayerProfile prof = uniform(8, 1, 3, 2, 1);
  Plan lib = plan(Problem{"zbv", 4, 8, 2});
  lib.meta.partition = balanced_partition(prof, 8);
  for (auto& list : lib.ranks)
    list.erase(
        std::remove_if(list.begin(), list.end(), [](const Action& a) { return is_comm(a.type); }),
        list.end());
  SimOptions o;
  o.costs = stage_costs(prof, lib.meta.partition, CostModel{});
  o.costs.comm_latency = 0.5;
  const detail::StageTable table = detail::stage_table(o.costs, 8);
  const SimResult before = simulate(lib, o);
  REQUIRE(before.ok());
  double budget = 0;
  for (const auto& s : before.ranks) budget = std::max(budget, s.peak_memory);
  const auto timed = detail::time_orders(lib, table);
  REQUIRE(timed);
  CHECK(timed->makespan == Approx(before.makespan));
  CHECK(timed->peak == Approx(budget));
  detail::SearchContext ctx(3600.0);  // the clock never stops these
  const auto improved = detail::improve_orders(lib, table, {budget}, 100000, ctx);
  REQUIRE(improved);
  CHECK(improved->moves > 0);
  CHECK(ctx.evaluations >= improved->moves);
  CHECK(improved->makespan < before.makespan - 1e-9);
  CHECK(improved->peak <= budget + 1e-9);
  const SimResult after = simulate(improved->plan, o);
  REQUIRE(after.ok());
  CHECK(after.makespan == Approx(improved->makespan));
  double peak = 0;
  for (const auto& s : after.ranks) peak = std::max(peak, s.peak_memory);
  CHECK(peak == Approx(improved->peak));
  // Same work on every rank, microbatches still in order per stage and kind.
  for (std::size_t r = 0; r < lib.ranks.size(); ++r) {
    auto a = lib.ranks[r], b = improved->plan.ranks[r];
    const auto key = [](const Action& x) {
      return std::make_tuple(x.stage, static_cast<int>(x.type), x.microbatch);
    };
    const auto by_key = [&key](const Action& x, const Action& y) { return key(x) < key(y); };
    std::sort(a.begin(), a.end(), by_key);
    std::sort(b.begin(), b.end(), by_key);
    CHECK(a == b);
    std::map<std::pair<int, int>, int> next;
    for (const Action& x : improved->plan.ranks[r])
      CHECK(next[{x.stage, static_cast<int>(x.type)}]++ == x.microbatch);
  }
  // A budget the order already uses fully: nothing may exceed it.
  const auto capped = detail::improve_orders(lib, table, {budget - 1}, 1000, ctx);
  CHECK_FALSE(capped);
}

TEST_CASE("search: beats the best library schedule at 1F1B's budget when W is heavy", "[search]") {
  // W = 2/3 B at 1F1B's own peak memory: the library's best zero-bubble
  // order, with its idle time filled by W, is strictly
  // faster than the library plan itself.
  const LayerProfile prof = uniform(8, 1, 3, 2, 1);
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 4;
  o.num_microbatches = 8;
  for (double comm : {0.5, 1.0}) {
    CAPTURE(comm);
    o.comm.comm_latency = comm;
    const SearchResult r = search(prof, o);
    check_result(r, o);
    double one_f_one_b = 0;
    for (const LibraryRun& run : r.library)
      if (run.schedule == "1f1b") one_f_one_b = run.peak_memory;
    CHECK(r.memory_limit == Approx(one_f_one_b));
    CHECK(r.makespan < r.best_library->makespan - 1e-9);
    // A library order with its W passes moved into the idle time (placed
    // anew or improved locally: both reach the same makespan here).
    CHECK(r.origin.rfind("library ", 0) == 0);
    CHECK((r.origin.find("orders improved locally") != std::string::npos ||
           r.origin.find("W passes placed anew") != std::string::npos));
    CHECK(r.peak_memory <= r.memory_limit + 1e-9);
    CHECK_FALSE(r.time_limited);
  }
}

TEST_CASE("search: --layers lowers for the profile's stage costs", "[search][cli]") {
  // A latency-hiding lowering plans for the costs it is simulated with: the
  // plan simulate -s runs with --layers is the one lowered for the layer
  // profile's stage sums (balanced split), not for uniform stages.
  const LayerProfile prof = example("gpt50");
  const Problem problem{"interleaved-1f1b", 4, 8, 2};
  const PlanMeta meta = resolve(problem);
  LowerOptions lo = schedule_lowering(meta);
  REQUIRE(lo.mode == LowerMode::LatencyHiding);
  CostModel comm;
  comm.comm_latency = 0.5;
  lo.costs = stage_costs(prof, balanced_partition(prof, 8), comm);
  Plan expected = plan(problem, lo);
  expected.meta.partition = balanced_partition(prof, 8);
  const std::string layers = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/gpt50.csv";
  auto c = run_cli({"simulate", "-s", "interleaved-1f1b", "-p", "4", "-m", "8", "-v", "2",
                    "--layers", layers, "--comm", "0.5", "-f", "json"});
  REQUIRE(c.exit_code == 0);
  SimOptions o;
  o.costs = stage_costs(prof, expected.meta.partition, comm);
  CHECK(nlohmann::json::parse(c.out)["makespan"].get<double>() ==
        Approx(simulate(expected, o).makespan));
}

TEST_CASE("search: bad limits are named input errors", "[search][cli]") {
  const std::string layers = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/tiny4.csv";
  auto zero = run_cli({"search", "-p", "2", "-m", "2", "--layers", layers, "--time-limit", "0"});
  CHECK(zero.exit_code == 2);
  CHECK(zero.err.find("--time-limit: 0 is not more than 0") != std::string::npos);
  auto negative =
      run_cli({"search", "-p", "2", "-m", "2", "--layers", layers, "--memory-limit", "-1"});
  CHECK(negative.exit_code == 2);
  CHECK(negative.err.find("--memory-limit: -1 is not more than 0") != std::string::npos);
  // Checked where parsed: finite, and within the documented range.
  for (const char* bad : {"nan", "inf", "1e308"}) {
    auto r = run_cli({"search", "-p", "2", "-m", "2", "--layers", layers, "--time-limit", bad});
    CHECK(r.exit_code == 2);
  }
  // The library says the same to every caller (Python's time_limit=).
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 2;
  o.num_microbatches = 2;
  for (double bad : {0.0, -1.0, std::nan(""), 1e9}) {
    o.time_limit = bad;
    CHECK_THROWS_WITH(search(uniform(4), o),
                      Catch::Matchers::Contains("the time limit must be a positive number"));
  }
  o.time_limit = 3;
  o.memory_limit = -1;
  CHECK_THROWS_WITH(
      search(uniform(4), o),
      Catch::Matchers::Contains("the memory limit must be a positive number, got -1"));
}
