// Simulator: textbook numbers, a hand-computed heterogeneous case, the three
// transport models, deadlock reports, cost parsing and the CLI commands.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <random>
#include <sstream>

#include "pipeplan/emit_sim.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::actions;
using pipeplan::test::run_cli;
using pipeplan::test::temp_file;

namespace {

Plan make_plan(int pp, int m, int v, std::vector<std::string> ranks,
               StageMapping mapping = StageMapping::Loop) {
  Plan p;
  p.meta = PlanMeta{"custom", pp, m, v, mapping};
  for (int r = 0; r < pp; ++r) {
    p.rank_ids.push_back(r);
    p.ranks.push_back(actions(ranks[static_cast<std::size_t>(r)]));
  }
  return p;
}

SimOptions costs(const std::string& spec, Transport t = Transport::Rendezvous) {
  SimOptions o;
  o.costs = parse_cost_spec(spec);
  o.transport = t;
  return o;
}

const Transport kModels[] = {Transport::Rendezvous, Transport::Eager, Transport::Serial};

std::vector<int> peaks(const SimResult& r) {
  std::vector<int> out;
  for (const auto& s : r.ranks) out.push_back(s.peak_activations);
  return out;
}

std::string problems(const SimResult& r) {
  std::string s;
  for (const auto& d : r.problems)
    s += d.code + " rank " + std::to_string(d.rank) + " index " + std::to_string(d.index) + " (" +
         d.action + "): " + d.message + "\n";
  return s;
}

}  // namespace

TEST_CASE("simulate: gpipe and 1f1b bubble is (p-1)/(m+p-1) at F=1, B=2, zero comm cost",
          "[simulate]") {
  for (const char* name : {"gpipe", "1f1b"}) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (int m : {p, p + 1, 2 * p, 4 * p + 3}) {
        const Plan lowered = plan(Problem{name, p, m, 0});
        const Plan compute = plan_compute(Problem{name, p, m, 0});
        for (Transport t : kModels) {
          for (const Plan* pl : {&lowered, &compute}) {
            INFO(name << " p=" << p << " m=" << m << " " << to_string(t)
                      << (pl == &compute ? " compute-only" : " lowered"));
            const SimResult r = simulate(*pl, costs("F=1,B=2", t));
            REQUIRE(r.ok());
            CHECK(r.makespan == 3.0 * (m + p - 1));
            CHECK(r.bubble_fraction == Approx(double(p - 1) / (m + p - 1)));
            for (const auto& s : r.ranks) {
              CHECK(s.busy == 3.0 * m);
              CHECK(s.idle == 3.0 * (p - 1));
              CHECK(s.first_start == s.rank);  // the forward ramp
            }
          }
        }
      }
    }
  }
}

TEST_CASE("simulate: 1f1b keeps p - r activations on rank r, gpipe keeps m", "[simulate]") {
  const SimResult one = simulate(plan(Problem{"1f1b", 4, 8, 0}), costs("F=1,B=2"));
  CHECK(peaks(one) == std::vector<int>{4, 3, 2, 1});
  const SimResult fill = simulate(plan(Problem{"gpipe", 4, 8, 0}), costs("F=1,B=2"));
  CHECK(peaks(fill) == std::vector<int>{8, 8, 8, 8});
  CHECK(fill.ranks[0].peak_rank_activations == 8.0);
}

TEST_CASE("simulate: zero-bubble schedules approach zero bubble at F=I=W", "[simulate]") {
  // Measured at F=I=W=1 (B=2), zero comm cost; every rank is busy 3*m*v and
  // the only idle time is the ramp: (p-1)(F+I-W) for zb-h1 (the ZB paper's
  // formula), (p-1)F for zb-h2, zbv and interleaved-zb, 2(p-1)F for dualpipev.
  struct Expect {
    const char* name;
    double ramp;
  };
  for (const Expect& e : {Expect{"zb-h1", 3}, Expect{"zb-h2", 3}, Expect{"zbv", 3},
                          Expect{"interleaved-zb", 3}, Expect{"dualpipev", 6}}) {
    double previous = 1.0;
    for (int m : {8, 16, 64}) {
      const Plan p = plan(Problem{e.name, 4, m, 0});
      const int v = p.meta.stages_per_rank;
      INFO(e.name << " m=" << m);
      const SimResult r = simulate(p, costs("F=1,I=1,W=1"));
      REQUIRE(r.ok());
      CHECK(r.makespan == 3.0 * m * v + e.ramp);
      CHECK(r.bubble_fraction < previous);
      previous = r.bubble_fraction;
    }
    CHECK(previous < 0.016);
    const SimResult ref = simulate(plan(Problem{"1f1b", 4, 64, 0}), costs("F=1,I=1,W=1"));
    CHECK(previous < ref.bubble_fraction / 2);
  }
}

