// Variable-length microbatches (docs/lengths.md): per-microbatch costs from
// the tokens of each microbatch, the profile's quadratic part and stated
// length, the simulator's times and memory, the search's bound.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/analytic.h"
#include "pipeplan/cost_options.h"
#include "pipeplan/costs.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/search.h"
#include "pipeplan/simulate.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

Plan planned(const std::string& schedule, int p, int m, int v = 0) {
  const Planner planner(Problem{schedule, p, m, v});
  return lower(planner.compute(), planner.lowering({}, CostModel{}));
}

CostModel with_lengths(std::vector<double> tokens, double stated = 0) {
  CostModel c;
  c.set_lengths(std::move(tokens), stated);
  return c;
}

}  // namespace

TEST_CASE("lengths: durations grow linearly, plus the quadratic fraction as r^2", "[lengths]") {
  CostModel c = with_lengths({512, 1024, 2048});
  // Stated at the longest: ratios 1/4, 1/2, 1.
  REQUIRE(c.length_ratio == std::vector<double>{0.25, 0.5, 1.0});
  CHECK(c.duration(make(ActionType::F, 0, 0)) == Approx(0.25));
  CHECK(c.duration(make(ActionType::B, 0, 1)) == Approx(1.0));
  CHECK(c.duration(make(ActionType::W, 0, 2)) == Approx(1.0));
  // Half of stage 0's F is quadratic: 0.5 r + 0.5 r^2.
  c.stage_quadratic[0] = StageScale{0.5, 0.0, 0.0, 0.0};
  CHECK(c.duration(make(ActionType::F, 0, 0)) == Approx(0.5 * 0.25 + 0.5 * 0.0625));
  CHECK(c.duration(make(ActionType::F, 1, 0)) == Approx(0.25));  // stage 1 linear
  CHECK(c.duration(make(ActionType::Recompute, 0, 1)) == Approx(0.5 * 0.5 + 0.5 * 0.25));
  // Activations and transfers grow per token.
  c.comm_latency = 1, c.comm_bandwidth = 10, c.transfer_bytes = 20;
  CHECK(c.memory(0, 1) == Approx(0.5));
  CHECK(c.transfer_time(0) == Approx(1 + 20 * 0.25 / 10));
  CHECK(c.transfer_time() == Approx(3.0));
  // A stated length: ratios over it, longer microbatches cost more.
  c.set_lengths({4096, 8192}, 4096);
  CHECK(c.length_ratio == std::vector<double>{1.0, 2.0});
  CHECK(c.duration(make(ActionType::F, 0, 1)) == Approx(0.5 * 2 + 0.5 * 4));
  CHECK(c.variable_lengths());
  c.set_lengths({4096, 4096}, 4096);
  CHECK_FALSE(c.variable_lengths());
  CHECK_THROWS_WITH(c.set_lengths({100, 0}), Catch::Contains("microbatch 1") &&
                                                 Catch::Contains("positive number of tokens"));
  CHECK_THROWS_WITH(c.check_lengths(3), Catch::Contains("2 microbatch lengths given") &&
                                            Catch::Contains("3 microbatches"));
}

TEST_CASE("lengths: parse_lengths reads lists and files, and names a bad item", "[lengths]") {
  CHECK(parse_lengths("512,2048,128") == std::vector<double>{512, 2048, 128});
  CHECK(parse_lengths("# step 7\n512\n 2048 # long\n\n128\n", "f.txt") ==
        std::vector<double>{512, 2048, 128});
  CHECK_THROWS_WITH(parse_lengths("512,-3", "--lengths"),
                    Catch::Contains("--lengths:1: length '-3' of microbatch 1") &&
                        Catch::Contains("not a positive number"));
  CHECK_THROWS_WITH(parse_lengths("1\n2\nabc", "f.txt"), Catch::Contains("f.txt:3: length 'abc'"));
  CHECK_THROWS_WITH(parse_lengths("0"), Catch::Contains("length '0'"));
  CHECK_THROWS_WITH(parse_lengths("# nothing\n", "f.txt"),
                    Catch::Contains("f.txt: no microbatch length given"));
  CostOptions o;
  o.lengths = {100, 200};
  const SimOptions sim = make_sim_options(o);
  CHECK(sim.costs.length_ratio == std::vector<double>{0.5, 1.0});
}

