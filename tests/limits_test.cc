// The second hostile run (issue 25), case by case: the readers and options
// added after the first hardening pass (traces, stage costs, layer profiles,
// the timeline, pictures, train) under the same rules. Each case exits 2
// with a message naming the problem, in time and memory by its input; the
// large inputs are generated here. docs/robustness.md lists the limits.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/planner.h"
#include "pipeplan/render.h"
#include "pipeplan/simulate.h"
#include "pipeplan/trace.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::CliResult;
using pipeplan::test::run_cli;
using pipeplan::test::run_cli_capped;
using pipeplan::test::temp_file;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string json_of(const Plan& p) {
  std::ostringstream s;
  write_json(p, s);
  return s.str();
}

std::string deep(std::size_t n) { return std::string(n, '[') + std::string(n, ']'); }

// A consistent trace of `steps` steps of `plan`: every step runs like the
// unit-cost simulation, one after the other.
Trace steady_trace(const Plan& plan, int steps) {
  Trace t;
  t.plan = plan;
  const SimResult r = simulate(plan);
  REQUIRE(r.ok());
  double origin = 0;
  for (int k = 1; k <= steps; ++k) {
    for (std::size_t rank = 0; rank < plan.ranks.size(); ++rank)
      for (std::size_t i = 0; i < plan.ranks[rank].size(); ++i) {
        TraceRecord rec;
        rec.step = k;
        rec.rank = static_cast<int>(rank);
        rec.index = static_cast<int>(i);
        rec.action = plan.ranks[rank][i];
        rec.start = origin + r.times[rank][i].start;
        rec.end = origin + r.times[rank][i].end;
        t.records.push_back(rec);
      }
    origin += r.makespan + 1;
  }
  return t;
}

std::string trace_doc(const std::string& plan_json, const std::string& records) {
  return "{\"format\": \"pipeplan.trace\", \"version\": 1, \"plan\": " + plan_json +
         ", \"records\": [" + records + "]}";
}

// "name,F,B,W,activation" with n layers of varied cost.
std::string layer_csv(int n) {
  std::string csv = "name,F,B,W,activation\n";
  for (int l = 0; l < n; ++l) {
    const double f = 0.5 + (l * 7919 % 1000) / 1000.0;
    csv += "l" + std::to_string(l) + "," + std::to_string(f) + "," + std::to_string(2 * f) + "," +
           std::to_string(f) + ",1\n";
  }
  return csv;
}

}  // namespace

TEST_CASE("limits: JSON nested past 64 levels is refused while reading, never a crash",
          "[limits]") {
  // Item 1: calibrate and render --trace segfaulted on a 200 KB trace whose
  // plan held a 100,000-deep array (the plan was written back recursively).
  const std::string plan = json_of(plan_compute(Problem{"1f1b", 2, 2}));
  std::string nested = plan;
  nested.insert(nested.find("\"ranks\""), "\"x\": " + deep(100000) + ", ");
  const std::string file = temp_file("deep_trace.json", trace_doc(nested, ""));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"calibrate", file}, {"render", "--trace", file, "--text"}}) {
    const CliResult r = run_cli(args);
    INFO(args[0] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "deep_trace.json: nested deeper than the supported 64 levels"));
  }
  // Every JSON reader: a plan, a stage-costs file, records themselves.
  const CliResult p = run_cli({"verify", "-"}, "{\"x\": " + deep(100000) + "}");
  CHECK(p.exit_code == 2);
  CHECK(contains(p.err, "<stdin>: nested deeper than the supported 64 levels"));
  const std::string costs = temp_file("deep.json", "{\"stages\": [], \"x\": " + deep(65) + "}");
  const CliResult c =
      run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--stage-costs", costs});
  CHECK(c.exit_code == 2);
  CHECK(contains(c.err, "nested deeper than the supported 64 levels"));
  CHECK_THROWS_WITH(parse_trace_json(trace_doc(plan, deep(70)), "t.json"),
                    "t.json: nested deeper than the supported 64 levels");
  // A number no double holds is invalid JSON too (nlohmann's out_of_range
  // escaped as exit 3; found by fuzz_trace).
  const std::string overflow = temp_file("overflow.json", "{\"stages\": [{\"stage\": 0, \"scale\": 1e400}]}");
  const CliResult big = run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--stage-costs",
                                 overflow});
  CHECK(big.exit_code == 2);
  CHECK(contains(big.err, "overflow.json: not valid JSON: number overflow parsing '1e400'"));
  CHECK_THROWS_WITH(parse_trace_json(trace_doc(plan, "[1, 0, 0, \"0F0\", 1e999, 1, 0, 0, 0]"), "t.json"),
                    Catch::Contains("t.json: not valid JSON: number overflow parsing '1e999'"));
  // 64 levels are fine (and refused for what they hold).
  CHECK_THROWS_WITH(parse_trace_json(trace_doc(plan, deep(62)), "t.json"),
                    Catch::Contains("records[0]: expected [step, rank, index"));
}