TEST_CASE("simulate: split-backward peaks count each activation until its W", "[simulate]") {
  auto sim = [](const char* name) {
    return simulate(plan(Problem{name, 4, 8, 0}), costs("F=1,I=1,W=1"));
  };
  CHECK(peaks(sim("zb-h1")) == std::vector<int>{4, 4, 4, 4});
  CHECK(peaks(sim("zb-h2")) == std::vector<int>{7, 7, 7, 7});  // 2p-1 on rank 0
  const SimResult zbv = sim("zbv");  // p whole-rank activations on every rank
  CHECK(peaks(zbv) == std::vector<int>{8, 8, 8, 8});
  for (const auto& s : zbv.ranks) CHECK(s.peak_rank_activations == 4.0);
}

TEST_CASE("simulate: interleaved bubble is (p-1)/(v*m) of the ideal time", "[simulate]") {
  for (const char* name : {"interleaved-1f1b", "vpp"}) {
    const Plan p = plan(Problem{name, 4, 8, 2});
    const SimResult r = simulate(p, costs("F=1,B=2"));
    REQUIRE(r.ok());
    const double ideal = 3.0 * 8 * 2;
    CHECK((r.makespan - ideal) / ideal == Approx(3.0 / (2 * 8)));
  }
}

TEST_CASE("simulate: agrees with verify, and zero comm cost gives the compute-only timing",
          "[simulate]") {
  for (const auto& info : schedules()) {
    for (int p : {2, 3, 4}) {
      for (int m : {2 * p, 2 * p + 1, 3 * p}) {
        Plan lowered, compute;
        try {
          lowered = plan(Problem{info.name, p, m, 0});
          compute = plan_compute(Problem{info.name, p, m, 0});
        } catch (const ShapeError&) {
          continue;
        }
        const SimResult ideal = simulate(compute, costs("F=1,I=1,W=1"));
        REQUIRE(ideal.ok());
        CHECK(ideal.compute_only);
        double busy = 0;
        for (const auto& s : ideal.ranks) busy += s.busy;
        // F, I and W of every microbatch on each stage of its route (every
        // stage, unless the plan has microbatch routes: dualpipe).
        double owed = 0;
        for (int mb = 0; mb < m; ++mb) {
          const Route route = lowered.meta.route_of(mb);
          owed += 3.0 * (route.last - route.first + 1);
        }
        CHECK(busy == owed);
        if (!lowered.meta.has_routes()) CHECK(busy == 3.0 * m * p * lowered.meta.stages_per_rank);
        for (Transport t : kModels) {
          INFO(info.name << " p=" << p << " m=" << m << " " << to_string(t));
          const SimResult r = simulate(lowered, costs("F=1,I=1,W=1", t));
          INFO(problems(r));
          // A plan the verifier rejects under a model cannot finish there.
          const bool proven = verify(lowered, {t}).ok();
          REQUIRE(r.ok() == proven);
          if (!proven) continue;
          CHECK_FALSE(r.compute_only);
          // One stream per rank (serial) queues a prefetched receive's wait
          // in front of the rank's later sends: only the pair models match.
          if (t == Transport::Serial) continue;
          CHECK(r.makespan == ideal.makespan);
          CHECK(peaks(r) == peaks(ideal));
        }
      }
    }
  }
}