TEST_CASE("lengths: a profile states its length and quadratic parts, both read back", "[lengths]") {
  const std::string text =
      "# seq_len: 4096\n"
      "name,F,B,W,activation,F_quad,B_quad,W_quad\n"
      "attn,2,4,1,1,1,2,0\n"
      "mlp,3,6,3,1,0,0,0\n";
  const LayerProfile p = parse_layer_profile(text, "p.csv");
  REQUIRE(p.seq_len == 4096.0);
  CHECK(p.layers[0].f_quad == 1);
  CHECK(p.layers[0].i_quad() == 2);
  CHECK(p.has_quadratic());
  std::ostringstream out;
  write_layer_profile(p, out, {"a comment"});
  CHECK(out.str().find("# seq_len: 4096\nname,F,B,W,activation,input,recompute,F_quad,B_quad,"
                       "W_quad\n") != std::string::npos);
  CHECK(parse_layer_profile(out.str(), "again") == p);
  // Without the split nothing changes in the file.
  std::ostringstream plain;
  write_layer_profile(parse_layer_profile("name,F,B,W,activation\na,1,2,1,1\n"), plain);
  CHECK(plain.str() == "name,F,B,W,activation,input,recompute\na,1,2,1,1,1,1\n");

  CHECK_THROWS_WITH(parse_layer_profile("name,F,B,W,activation,F_quad\na,1,2,1,1,3\n", "x"),
                    Catch::Contains("x:2: layer 'a': F_quad (3) exceeds F (1)"));
  CHECK_THROWS_WITH(
      parse_layer_profile("name,F,B,W,activation,B_quad,W_quad\na,1,2,1,1,0.5,1\n", "x"),
      Catch::Contains("W_quad (1) exceeds B_quad (0.5)"));
  CHECK_THROWS_WITH(parse_layer_profile("# seq_len: none\nname,F,B,W,activation\na,1,2,1,1\n"),
                    Catch::Contains("seq_len 'none' is not a positive number of tokens"));
  CHECK_THROWS_WITH(
      parse_layer_profile("# seq_len: 8\n# SEQ_LEN: 9\nname,F,B,W,activation\na,1,2,1,1\n"),
      Catch::Contains("seq_len is stated twice"));

  // Stage sums: the quadratic fractions of each stage.
  CostModel base;
  base.set_lengths({2048, 8192});
  const CostModel c = stage_costs(p, {1, 1}, base);
  REQUIRE(c.stage_quadratic.count(0) == 1);
  CHECK(c.stage_quadratic.at(0).f == Approx(0.5));
  CHECK(c.stage_quadratic.at(0).i == Approx(2.0 / 3.0));
  CHECK(c.stage_quadratic.count(1) == 0);
  // Re-based on the profile's 4096: ratios 0.5 and 2.
  CHECK(c.length_ratio == std::vector<double>{0.5, 2.0});
  CHECK(c.duration(make(ActionType::F, 0, 1)) == Approx(1 * 2 + 1 * 4));
  CHECK(c.duration(make(ActionType::F, 1, 0)) == Approx(1.5));
  CHECK(c.memory(0, 1) == Approx(2.0));
}

TEST_CASE("lengths: the analytic profile's quadratic part is attention's core", "[lengths]") {
  ModelShape m;
  m.arch = Arch::Llama;
  m.layers = 2;
  m.hidden = 4096;
  m.heads = 32;
  m.seq = 4096;
  m.micro_batch = 1;
  m.vocab = 32000;
  const LayerProfile p = analytic_profile(m, DeviceSpec{});
  REQUIRE(p.seq_len == 4096.0);
  const Layer& block = p.layers[1];
  // Causal core: 2 b s^2 h FLOPs forward, twice that in the input gradient.
  const double core = 2.0 * 4096.0 * 4096.0 * 4096.0 / 1e9;
  CHECK(block.f_quad == Approx(core));
  CHECK(block.b_quad == Approx(2 * core));
  CHECK(block.w_quad == 0);
  CHECK(p.layers.front().f_quad == 0);  // the embedding: per token
  CHECK(p.layers.back().f_quad == 0);   // the head: per token
  // Doubling the sequence: the linear part doubles, the quadratic quadruples.
  m.seq = 8192;
  const LayerProfile longer = analytic_profile(m, DeviceSpec{});
  CHECK(longer.layers[1].f == Approx(2 * (block.f - block.f_quad) + 4 * block.f_quad));
}