TEST_CASE("limits: every reader refuses a key given twice", "[limits]") {
  // Item 6: the stage-costs reader kept the last of {"scale": 2, "scale": 3}.
  for (const char* doc : {"{\"stages\": [{\"stage\": 0, \"scale\": 2, \"scale\": 3}]}",
                          "{\"stages\": [{\"stage\": 0}], \"stages\": [{\"stage\": 1}]}"}) {
    const std::string file = temp_file("dup_costs.json", doc);
    const CliResult r =
        run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--stage-costs", file});
    INFO(doc);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "dup_costs.json: duplicate key"));
  }
  CHECK_THROWS_WITH(parse_cost_spec("F=1,B=2,f=3"), "cost spec: f is given twice");
  const CliResult spec =
      run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--cost", "B=2,B=100"});
  CHECK(spec.exit_code == 2);
  CHECK(contains(spec.err, "--cost: B is given twice"));
  const std::string plan = json_of(plan_compute(Problem{"1f1b", 2, 2}));
  std::string twice = trace_doc(plan, "");
  twice.insert(twice.find("\"records\""), "\"records\": [], ");
  CHECK_THROWS_WITH(parse_trace_json(twice, "t.json"), "t.json: duplicate key 'records'");
}

TEST_CASE("limits: trace checks, timelines and calibration take time by the records", "[limits]") {
  // Item 4: check_trace built a view per step scanning every record
  // (256k records: 27 s). 12,000 steps of a 16-action plan, 192k records.
  const Plan p = plan(Problem{"1f1b", 2, 2});
  const Trace t = steady_trace(p, 12000);
  REQUIRE(t.records.size() == 192000);
  CHECK(check_trace(t).empty());
  CHECK(trace_timelines(t).size() == 12000);
  const Calibration c = calibrate(t);
  CHECK(c.steps_used == 11999);
  CHECK(c.stage_ms.at(0).f == Approx(1));
  // Problems still come in record order, then the missing ones in slot order.
  Trace broken = t;
  broken.records.erase(broken.records.begin() + 5);
  broken.records.push_back(broken.records.front());
  const std::vector<std::string> problems = check_trace(broken, 3);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "record step 1 rank 0 index 0 (0F0) is recorded twice");
  CHECK(contains(problems[1], "step 1 has no record of rank 0 index 5"));
}

TEST_CASE("limits: a calibration names the types its run never ran, never writes them as 0",
          "[limits][calibrate]") {
  // A trace with only forwards: B, I and W were not measured.
  Problem pr{"1f1b", 2, 2};
  pr.forward_only = true;
  const Calibration c = calibrate(steady_trace(plan(pr), 3));
  CHECK(c.unmeasured == std::map<int, std::string>{{0, "B,I,W"}, {1, "B,I,W"}});
  CHECK(c.derived.empty());
  std::ostringstream file;
  write_calibration_json(c, file);
  const std::string text = file.str();
  CHECK(text.find("\"B\"") == std::string::npos);
  CHECK(contains(text, "\"unmeasured\": {\"0\": \"B,I,W\", \"1\": \"B,I,W\"}"));
  const StageCosts read = read_stage_costs(text, "costs.json");
  CHECK(read.unmeasured == c.unmeasured);
  SimOptions o;
  o.costs = cost_model_of(read);
  // The forward-only plan is costed; a training plan is refused, naming what is missing.
  CHECK(simulate(plan(pr), o).ok());
  CHECK_THROWS_WITH(simulate(plan(Problem{"1f1b", 2, 2}), o),
                    Catch::StartsWith("stage 0's B was not measured (the calibrated run had no "
                                      "B,I,W on it), and the plan runs 0B0 on rank 0"));
  // The CLI: a warning names them; simulate refuses (exit 2).
  std::ostringstream trace;
  write_trace_json(steady_trace(plan(pr), 3), trace);
  const std::string costs = temp_file("forward_costs.json", "");
  const CliResult cal = run_cli({"calibrate", temp_file("forward_trace.json", trace.str()), "-o",
                                 costs});
  CHECK(cal.exit_code == 0);
  CHECK(contains(cal.err, "stage 0: B,I,W not measured"));
  std::vector<std::string> args = {"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--stage-costs",
                                   costs};
  const CliResult sim = run_cli(args);
  CHECK(sim.exit_code == 2);
  CHECK(contains(sim.err, "stage 0's B was not measured"));
  args.push_back("--forward-only");
  CHECK(run_cli(args).exit_code == 0);
  // A malformed list is refused.
  CHECK_THROWS_WITH(read_stage_costs(R"({"stages": [], "unmeasured": {"0": "X"}})", "c.json"),
                    Catch::Contains("unmeasured must map stages"));
}

