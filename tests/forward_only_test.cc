// Forward-only (inference) plans: planned for every schedule, lowered,
// verified under every transport model, recorded in JSON, read from CSV.
#include <catch2/catch.hpp>

#include <sstream>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::actions;
using pipeplan::test::run_cli;
using pipeplan::test::temp_file;

namespace {

Problem fwd(const std::string& schedule, int p, int m, int v = 0) {
  Problem pr{schedule, p, m, v};
  pr.forward_only = true;
  return pr;
}

std::string text_of(const Plan& plan) {
  std::ostringstream out;
  write_text(plan, out);
  return out.str();
}

}  // namespace

TEST_CASE("forward-only: every schedule over a grid plans, lowers and verifies under every model",
          "[forward-only][sweep]") {
  for (const auto& info : schedules()) {
    int accepted = 0;
    for (int p = 1; p <= 5; ++p)
      for (int m = 1; m <= 12; ++m)
        for (int v = 1; v <= 3; ++v) {
          Problem train{info.name, p, m, v};
          Plan training_compute;
          try {
            training_compute = plan_compute(train);
          } catch (const ShapeError&) {
            // Forward-only plans keep the schedule's shape rules.
            CHECK_THROWS_AS(plan(fwd(info.name, p, m, v)), ShapeError);
            continue;
          }
          ++accepted;
          INFO(info.name << " p=" << p << " m=" << m << " v=" << v);
          const Plan compute = plan_compute(fwd(info.name, p, m, v));
          const Plan lowered = plan(fwd(info.name, p, m, v));
          REQUIRE(compute.meta.forward_only);
          REQUIRE(lowered.meta.forward_only);
          // The compute order is the schedule's forward order, and lower()
          // keeps it: only F, SEND_F and RECV_F, one F per (stage, microbatch).
          std::size_t n_f = 0;
          for (std::size_t r = 0; r < compute.ranks.size(); ++r) {
            REQUIRE(compute.ranks[r] == forward_projection(training_compute.ranks[r]));
            std::vector<Action> kept;
            for (const Action& a : lowered.ranks[r]) {
              REQUIRE((a.type == ActionType::F || a.type == ActionType::SendF ||
                       a.type == ActionType::RecvF));
              if (a.type == ActionType::F) kept.push_back(a), ++n_f;
            }
            REQUIRE(kept == compute.ranks[r]);
          }
          std::size_t owed = 0;  // one F per microbatch and stage of its route
          for (int mb = 0; mb < m; ++mb)
            owed += static_cast<std::size_t>(compute.meta.route_of(mb).last -
                                             compute.meta.route_of(mb).first + 1);
          REQUIRE(n_f == owed);
          if (!compute.meta.has_routes()) REQUIRE(n_f == static_cast<std::size_t>(p * v * m));
          REQUIRE(lowered == lower(compute, schedule_lowering(compute.meta)));
          // The default plan runs under every model (as for training plans).
          for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
            VerifyResult res = verify(lowered, {t});
            INFO(to_string(t) << "\n" << format_diagnostics(res.diagnostics) << text_of(lowered));
            REQUIRE(res.ok());
          }
          // Serial safety asked for, of the latency-hiding lowering.
          LowerOptions safe = schedule_lowering(compute.meta);
          safe.serial_safe = true;
          const Plan serial = lower(compute, safe);
          VerifyResult res = verify(serial, {Transport::Serial});
          INFO("serial-safe\n" << format_diagnostics(res.diagnostics) << text_of(serial));
          REQUIRE(res.ok());
          // The same actions, taken for a training plan, owe backwards.
          Plan as_training = lowered;
          as_training.meta.forward_only = false;
          const VerifyResult missing = verify(as_training);
          REQUIRE_FALSE(missing.ok());
          CHECK(missing.diagnostics.front().code == "missing-backward");
        }
    INFO(info.name);
    CHECK(accepted > 0);
  }
}