TEST_CASE("lengths: the simulator times and holds each microbatch at its length", "[lengths]") {
  // One rank: the step is the sum of every action's own length.
  const Plan one = planned("1f1b", 1, 3);
  SimOptions o;
  o.costs.set_lengths({100, 200, 400});
  SimResult r = simulate(one, o);
  REQUIRE(r.ok());
  CHECK(r.makespan == Approx(3 * (0.25 + 0.5 + 1.0)));
  CHECK(r.ranks[0].peak_memory == Approx(1.0));  // one microbatch at a time, the longest

  // Every microbatch at the stated length: the plain simulation, exactly.
  const Plan p = planned("interleaved-1f1b", 2, 4, 2);
  SimOptions same;
  same.costs.comm_latency = 0.5;
  const SimResult plain = simulate(p, same);
  same.costs.set_lengths({64, 64, 64, 64});
  const SimResult equal = simulate(p, same);
  CHECK(equal.makespan == plain.makespan);
  CHECK(equal.ranks[0].peak_memory == plain.ranks[0].peak_memory);

  // 1f1b p=2 m=2, lengths 1:2 (stated at the longest), F = r, B = 2r:
  // 0F0 [0,.5], 1F0 [.5,1], 0F1 [.5,1.5], 1B0 [1,2], 1F1 [2,3], 0B0 [2,3],
  // 1B1 [3,5], 0B1 [5,7].
  SimOptions two;
  two.costs.set_lengths({1, 2});
  const SimResult t = simulate(planned("1f1b", 2, 2), two);
  REQUIRE(t.ok());
  CHECK(t.makespan == Approx(7.0));
  CHECK(t.ranks[0].peak_memory == Approx(1.5));

  SimOptions wrong;
  wrong.costs.set_lengths({1, 2, 3});
  CHECK_THROWS_WITH(simulate(p, wrong), Catch::Contains("3 microbatch lengths given") &&
                                            Catch::Contains("the plan has 4 microbatches"));
}

TEST_CASE("lengths: a transfer's time grows with its microbatch's tokens", "[lengths]") {
  SimOptions o;
  o.costs.f = o.costs.b = 0;  // only transfers take time
  o.costs.i = o.costs.w = 0;
  o.costs.comm_bandwidth = 1;
  o.costs.transfer_bytes = 4;
  o.costs.set_lengths({1, 4});  // ratios 0.25, 1: transfers 1 and 4
  const SimResult r = simulate(planned("gpipe", 2, 2), o);
  REQUIRE(r.ok());
  double shortest = 1e9, longest = 0;
  for (const Transfer& t : r.transfers) {
    shortest = std::min(shortest, t.end - t.start);
    longest = std::max(longest, t.end - t.start);
  }
  CHECK(shortest == Approx(1.0));
  CHECK(longest == Approx(4.0));
}

TEST_CASE("lengths: the search's bound holds for every plan of the step", "[lengths]") {
  const LayerProfile profile = parse_layer_profile(
      "# seq_len: 1000\nname,F,B,W,activation,F_quad,B_quad,W_quad\n"
      "a,1,2,1,1,0.3,0.6,0\nb,1,2,1,1,0.3,0.6,0\nc,1,2,1,1,0.3,0.6,0\n"
      "d,2,4,2,1,0,0,0\n");
  SearchOptions o;
  o.transfer_cost_stated = true;  // messages as set below (free: --comm 0)
  o.pp_degree = 2;
  o.num_microbatches = 6;
  o.time_limit = 2.0;
  o.comm.comm_latency = 0.1;
  o.comm.set_lengths({200, 3000, 500, 1000, 80, 1500});
  std::string why;
  const double bound = makespan_lower_bound(profile, 2, o.comm, 6, &why);
  CHECK_FALSE(why.empty());
  const SearchResult r = search(profile, o);
  CHECK(r.lower_bound >= bound - 1e-9);  // the budget's terms may raise it
  CHECK(r.makespan >= r.lower_bound - 1e-9);
  // Every library schedule the search measured is above it too.
  for (const LibraryRun& run : r.library) CHECK(run.makespan >= bound - 1e-9);
  // The work term: the real work over two ranks. Layers a-c at ratio x:
  // F 0.7x + 0.3x^2, I 0.4x + 0.6x^2, W x; layer d: 6x.
  double work = 0;
  for (double t : {200.0, 3000.0, 500.0, 1000.0, 80.0, 1500.0}) {
    const double x = t / 1000;
    work += 3 * (2.1 * x + 0.9 * x * x) + 6 * x;
  }
  CHECK(bound >= work / 2 - 1e-9);
  // Without lengths: the uniform bound.
  SearchOptions u = o;
  u.comm.set_lengths({1000, 1000, 1000, 1000, 1000, 1000});
  CHECK(makespan_lower_bound(profile, 2, u.comm, 6) ==
        Approx(makespan_lower_bound(profile, 2, 6, 0.1)));
}