TEST_CASE("limits: a prefetch cap costs nothing by its size", "[limits]") {
  // Item 2: --prefetch N filled a 4N-byte table per rank (2^30: 4.1 GB).
  const std::vector<std::string> base = {"plan", "-s", "interleaved-1f1b", "-p", "4", "-m", "8",
                                         "-v",   "2"};
  auto with = [&](const std::string& cap) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--prefetch", cap});
    return run_cli_capped(args, 200);
  };
  const CliResult huge = with("1073741824"), some = with("1000");
  REQUIRE(huge.exit_code == 0);
  CHECK(huge.out == some.out);
  CHECK(with("1073741825").exit_code == 2);
}

TEST_CASE("limits: layer partitions and searches honour their size and time", "[limits]") {
  // Item 3: the partition was O(stages x layers^2): compare on 10k layers
  // took 109 s; search --time-limit 0.5 at p 2048 x m 2048 ran 68 s.
  const std::string layers = temp_file("layers10k.csv", layer_csv(10000));
  const CliResult compare = run_cli({"compare", "-p", "8", "-m", "16", "--layers", layers,
                                     "--schedules", "1f1b,interleaved-1f1b", "-f", "json"});
  CHECK(compare.exit_code == 0);
  CHECK(contains(compare.out, "\"partition\""));
  const CliResult brief =
      run_cli({"search", "-p", "2048", "-m", "2048", "--time-limit", "0.5", "--layers", layers});
  CHECK(brief.exit_code == 2);
  CHECK(contains(brief.err, "the time limit 0.5 s is too short for p 2048 and m 2048"));
  const CliResult quick = run_cli(
      {"search", "-p", "8", "-m", "16", "--time-limit", "1", "--layers", layers, "-f", "json"});
  CHECK(quick.exit_code == 0);
}

TEST_CASE("limits: the unit-cost timeline refuses what it cannot draw", "[limits]") {
  // Item 5: its output grew with p^2 (gpipe p 65536: ~52 GB); refused now
  // before any timing, and after it when the width is known.
  const CliResult wide =
      run_cli({"plan", "-s", "gpipe", "-p", "16384", "-m", "4", "-f", "timeline"});
  CHECK(wide.exit_code == 2);
  CHECK(wide.out.empty());
  CHECK(contains(wide.err, "the unit-cost timeline (plan -f timeline, show) would be at least"));
  const std::string file = temp_file("long.json", json_of(plan(Problem{"gpipe", 2, 40000})));
  const CliResult show = run_cli({"show", file});
  CHECK(show.exit_code == 2);
  CHECK(contains(show.err, "columns wide, more than the supported 100000"));
  std::ostringstream text;
  CHECK_THROWS_AS(write_timeline(plan(Problem{"gpipe", 2, 40000}), text), InputError);
  CHECK(text.str().empty());
  CHECK(run_cli({"plan", "-s", "1f1b", "-p", "4", "-m", "8", "-f", "timeline"}).exit_code == 0);
}

