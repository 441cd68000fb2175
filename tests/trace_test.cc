// Measured traces in the core: the JSON table and Chrome trace round trip,
// the consistency checks, step timelines and calibration from a trace whose
// costs are known (synthesised from a simulation).
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/planner.h"
#include "pipeplan/render.h"
#include "pipeplan/simulate.h"
#include "pipeplan/trace.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::run_cli;
using pipeplan::test::temp_file;

namespace {

// A run of `steps` steps of `plan` whose every step behaves like the
// simulation under `costs` (step 1 is `warmup` times slower, as a first step
// is), one step after the other. A RECV's wait is its whole post..completion.
Trace synthesise(const Plan& plan, const CostModel& costs, int steps, double warmup = 3.0) {
  Trace t;
  t.plan = plan;
  t.source = "synthesised";
  double origin = 100.0;
  for (int k = 1; k <= steps; ++k) {
    SimOptions o;
    o.costs = costs;
    if (k == 1) {
      o.costs.f *= warmup, o.costs.b *= warmup, o.costs.i *= warmup, o.costs.w *= warmup;
    }
    const SimResult r = simulate(plan, o);
    REQUIRE(r.ok());
    for (std::size_t rank = 0; rank < plan.ranks.size(); ++rank)
      for (std::size_t i = 0; i < plan.ranks[rank].size(); ++i) {
        TraceRecord rec;
        rec.step = k;
        rec.rank = static_cast<int>(rank);
        rec.index = static_cast<int>(i);
        rec.action = plan.ranks[rank][i];
        rec.start = origin + r.times[rank][i].start;
        rec.end = origin + r.times[rank][i].end;
        if (is_recv(rec.action.type)) rec.wait = rec.end - rec.start;
        if (is_comm(rec.action.type)) rec.bytes = 4096;
        t.records.push_back(rec);
      }
    origin += r.makespan + 1.0;
  }
  return t;
}

CostModel known_costs() {
  CostModel c;
  c.f = 2.0, c.b = 5.0, c.i = 3.0, c.w = 2.0;
  c.stage_scales[1] = StageScale{1.5, 1.5, 1.5, 1.5};
  c.comm_latency = 0.25;
  return c;
}

}  // namespace

TEST_CASE("trace: a synthesised run is consistent and its steps are timelines", "[trace]") {
  const Plan p = plan(Problem{"1f1b", 3, 6});
  const Trace t = synthesise(p, known_costs(), 3);
  CHECK(t.num_steps() == 3);
  CHECK(check_trace(t).empty());
  const Timeline step2 = step_timeline(t, 2);
  SimOptions o;
  o.costs = known_costs();
  const SimResult sim = simulate(p, o);
  CHECK(step2.makespan == Approx(sim.makespan));
  CHECK(step2.bubble_fraction == Approx(sim.bubble_fraction));
  REQUIRE(step2.transfers.size() == sim.transfers.size());
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    CHECK(step2.ranks[r].busy == Approx(sim.ranks[r].busy));
    CHECK(step2.ranks[r].peak_activations == sim.ranks[r].peak_activations);
  }
  // On the run's clock, step 3 comes after step 2.
  const std::vector<Timeline> all = trace_timelines(t);
  REQUIRE(all.size() == 3);
  CHECK(all[2].times[0][0].start > all[1].times[0][0].start);
  // The renderers draw a measured step like a simulated one.
  std::ostringstream svg, chrome;
  SvgOptions so;
  so.note = "measured step 2, ms";
  write_svg(p, step2, so, svg);
  CHECK(svg.str().find("measured step 2, ms") != std::string::npos);
  write_trace_chrome(t, chrome);
  CHECK(chrome.str().find("\"name\":\"2F5\",\"cat\":\"F\",\"ph\":\"X\",\"pid\":0,\"tid\":2") !=
        std::string::npos);
  CHECK(chrome.str().find("\"args\":{\"step\":3,") != std::string::npos);
  CHECK(chrome.str().find("\"ph\":\"s\"") != std::string::npos);
  // ... and the Chrome trace carries the records back.
  CHECK(parse_trace_json(chrome.str(), "t.json").records == t.records);
}