TEST_CASE("lengths: --lengths on the commands, a list or a FILE", "[lengths][cli]") {
  using pipeplan::test::run_cli;
  const std::string profile = pipeplan::test::temp_file(
      "lengths_profile.csv",
      "# seq_len: 1000\nname,F,B,W,activation,F_quad,B_quad,W_quad\n"
      "a,1,2,1,1,0.3,0.6,0\nb,1,2,1,1,0.3,0.6,0\nc,1,2,1,1,0.3,0.6,0\nd,2,4,2,1,0,0,0\n");
  const std::string file = pipeplan::test::temp_file("lengths.txt", "# step 3\n1,2\n");
  // simulate: the step's times (1f1b p=2 m=2 by hand, see above) and the lengths line.
  auto s = run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--lengths", "1,2"});
  REQUIRE(s.exit_code == 0);
  CHECK(s.out.find("makespan: 7\n") != std::string::npos);
  CHECK(s.out.find("lengths: 2 microbatches, 1..2 tokens (3 in all); costs stated at the "
                   "longest, 2 tokens, growing linearly\n") != std::string::npos);
  CHECK(s.out.find("peak memory: 1.5 on rank 0") != std::string::npos);
  auto f = run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--lengths", file});
  CHECK(f.out == s.out);
  auto j =
      run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--lengths", "1,2", "-f", "json"});
  CHECK(j.out.find("\"lengths\": [") != std::string::npos);
  // A profile's quadratic part and stated length.
  auto q = run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--layers", profile,
                    "--lengths", "2000,500"});
  REQUIRE(q.exit_code == 0);
  CHECK(q.out.find("costs stated at 1000 tokens, with the profile's quadratic part") !=
        std::string::npos);
  // The other commands take it.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"plan", "-s", "zbv", "-p", "2", "-m", "4", "--lengths", "4,1,2,3"},
        {"compare", "-p", "2", "-m", "4", "--lengths", "4,1,2,3"},
        {"render", "-s", "1f1b", "-p", "2", "-m", "4", "--lengths", "4,1,2,3", "--svg",
         pipeplan::test::temp_file("lengths.svg", "")},
        {"search", "--layers", profile, "-p", "2", "-m", "4", "--lengths", "4000,100,200,900",
         "--time-limit", "1"}}) {
    auto r = run_cli(args);
    CHECK(r.exit_code == 0);
    INFO(args.front() << ": " << r.err);
  }
  // Refusals: a bad item, the wrong count, a missing file.
  auto bad = run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--lengths", "1,-2"});
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("length '-2' of microbatch 1 is not a positive number of tokens") !=
        std::string::npos);
  auto word = run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--lengths", "1,x"});
  CHECK(word.exit_code == 2);
  CHECK(word.err.find("--lengths:1: length 'x' of microbatch 1") != std::string::npos);
  auto count = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "3", "--lengths", "1,2"});
  CHECK(count.exit_code != 0);
  CHECK(count.err.find("2 microbatch lengths given, but the plan has 3 microbatches") !=
        std::string::npos);
  auto missing = run_cli({"search", "--layers", profile, "-p", "2", "-m", "2", "--lengths",
                          "/nonexistent/lengths.txt"});
  CHECK(missing.exit_code != 0);
  CHECK(missing.err.find("/nonexistent/lengths.txt") != std::string::npos);
}