TEST_CASE("simulate: agrees with verify on perturbed plans", "[simulate]") {
  // Swap neighbouring actions of lowered plans; whenever the result is still
  // structurally valid, the simulator finishes exactly when verify proves it.
  std::mt19937 rng(7);
  int checked = 0, proven = 0;
  for (const auto& info : schedules()) {
    for (int p : {2, 3, 4}) {
      for (int m : {p, 2 * p + 1}) {
        Plan base;
        try {
          base = plan(Problem{info.name, p, m, 0});
        } catch (const ShapeError&) {
          continue;
        }
        for (int trial = 0; trial < 24; ++trial) {
          Plan q = base;
          for (int k = 0; k <= trial % 4; ++k) {
            auto& list = q.ranks[rng() % q.ranks.size()];
            if (list.size() < 2) continue;
            const std::size_t i = rng() % (list.size() - 1);
            std::swap(list[i], list[i + 1]);
          }
          if (!check_structure(q).empty()) continue;
          for (Transport t : kModels) {
            INFO(info.name << " p=" << p << " m=" << m << " trial " << trial << " "
                           << to_string(t));
            const bool ok = verify(q, {t}).ok();
            const SimResult r = simulate(q, costs("F=1,I=1,W=1", t));
            INFO(problems(r));
            CHECK(r.ok() == ok);
            ++checked;
            proven += ok;
          }
        }
      }
    }
  }
  CHECK(checked > 500);
  CHECK(proven < checked);  // the perturbations do break some plans
}

TEST_CASE("simulate: heterogeneous stage costs and latency, computed by hand", "[simulate]") {
  // gpipe p=2 m=2; stage 1 costs twice stage 0 (F=2, B=4); transfers 0.5.
  //   rank 0: F0 [0,1] F1 [1,2]              B1 [10,12] B0 [14,16]
  //   rank 1: F0 [1.5,3.5] F1 [3.5,5.5] B1 [5.5,9.5] B0 [9.5,13.5]
  const Plan p = plan(Problem{"gpipe", 2, 2, 0});
  for (Transport t : kModels) {
    INFO(to_string(t));
    SimOptions o = costs("F=1,B=2", t);
    o.costs.stage_scales = parse_stage_costs("stage,scale\n1,2\n");
    o.costs.comm_latency = 0.5;
    const SimResult r = simulate(p, o);
    REQUIRE(r.ok());
    CHECK(r.makespan == 16.0);
    CHECK(r.bubble_fraction == Approx(1.0 - 18.0 / 32.0));
    REQUIRE(r.ranks.size() == 2);
    CHECK(r.ranks[0].busy == 6.0);
    CHECK(r.ranks[0].idle == 10.0);
    CHECK(r.ranks[0].first_start == 0.0);
    CHECK(r.ranks[0].last_end == 16.0);
    CHECK(r.ranks[1].busy == 12.0);
    CHECK(r.ranks[1].first_start == 1.5);
    CHECK(r.ranks[1].last_end == 13.5);
    // The B1 gradient leaves rank 1 at 9.5 and lands at 10.
    const auto& ops = p.ranks[1];
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (to_string(ops[i]) == "1B1") CHECK(r.times[1][i].start == 5.5);
    REQUIRE(r.transfers.size() == 4);
    CHECK(r.transfers[2].start == 9.5);
    CHECK(r.transfers[2].end == 10.0);
  }
}

TEST_CASE("simulate: bandwidth adds bytes/bandwidth to every transfer", "[simulate]") {
  SimOptions o = costs("F=1,B=2");
  o.costs.comm_latency = 0.25;
  o.costs.comm_bandwidth = 100;
  o.costs.transfer_bytes = 75;
  CHECK(o.costs.transfer_time() == 1.0);
  // gpipe p=2 m=1: F [0,1], transfer 1, F [2,3], B [3,5], transfer 1, B [6,8].
  const SimResult r = simulate(plan(Problem{"gpipe", 2, 1, 0}), o);
  REQUIRE(r.ok());
  CHECK(r.makespan == 8.0);
}

TEST_CASE("simulate: OVERLAP_F_B costs F+B unless given", "[simulate]") {
  const Plan p = make_plan(1, 2, 1, {"0F0 (0F1;0B0)OVERLAP_F_B 0B1"});
  SimResult r = simulate(p, costs("F=1,B=2"));
  REQUIRE(r.ok());
  CHECK(r.times[0][1].start == 1.0);
  CHECK(r.times[0][1].end == 4.0);
  CHECK(r.makespan == 6.0);
  CHECK(peaks(r) == std::vector<int>{2});
  r = simulate(p, costs("F=1,B=2,OVERLAP_F_B=2.5"));
  CHECK(r.makespan == 5.5);
}