TEST_CASE("trace: the JSON table round-trips and bad input is named", "[trace][io]") {
  const Trace t = synthesise(plan(Problem{"zbv", 2, 4}), known_costs(), 2);
  std::ostringstream out;
  write_trace_json(t, out);
  const Trace back = parse_trace_json(out.str(), "t.json");
  CHECK(back.plan == t.plan);
  CHECK(back.source == "synthesised");
  REQUIRE(back.records.size() == t.records.size());
  for (std::size_t k = 0; k < t.records.size(); ++k) {
    CHECK(back.records[k].action == t.records[k].action);
    CHECK(back.records[k].start == Approx(t.records[k].start).margin(1e-6));
  }
  std::string bad = out.str();
  const std::string rec0 = "[1, 0, 0, \"0F0\"";
  bad.replace(bad.find(rec0), rec0.size(), "[1, 0, 0, \"0X0\"");
  CHECK_THROWS_WITH(parse_trace_json(bad, "t.json"),
                    Catch::Contains("t.json: records[") && Catch::Contains("unknown action '0X0'"));
  CHECK_THROWS_WITH(parse_trace_json("{\"traceEvents\":[]}", "sim.json"),
                    Catch::Contains("a Chrome trace without pipeplan records"));
  CHECK_THROWS_WITH(parse_trace_json("{\"format\":\"pipeplan.plan\"}", "p.json"),
                    Catch::Contains("p.json: format: expected \"pipeplan.trace\""));
}

TEST_CASE("trace: bytes held are two more columns, read back; old tables still read",
          "[trace][io]") {
  Trace t = synthesise(plan(Problem{"1f1b", 2, 2}), known_costs(), 1);
  std::ostringstream plain;
  write_trace_json(t, plain);
  CHECK(plain.str().find("\"held\"") == std::string::npos);  // not measured: the old table
  for (TraceRecord& r : parse_trace_json(plain.str(), "t.json").records) CHECK(r.held == -1);
  for (std::size_t k = 0; k < t.records.size(); ++k) {
    t.records[k].held = static_cast<std::int64_t>(1000 * k);
    t.records[k].peak = static_cast<std::int64_t>(1000 * k + 500);
  }
  std::ostringstream out;
  write_trace_json(t, out);
  CHECK(out.str().find("\"post\", \"held\", \"peak\"]") != std::string::npos);
  const Trace back = parse_trace_json(out.str(), "t.json");
  REQUIRE(back.records.size() == t.records.size());
  for (std::size_t k = 0; k < t.records.size(); ++k) {
    CHECK(back.records[k].held == t.records[k].held);
    CHECK(back.records[k].peak == t.records[k].peak);
  }
  std::string bad = out.str();
  bad.replace(bad.find(", 1000, 1500]"), 13, ", 1000, 1.5]");
  CHECK_THROWS_WITH(parse_trace_json(bad, "t.json"),
                    Catch::Contains("records[1]: peak must be an integer"));
}

TEST_CASE("trace: check_trace names missing, misplaced, overlapping and early records", "[trace]") {
  const Plan p = plan(Problem{"1f1b", 2, 2});
  const Trace good = synthesise(p, known_costs(), 1);
  REQUIRE(check_trace(good).empty());

  Trace missing = good;
  missing.records.erase(missing.records.begin() + 1);
  auto m = check_trace(missing);
  REQUIRE(m.size() == 1);
  CHECK(m[0] == "step 1 has no record of rank 0 index 1 (0SEND_F0)");

  Trace wrong = good;
  wrong.records[0].action = make(ActionType::F, 0, 1);
  CHECK(check_trace(wrong).at(0) ==
        "record step 1 rank 0 index 0 is 0F1, but the plan has 0F0 there");

  // Rank 0: 0F1 (index 2) starts inside 0F0.
  Trace overlap = good;
  for (auto& r : overlap.records)
    if (r.rank == 0 && r.index == 2) r.start -= 1.9, r.end -= 1.9;
  auto o = check_trace(overlap);
  REQUIRE_FALSE(o.empty());
  CHECK(o[0].find("step 1 rank 0 index 2 (0F1)") == 0);

  // Rank 1's 1F0 starts before rank 0's 0F0 ended.
  Trace early = good;
  for (auto& r : early.records)
    if (r.rank == 1) r.start -= 1.5, r.end -= 1.5;
  auto e = check_trace(early);
  REQUIRE_FALSE(e.empty());
  bool named = false;
  for (const auto& msg : e)
    named = named || msg.find("before its input 0F0 on rank 0 ended") != std::string::npos;
  CHECK(named);
}