TEST_CASE("limits: pictures of a simulation are capped before simulating", "[limits]") {
  // Item 8: render --chrome-trace of 1f1b p 64 x m 65536 took 2.6 GB and
  // 53 s; an SVG with arrows of 2.3 GB.
  const std::string out = temp_file("big.svg", "");
  for (const char* flag : {"--svg", "--chrome-trace"}) {
    const CliResult r = run_cli({"render", "-s", "1f1b", "-p", "16", "-m", "40000",
                                 "--compute-only", flag, out, "--arrows"});
    INFO(flag);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err,
                   "a picture of 1280000 compute actions is more than the supported "
                   "1048576"));
  }
  const Plan big = plan_compute(Problem{"1f1b", 16, 40000});
  CHECK(picture_problem(big) != "");
  CHECK(picture_problem(plan(Problem{"1f1b", 4, 8})).empty());
}

TEST_CASE("limits: no silent wrong answers", "[limits]") {
  // Item 6. --layers on plan and lower is read (a missing file or a NaN is
  // an error) and lowers for the profile's stage sums, recording them.
  const CliResult missing =
      run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "4", "--layers", "/nonexistent/layers.csv"});
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.err, "cannot read '/nonexistent/layers.csv': no such file"));
  const std::string nan = temp_file("nan.csv", "name,F,B,W,activation\na,nan,1,0,1\nb,1,2,1,1\n");
  CHECK(run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "4", "--layers", nan}).exit_code == 2);
  const std::string gpt = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/gpt50.csv";
  const CliResult planned =
      run_cli({"plan", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "--layers", gpt});
  REQUIRE(planned.exit_code == 0);
  CHECK(contains(planned.out, "\"partition\": [13, 13, 13, 11]"));
  const std::string compute =
      temp_file("compute.json", json_of(plan_compute(Problem{"interleaved-1f1b", 2, 4})));
  const CliResult lowered = run_cli({"lower", compute, "--layers", gpt});
  REQUIRE(lowered.exit_code == 0);
  CHECK(contains(lowered.out, "\"partition\": [13, 13, 13, 11]"));
  CHECK(run_cli({"lower", compute, "--layers", nan}).exit_code == 2);
  // A CSV given an empty schedule name is refused, not written unreadable
  // (the CLI's one rule for empty values refuses it as it is read).
  const std::string csv = temp_file("plan.csv", "0F0,0B0\n1F0,1B0\n");
  const CliResult empty = run_cli({"convert", csv, "-s", "", "-f", "json"});
  CHECK(empty.exit_code == 2);
  CHECK(contains(empty.err, "--schedule: an empty value"));
  // An idle last rank survives JSON -> CSV -> JSON (the CSV reader inferred
  // one stage for two rows).
  Plan idle = plan_compute(Problem{"gpipe", 2, 1});
  idle.meta.schedule = "custom";  // what a CSV says
  idle.ranks[1].clear();
  const CliResult as_csv = run_cli({"convert", "-", "-f", "csv"}, json_of(idle));
  REQUIRE(as_csv.exit_code == 0);
  const CliResult back = run_cli({"convert", "-", "-f", "json"}, as_csv.out);
  REQUIRE(back.exit_code == 0);
  CHECK(back.out == json_of(idle));
  // simulate FILE --lower --compute-only asked for two opposite things.
  const CliResult both = run_cli({"simulate", compute, "--lower", "--compute-only"});
  CHECK(both.exit_code == 2);
  CHECK(contains(both.err, "give --lower or --compute-only, not both"));
}