TEST_CASE("forward-only: exact orders of 1f1b, gpipe, interleaved-1f1b and zbv", "[forward-only]") {
  // One direction: each rank receives, runs and sends microbatch by
  // microbatch; odd ranks post the next receive before the previous send
  // (parity staggering, as in 1f1b).
  CHECK(text_of(plan(fwd("1f1b", 3, 3))) ==
        "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2\n"
        "rank 1: 1RECV_F0 1F0 1RECV_F1 1SEND_F0 1F1 1RECV_F2 1SEND_F1 1F2 1SEND_F2\n"
        "rank 2: 2RECV_F0 2F0 2RECV_F1 2F1 2RECV_F2 2F2\n");
  CHECK(text_of(plan(fwd("gpipe", 2, 3))) ==
        "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2\n"
        "rank 1: 1RECV_F0 1F0 1RECV_F1 1F1 1RECV_F2 1F2\n");
  // Both ways between ranks 0 and 1 (stage 1 -> 2 goes back to rank 0):
  // the latency-hiding lowering posts both ends in one pair order and its
  // receives ahead; the seed lowering staggers sends by parity, so the two
  // ends never both send first.
  const Plan il = plan(fwd("interleaved-1f1b", 2, 2, 2));
  CHECK(schedule_lowering(il.meta).send_placement == SendPlacement::ParityStaggered);
  CHECK(text_of(il) ==
        "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 2RECV_F0 2RECV_F1 2F0 2SEND_F0 2F1 2SEND_F1\n"
        "rank 1: 1RECV_F0 1RECV_F1 1F0 1SEND_F0 1F1 1SEND_F1 3RECV_F0 3RECV_F1 3F0 3F1\n");
  LowerOptions seed = schedule_lowering(il.meta);
  seed.mode = LowerMode::Seed;
  CHECK(text_of(lower(plan_compute(fwd("interleaved-1f1b", 2, 2, 2)), seed)) ==
        "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 2RECV_F0 2F0 2RECV_F1 2SEND_F0 2F1 2SEND_F1\n"
        "rank 1: 1RECV_F0 1F0 1RECV_F1 1SEND_F0 1F1 1SEND_F1 3RECV_F0 3F0 3RECV_F1 3F1\n");
  // V: down chunk 0, back up chunk 1; the last stage sits on rank 0.
  const Plan v = plan(fwd("zbv", 2, 2));
  CHECK(text_of(v) ==
        "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 3RECV_F0 3RECV_F1 3F0 3F1\n"
        "rank 1: 1RECV_F0 1RECV_F1 1F0 2F0 2SEND_F0 1F1 2F1 2SEND_F1\n");
}

TEST_CASE("forward-only: dualpipev keeps the forward half of each overlapped pair",
          "[forward-only]") {
  const Plan train = plan_compute(Problem{"dualpipev", 2, 4});
  const Plan compute = plan_compute(fwd("dualpipev", 2, 4));
  for (std::size_t r = 0; r < train.ranks.size(); ++r) {
    std::size_t expected = 0;
    for (const Action& a : train.ranks[r])
      expected += a.type == ActionType::F || a.type == ActionType::OverlapFB;
    CHECK(compute.ranks[r].size() == expected);
  }
}

TEST_CASE("forward-only: a backward in a forward-only plan is a named defect", "[forward-only]") {
  Plan p;
  p.meta = PlanMeta{"custom", 2, 1, 1, StageMapping::Loop};
  p.meta.forward_only = true;
  p.rank_ids = {0, 1};
  p.ranks = {actions("0F0 0SEND_F0 0RECV_B0 0B0"), actions("1RECV_F0 1F0 1B0 1SEND_B0")};
  const auto diags = check_structure(p);
  REQUIRE(diags.size() == 4);
  CHECK(diags[0].code == "backward-in-forward-only");
  CHECK(diags[0].message ==
        "rank 0 index 2: 0RECV_B0 is a backward action, but the plan is forward-only (F, "
        "SEND_F, RECV_F)");
  // And a missing forward is still reported.
  p.ranks = {actions("0F0 0SEND_F0"), actions("1RECV_F0")};
  const auto missing = check_structure(p);
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].code == "missing-forward");
}