TEST_CASE("trace: calibrate recovers known costs, dropping the first step", "[trace][calibrate]") {
  const Plan p = plan(Problem{"zb-h1", 3, 6});
  const CostModel costs = known_costs();
  const Trace t = synthesise(p, costs, 4);
  const Calibration c = calibrate(t);
  CHECK(c.steps_used == 3);
  REQUIRE(c.stage_ms.size() == 3);
  for (int s = 0; s < 3; ++s) {
    const double k = s == 1 ? 1.5 : 1.0;
    CHECK(c.stage_ms.at(s).f == Approx(2.0 * k));
    CHECK(c.stage_ms.at(s).i == Approx(3.0 * k));
    CHECK(c.stage_ms.at(s).w == Approx(2.0 * k));
    CHECK(c.stage_ms.at(s).b == Approx(5.0 * k));  // derived: I + W
    CHECK(c.derived.at(s) == "B");
  }
  CHECK(c.comm_latency_ms == Approx(0.25));
  CHECK(c.comm_bandwidth == 0.0);
  CHECK(c.transfer_bytes == 4096);
  CHECK(c.transfers_used > 0);
  SimOptions o;
  o.costs = costs;
  CHECK(c.measured_step_ms == Approx(simulate(p, o).makespan));

  // The file simulates the same step in milliseconds, with no other costs.
  std::ostringstream file;
  write_calibration_json(c, file);
  const StageCosts read = read_stage_costs(file.str(), "cal.json");
  CHECK(read.absolute);
  CHECK(read.time_unit == "ms");
  CHECK(read.stages_per_rank == 1);
  SimOptions from_file;
  from_file.costs = cost_model_of(read);
  CHECK(simulate(p, from_file).makespan == Approx(c.measured_step_ms));

  // One step only: it is used, warm-up and all.
  const Calibration one = calibrate(synthesise(p, costs, 1, 2.0));
  CHECK(one.steps_used == 1);
  CHECK(one.stage_ms.at(0).f == Approx(4.0));
}

TEST_CASE("trace: calibrate fits latency and bandwidth from several payload sizes",
          "[trace][calibrate]") {
  const Plan p = plan(Problem{"1f1b", 2, 4});
  Trace t = synthesise(p, known_costs(), 2);
  // Give the transfers of step 2 payloads of 1000 or 3000 bytes taking
  // 0.1 ms + bytes / 2000 bytes-per-ms from the moment the data is ready
  // (send posted, producer ended) while the receiver waits.
  auto find = [&](int step, int rank, ActionType type, int stage, int mb) -> TraceRecord* {
    for (auto& r : t.records)
      if (r.step == step && r.rank == rank && r.action == make(type, stage, mb)) return &r;
    return nullptr;
  };
  for (auto& r : t.records)
    if (is_comm(r.action.type)) r.bytes = r.action.microbatch % 2 == 0 ? 1000 : 3000;
  for (const auto& send : t.records) {
    if (!is_send(send.action.type)) continue;
    const bool fwd = send.action.type == ActionType::SendF;
    const int s = send.action.stage, mb = send.action.microbatch;
    TraceRecord* producer = find(send.step, send.rank, fwd ? ActionType::F : ActionType::B, s, mb);
    TraceRecord* recv = find(send.step, 1 - send.rank, fwd ? ActionType::RecvF : ActionType::RecvB,
                             fwd ? s + 1 : s - 1, mb);
    REQUIRE(producer);
    REQUIRE(recv);
    const double ready = std::max({send.start, recv->start, producer->end});
    if (send.step == 1 || recv->start > ready) {
      recv->wait = 0;  // not a clean sample
      continue;
    }
    recv->end = ready + 0.1 + static_cast<double>(send.bytes) / 2000.0;
    recv->wait = recv->end - recv->start;
  }
  const Calibration c = calibrate(t);
  CHECK(c.comm_latency_ms == Approx(0.1));
  CHECK(c.comm_bandwidth == Approx(2000.0));
}

TEST_CASE("cli: calibrate writes a stage-costs file that simulate reads in ms", "[trace][cli]") {
  const Plan p = plan(Problem{"1f1b", 2, 4});
  const Trace t = synthesise(p, known_costs(), 3);
  std::ostringstream chrome;
  write_trace_chrome(t, chrome);
  const std::string trace = temp_file("trace.json", chrome.str());
  const std::string costs = temp_file("costs.json", "");
  auto c = run_cli({"calibrate", trace, "-o", costs});
  INFO(c.out << c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(c.err.find("from 2 step(s) (step 1 dropped)") != std::string::npos);
  CHECK(c.err.find("(+0%)") != std::string::npos);
  auto plan_file =
      run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "4", "-o", temp_file("p.json", "")});
  REQUIRE(plan_file.exit_code == 0);
  auto s = run_cli(
      {"simulate", "-s", "1f1b", "-p", "2", "-m", "4", "--stage-costs", costs, "-f", "json"});
  INFO(s.out << s.err);
  REQUIRE(s.exit_code == 0);
  SimOptions o;
  o.costs = known_costs();
  const double expected = simulate(p, o).makespan;
  CHECK(s.out.find("\"makespan\": " + std::to_string(static_cast<int>(expected))) !=
        std::string::npos);

  auto r = run_cli({"render", "--trace", trace, "--step", "2", "--svg", temp_file("m.svg", "")});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  auto bad = run_cli({"render", "--trace", trace, "--step", "9", "--text"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--step 9: the trace has steps 1..3") != std::string::npos);
  auto cmp = run_cli({"compare", "-p", "2", "-m", "4", "-v", "1", "--stage-costs", costs});
  INFO(cmp.out << cmp.err);
  CHECK(cmp.exit_code == 0);
  CHECK(cmp.err.find("calibrated costs as one rank's share") != std::string::npos);
}