TEST_CASE("limits: every numeric option is checked where it is parsed", "[limits]") {
  // Item 7: nan passed CLI11's PositiveNumber; train's --width 65536 and
  // --batch 1e12 ended in torch (exit 3); --timeout 1e308 overflowed its
  // milliseconds (exit 4); --dp 1073741824 printed -2147483648 ranks.
  const std::string dir = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers";
  const std::string svg = temp_file("n.svg", "");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"render", "-s", "1f1b", "-p", "2", "-m", "2", "--svg", svg, "--px-per-unit", "nan"},
       "--px-per-unit: nan is not a finite number"},
      {{"render", "-s", "1f1b", "-p", "2", "-m", "2", "--text", "--columns-per-unit", "nan"},
       "--columns-per-unit: nan is not a finite number"},
      {{"bench", "--search", dir, "--time-limit", "nan"}, "--time-limit: nan is not a finite"},
      {{"bench", "--search", dir, "--comm", "nan"}, "--comm: nan is not a finite number"},
      {{"search", "-p", "2", "-m", "2", "--layers", dir + "/tiny4.csv", "--time-limit", "inf"},
       "--time-limit: inf is not a finite number"},
      {{"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--bytes", "nan"},
       "--bytes: nan is not a finite number"},
      {{"train", "--lr", "nan"}, "--lr: nan is not a finite number"},
      {{"train", "--timeout", "1e308"}, "--timeout: 1e308 is more than the supported 1e+06"},
      {{"train", "--timeout", "inf"}, "--timeout: inf is not a finite number"},
      {{"train", "--width", "65536"}, "--width: 65536 is more than the supported 8192"},
      {{"train", "--batch", "1000000000000"},
       "--batch: 1000000000000 is more than the supported 1048576 samples"},
      {{"train", "--dp", "1073741824", "--nproc", "4"},
       "--dp: 1073741824 is more than the supported 65536 replicas"},
      {{"train", "--steps", "-1"}, "--steps: -1 is below the minimum 0"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult r = run_cli(args);
    INFO(args[0] << " " << args.back() << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, message));
  }
}

TEST_CASE("limits: quoted text is capped and control characters escaped", "[limits]") {
  // Item 9: user text was quoted whole (10 KB names) and ESC / CR in a
  // schedule name reached the terminal raw (a file could forge an "ok").
  Plan p = plan(Problem{"1f1b", 2, 2});
  p.meta.schedule = "\x1b[2J\rok: all fine";
  const std::string evil = temp_file("evil.json", json_of(p));
  const CliResult verify = run_cli({"verify", evil});
  CHECK(verify.exit_code == 0);
  CHECK(contains(verify.out, "ok: \\x1b[2J\\x0dok: all fine"));
  CHECK(!contains(verify.out, "\x1b"));
  const CliResult show = run_cli({"show", evil, "-s", "other"});
  CHECK(show.exit_code == 2);
  CHECK(contains(show.err, "which says schedule \\x1b[2J\\x0dok: all fine"));
  p.meta.schedule = std::string(10000, 'S');
  const CliResult long_name = run_cli({"verify", temp_file("long_name.json", json_of(p))});
  CHECK(long_name.out.size() < 300);
  CHECK(contains(long_name.out, "... (10000 bytes)"));
  const CliResult schedule = run_cli({"plan", "-s", std::string(10000, 'x'), "-p", "2", "-m", "2"});
  CHECK(schedule.exit_code == 2);
  CHECK(schedule.err.size() < 600);
  const CliResult cost = run_cli(
      {"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--cost", std::string(10000, 'F') + "=1"});
  CHECK(cost.exit_code == 2);
  CHECK(cost.err.size() < 600);
  const CliResult out = run_cli(
      {"plan", "-s", "1f1b", "-p", "2", "-m", "2", "-o", "/nonexistent/" + std::string(5000, 'o')});
  CHECK(out.exit_code == 2);
  CHECK(out.err.size() < 600);
  const std::string key = temp_file(
      "key.json", "{\"stages\": [{\"stage\": 0, \"" + std::string(10000, 'k') + "\": 1}]}");
  const CliResult costs =
      run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--stage-costs", key});
  CHECK(costs.exit_code == 2);
  CHECK(costs.err.size() < 600);
  // compare names why nothing ran when every schedule refuses the costs.
  const std::string huge =
      temp_file("huge.json",
                "{\"absolute\": true, \"calibrated_from\": {\"stages_per_rank\": 4}, \"stages\": ["
                "{\"stage\": 0, \"F\": 5e11, \"B\": 5e11, \"I\": 2.5e11, \"W\": 2.5e11}, "
                "{\"stage\": 1, \"F\": 5e11, \"B\": 5e11, \"I\": 2.5e11, \"W\": 2.5e11}]}");
  const CliResult none = run_cli(
      {"compare", "-p", "2", "-m", "4", "--stage-costs", huge, "--schedules", "1f1b,gpipe"});
  CHECK(none.exit_code == 2);
  CHECK(contains(none.err, "no schedule ran: "));
  CHECK(contains(none.err, "is more than the supported 1e+12 time units"));
  CHECK(!contains(none.err, "no schedule accepts"));
}