TEST_CASE("forward-only: JSON records the flag and reads it back; CSV takes it as an option",
          "[forward-only][io]") {
  const Plan p = plan(fwd("1f1b", 2, 2));
  std::ostringstream json;
  write_json(p, json);
  CHECK(json.str().find("\"compute_only\": false,\n  \"forward_only\": true,\n") !=
        std::string::npos);
  CHECK(parse_json_plan(json.str()) == p);
  // Training plans keep the layout without the field.
  std::ostringstream train;
  write_json(plan(Problem{"1f1b", 2, 2}), train);
  CHECK(train.str().find("forward_only") == std::string::npos);
  // A wrong type is named.
  std::string bad = json.str();
  bad.replace(bad.find("\"forward_only\": true"), 20, "\"forward_only\": 1");
  CHECK_THROWS_WITH(parse_json_plan(bad, "f.json"),
                    "f.json: forward_only: expected true or false, got number");

  std::ostringstream csv;
  write_csv(p, csv);
  CsvReadOptions o;
  o.schedule = "1f1b";
  CHECK_FALSE(parse_csv_plan(csv.str(), "f.csv", o).meta.forward_only);
  o.forward_only = true;
  CHECK(parse_csv_plan(csv.str(), "f.csv", o) == p);
}

TEST_CASE("forward-only: the simulator keeps no activation between microbatches",
          "[forward-only][simulate]") {
  const SimResult r = simulate(plan(fwd("1f1b", 4, 8)), {});
  for (const auto& rank : r.ranks) CHECK(rank.peak_activations == 1);
  // 8 forwards on the last rank after 3 fill steps, unit costs.
  CHECK(r.makespan == Approx(11.0));
}

TEST_CASE("cli: plan --forward-only and verify FILE --forward-only", "[forward-only][cli]") {
  auto p = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "--forward-only", "-f", "csv"});
  REQUIRE(p.exit_code == 0);
  CHECK(p.out == "0F0,0SEND_F0,0F1,0SEND_F1\n1RECV_F0,1F0,1RECV_F1,1F1\n");
  const std::string csv = temp_file("fwd.csv", p.out);

  auto ok = run_cli({"verify", csv, "--forward-only", "--model", "all"});
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("ok: custom (pp=2, m=2, v=1, forward-only, 8 actions) is deadlock-free under "
                    "serial transport") != std::string::npos);

  auto missing = run_cli({"verify", csv});
  CHECK(missing.exit_code == 1);
  CHECK(missing.out.find("missing-backward") != std::string::npos);
  CHECK(missing.out.find("hint: the plan holds no backward action at all; pass --forward-only") !=
        std::string::npos);

  // JSON carries the flag: no option needed.
  auto j = run_cli({"plan", "-s", "zbv", "-p", "2", "-m", "3", "--forward-only"});
  REQUIRE(j.exit_code == 0);
  CHECK(j.out.find("\"forward_only\": true") != std::string::npos);
  auto vj = run_cli({"verify", "-", "--model", "all"}, j.out);
  INFO(vj.out << vj.err);
  CHECK(vj.exit_code == 0);

  // A training plan verified as forward-only names its backwards.
  auto t = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "-f", "csv"});
  REQUIRE(t.exit_code == 0);
  auto wrong = run_cli({"verify", temp_file("train.csv", t.out), "--forward-only"});
  CHECK(wrong.exit_code == 1);
  CHECK(wrong.out.find("backward-in-forward-only") != std::string::npos);

  // The simulator takes the flag for files and for -s.
  auto s = run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--forward-only"});
  INFO(s.out << s.err);
  CHECK(s.exit_code == 0);
  auto sf = run_cli({"simulate", csv, "--forward-only"});
  INFO(sf.out << sf.err);
  CHECK(sf.exit_code == 0);
}