TEST_CASE("simulate: rendezvous reports two receives meeting on a pair", "[simulate]") {
  const Plan p = make_plan(2, 1, 1, {"0F0 0RECV_B0 0SEND_F0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
  const SimResult eager = simulate(p, costs("F=1,B=2", Transport::Eager));
  CHECK(eager.ok());
  CHECK(eager.makespan == 6.0);
  const SimResult r = simulate(p, costs("F=1,B=2", Transport::Rendezvous));
  REQUIRE_FALSE(r.ok());
  CHECK(problems(r) ==
        "sim-mismatch rank 0 index 1 (0RECV_B0): pair 0-1 position 0: 0RECV_B0 (rank 0 index 1) "
        "meets 1RECV_F0 (rank 1 index 0): both ranks receive, so neither transfer completes\n"
        "sim-deadlock rank 0 index 3 (0B0): stuck: 0RECV_B0 is on pair 0-1, which is blocked at "
        "a mismatched position (see sim-mismatch)\n"
        "sim-deadlock rank 1 index 1 (1F0): stuck: 1RECV_F0 is on pair 0-1, which is blocked at "
        "a mismatched position (see sim-mismatch)\n");
}

TEST_CASE("simulate: a send meeting a receive of another value is reported", "[simulate]") {
  const Plan p = make_plan(2, 2, 1, {"0F0 0F1 0SEND_F1 0SEND_F0", "1RECV_F0 1F0 1RECV_F1 1F1"});
  // Every model matches sends and receives in order, eager too.
  const SimResult e = simulate(p, costs("F=1", Transport::Eager));
  REQUIRE_FALSE(e.ok());
  CHECK(e.problems[0].code == "sim-mismatch");
  CHECK(e.problems[0].message ==
        "pair 0-1, sends and receives met in order: 0SEND_F1 (rank 0 index 2) meets 1RECV_F0 "
        "(rank 1 index 0): a send meets a receive of another value (data would be corrupted)");
  const SimResult r = simulate(p, costs("F=1", Transport::Rendezvous));
  REQUIRE_FALSE(r.ok());
  CHECK(r.problems[0].message ==
        "pair 0-1 position 0: 0SEND_F1 (rank 0 index 2) meets 1RECV_F0 (rank 1 index 0): a send "
        "meets a receive of another value (data would be corrupted)");
}

TEST_CASE("simulate: serial model deadlocks on a cycle of stream heads", "[simulate]") {
  // Rank 0 posts its receive from rank 2 before its send to rank 1: fine on
  // per-pair streams, a cycle when each rank has one stream.
  const Plan p = make_plan(
      3, 1, 2,
      {"0F0 3RECV_F0 0SEND_F0 3F0 3SEND_F0", "1RECV_F0 1F0 1SEND_F0 4RECV_F0 4F0 4SEND_F0",
       "2RECV_F0 2F0 2SEND_F0 5RECV_F0 5F0"});
  CHECK(simulate(p, costs("F=1", Transport::Rendezvous)).ok());
  CHECK(simulate(p, costs("F=1", Transport::Eager)).ok());
  const SimResult r = simulate(p, costs("F=1", Transport::Serial));
  REQUIRE_FALSE(r.ok());
  CHECK(problems(r) ==
        "sim-deadlock rank 0 index 3 (3F0): stuck: 3RECV_F0 is pair 0-2 position 0, but rank 2 "
        "posted only 0 operation(s) toward rank 0: rank 2 is stuck at index 1 (2F0)\n"
        "sim-deadlock rank 1 index 1 (1F0): stuck: 1RECV_F0 meets 0SEND_F0 (rank 0 index 2), "
        "which waits behind 3RECV_F0 (rank 0 index 1) on rank 0's serial stream\n"
        "sim-deadlock rank 2 index 1 (2F0): stuck: 2RECV_F0 is pair 1-2 position 0, but rank 1 "
        "posted only 0 operation(s) toward rank 2: rank 1 is stuck at index 1 (1F0)\n");
}

TEST_CASE("simulate: compute order problems are reported, never hang", "[simulate]") {
  SECTION("a backward before its forward") {
    const SimResult r = simulate(make_plan(1, 1, 1, {"0B0 0F0"}), costs("F=1"));
    REQUIRE_FALSE(r.ok());
    CHECK(problems(r) ==
          "sim-deadlock rank 0 index 0 (0B0): stuck: needs 0F0, which rank 0 runs "
          "later (index 1)\n");
  }
  SECTION("a receive posted after its consumer") {
    const SimResult r =
        simulate(make_plan(2, 1, 1, {"0F0 0SEND_F0", "1F0 1RECV_F0"}), costs("F=1"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.problems[0].message ==
          "stuck: its input arrives by 1RECV_F0, which rank 1 has not posted before it");
    CHECK(r.problems[1].code == "sim-unmatched");
    CHECK(r.problems[1].message ==
          "0SEND_F0 (rank 0 index 1) never completes at the end of the step: rank 1 posted only 0 "
          "operation(s) toward rank 0: rank 1 is stuck at index 0 (1F0)");
  }
  SECTION("a receive whose send is missing (eager)") {
    const SimResult r =
        simulate(make_plan(2, 1, 1, {"0F0", "1RECV_F0 1F0"}), costs("F=1", Transport::Eager));
    REQUIRE_FALSE(r.ok());
    CHECK(r.problems[0].message ==
          "stuck: 1RECV_F0 waits for 0SEND_F0 from rank 0, never posted: rank 0 finished its list");
  }
  SECTION("actions on the wrong rank or out of range") {
    const SimResult r = simulate(make_plan(2, 1, 1, {"1F0 0F3", "1F0"}), costs("F=1"));
    REQUIRE_FALSE(r.ok());
    CHECK(problems(r) ==
          "sim-bad-action rank 0 index 0 (1F0): stage 1 belongs to rank 1, not rank 0\n"
          "sim-bad-action rank 0 index 1 (0F3): stage 0 microbatch 3 is out of range (2 stages, 1 "
          "microbatches)\n");
  }
}

TEST_CASE("simulate: cost specs and stage-cost files parse strictly", "[simulate]") {
  CostModel c = parse_cost_spec("F=1,B=3");
  CHECK((c.b == 3 && c.i == 1.5 && c.w == 1.5));
  c = parse_cost_spec("f=2, i=1, w=0.5");
  CHECK((c.f == 2 && c.b == 1.5 && c.i == 1 && c.w == 0.5 && !c.overlap));
  c = parse_cost_spec("O=4");
  CHECK((c.overlap && *c.overlap == 4.0 && c.b == 2));
  CHECK_THROWS_WITH(parse_cost_spec("F=x"), "cost spec: F='x' is not a non-negative number");
  CHECK_THROWS_WITH(parse_cost_spec("Q=1"),
                    "cost spec: unknown action type 'Q' (use F, B, I, W or OVERLAP_F_B)");
  CHECK_THROWS_WITH(parse_cost_spec("F", {}, "--cost"),
                    "--cost: 'F' is not KEY=VALUE (e.g. F=1,B=2,I=1,W=1)");

  auto csv = parse_stage_costs("# heavy ends\nstage,F,B,I,W\n0,1.5,1.5,1,2\n3, 2\n");
  REQUIRE(csv.size() == 2);
  CHECK(csv.at(0) == StageScale{1.5, 1.5, 1, 2});
  CHECK(csv.at(3) == StageScale{2, 2, 2, 2});
  auto json = parse_stage_costs(R"({"stages":[{"stage":1,"scale":2,"W":1}]})");
  CHECK(json.at(1) == StageScale{2, 2, 2, 1});
  CHECK_THROWS_WITH(parse_stage_costs("0,1,2\n", "s.csv"),
                    "s.csv:1: expected \"stage,F,B,I,W\" or \"stage,SCALE\", got 3 fields");
  CHECK_THROWS_WITH(parse_stage_costs("0,1\n0,2\n", "s.csv"), "s.csv:2: stage 0 is listed twice");
  CHECK_THROWS_WITH(parse_stage_costs(R"({"stages":[{"stage":0,"G":1}]})", "s.json"),
                    "s.json: stages[0]: unknown key \"G\" (use stage, scale, F, B, I, W)");

  SimOptions o;
  o.costs.stage_scales = {{9, StageScale{}}};
  CHECK_THROWS_WITH(simulate(plan(Problem{"1f1b", 4, 8, 0}), o),
                    "stage costs name stage 9, but the plan has 4 stages (0..3)");
}

TEST_CASE("simulate: text and JSON reports", "[simulate]") {
  const Plan p = plan(Problem{"gpipe", 2, 2, 0});
  const SimOptions o = costs("F=1,B=2");
  const SimResult r = simulate(p, o);
  std::ostringstream text;
  write_sim_text(p, o, r, text);
  CHECK(text.str() ==
        "schedule gpipe: pp 2, microbatches 2, stages per rank 1\n"
        "model: rendezvous\n"
        "costs: F=1 B=2 I=1 W=1 OVERLAP_F_B=F+B; transfer 0 (latency 0)\n"
        "makespan: 9\n"
        "bubble: 33.33% (1 - busy / (ranks x makespan))\n"
        "rank  busy  idle  first  last  peak act  peak (rank units)  recv bufs\n"
        "   0     6     3      0     9         2                  2          1\n"
        "   1     6     3      1     7         2                  2          1\n");
  std::ostringstream json;
  write_sim_json(p, o, r, json);
  const auto doc = nlohmann::json::parse(json.str());
  CHECK(doc["format"] == "pipeplan.simulation");
  CHECK(doc["makespan"] == 9.0);
  CHECK(doc["bubble_fraction"] == Approx(1.0 / 3));
  CHECK(doc["ranks"][1] == nlohmann::json::parse(
                               R"({"rank":1,"busy":6.0,"idle":3.0,"first_start":1.0,"last_end":7.0,
                                   "peak_activations":2,"peak_rank_activations":2.0,
                                   "peak_recv_buffers":1,"peak_memory":2.0,
                                   "peak_host_memory":0.0,"copy_busy":0.0})"));
  CHECK(doc["peak_memory"] == 2.0);
}

TEST_CASE("simulate: CLI reports makespan, bubble and peaks", "[simulate][cli]") {
  auto r =
      run_cli({"simulate", "-s", "1f1b", "-p", "4", "-m", "8", "--cost", "F=1,B=2", "-f", "json"});
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["makespan"] == 33.0);
  CHECK(doc["bubble_fraction"] == 0.272727273);
  CHECK(doc["ranks"][0]["peak_activations"] == 4);
  CHECK(doc["model"] == "rendezvous");

  // A deadlocking file: exit 1, the reason on stdout, a summary on stderr.
  const std::string bad =
      temp_file("deadlock.csv", "0F0,0RECV_B0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  r = run_cli({"simulate", bad});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("error[sim-mismatch] rank 0 index 1 (0RECV_B0): pair 0-1 position 0") !=
        std::string::npos);
  CHECK(r.err.find("cannot run to completion under the rendezvous model") != std::string::npos);
  r = run_cli({"simulate", bad, "--model", "eager"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("makespan: 6\n") != std::string::npos);

  r = run_cli({"simulate", bad, "-s", "1f1b"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("give either a plan FILE or -s NAME -p P -m M, not both") != std::string::npos);
  r = run_cli({"simulate", "-s", "1f1b", "-p", "4", "-m", "8", "--comm", "0.5,x"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--comm bandwidth 'x' is not a non-negative number") != std::string::npos);
}

TEST_CASE("simulate: compare sorts schedules by makespan", "[simulate][cli]") {
  auto r = run_cli({"compare", "-p", "4", "-m", "8", "--schedules", "gpipe,zb-h1,1f1b,zbv",
                    "--cost", "F=1,I=1,W=1", "-f", "json"});
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  std::vector<std::string> order;
  for (const auto& row : doc["results"]) order.push_back(row["schedule"]);
  // zbv's two stages per rank each cost half: 51 / 2 = 25.5.
  CHECK(order == std::vector<std::string>{"zbv", "zb-h1", "gpipe", "1f1b"});
  CHECK(doc["results"][0]["makespan"] == 25.5);
  CHECK(doc["results"][0]["peak_rank_activations"] == 4.0);
  CHECK(doc["results"][2]["makespan"] == 33.0);

  r = run_cli({"compare", "-p", "4", "-m", "3"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("skipped 1f1b: needs at least pp_degree=4 microbatches") != std::string::npos);
  CHECK(r.out.rfind("schedule", 0) == std::string::npos);  // header line comes second
  CHECK(r.out.find("\nschedule ") != std::string::npos);
}
