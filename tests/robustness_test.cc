// Hostile input, run as a user would: every case exits 2 (bad input) or 1
// (a plan that cannot run) with a message naming the problem, in bounded time
// and memory; never 3, never a crash. One TEST_CASE per defect class.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/cell_text.h"
#include "ir/numbers.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using pipeplan::test::CliResult;
using pipeplan::test::run_cli;
using pipeplan::test::run_cli_capped;
using pipeplan::test::temp_file;
using namespace pipeplan;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string json_plan(int pp, int v, long long m, const std::string& ranks,
                      const std::string& mapping = "loop", bool compute_only = true) {
  return "{\"format\": \"pipeplan.plan\", \"version\": 1, \"schedule\": \"custom\", "
         "\"pp_degree\": " +
         std::to_string(pp) + ", \"num_microbatches\": " + std::to_string(m) +
         ", \"stages_per_rank\": " + std::to_string(v) + ", \"stage_to_rank\": \"" + mapping +
         "\", \"compute_only\": " + (compute_only ? "true" : "false") + ", \"ranks\": [" + ranks +
         "]}";
}

}  // namespace

TEST_CASE("robustness: CSV numbers beyond the limits are located errors, not overflows",
          "[robustness]") {
  // Defect 1: max + 1 overflowed int (exit 3 "out of memory", or m = INT_MIN).
  const std::string mb = temp_file("big_mb.csv", "0B2147483647\n");
  for (const char* cmd : {"verify", "show"}) {
    auto r = run_cli({cmd, mb});
    INFO(cmd << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(
        contains(r.err, mb + ":1:3: unknown action '0B2147483647': microbatch number 2147483647 is "
                             "larger than the supported 1048575"));
  }
  auto conv = run_cli({"convert", mb, "-f", "json"});
  CHECK(conv.exit_code == 2);
  CHECK(conv.out.empty());
  const std::string stage = temp_file("big_stage.csv", "2147483647F9\n");
  for (const char* cmd : {"verify", "show", "convert"}) {
    std::vector<std::string> args{cmd, stage};
    if (std::string(cmd) == "convert") args.insert(args.end(), {"-f", "json"});
    auto r = run_cli(args);
    INFO(cmd << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, stage + ":1:1: unknown action '2147483647F9': stage number 2147483647 is "
                                  "larger than the supported 1048575"));
  }
  // Numbers in range on their own, but a shape past the shared limits.
  const std::string stages = temp_file("many_stages.csv", "0F0,1048575F1048575\n");
  auto v = run_cli({"verify", stages});
  CHECK(v.exit_code == 2);
  CHECK(contains(v.err, stages + ":1:5: stages_per_rank 1048576 is more than the supported 4096"));
  const std::string shape = temp_file("big_shape.csv", "0F0,4095F2000\n");
  auto s = run_cli({"verify", shape});
  CHECK(s.exit_code == 2);
  CHECK(contains(s.err, shape + ":1:5: stages x microbatches = 4096 x 2001 = 8196096 is more than "
                                "the supported 4194304"));
  // -m beyond the limit, given to a CSV reader directly (library callers).
  pipeplan::CsvReadOptions options;
  options.num_microbatches = 0;
  CHECK_THROWS_WITH(pipeplan::parse_csv_plan("0F0\n", "x.csv", options),
                    Catch::Contains("the microbatch count 0 is outside the supported 1..1048576"));
}

TEST_CASE("robustness: a tiny plan declaring a huge shape costs memory by its actions",
          "[robustness]") {
  // Defect 2: 282 bytes, pp 2, v 4096, m 2^20: refused by the shape limit.
  const std::string huge =
      temp_file("huge_shape.json", json_plan(2, 4096, 1 << 20,
                                             "{\"rank\": 0, \"actions\": [\"0F0\"]}, "
                                             "{\"rank\": 1, \"actions\": [\"1F0\"]}"));
  for (const char* cmd : {"verify", "simulate", "lower", "render", "show", "convert"}) {
    std::vector<std::string> args{cmd, huge};
    if (std::string(cmd) == "render") args.push_back("--text");
    if (std::string(cmd) == "convert") args.insert(args.end(), {"-f", "csv"});
    auto r = run_cli(args);
    INFO(cmd << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err,
                   "stages x microbatches = 8192 x 1048576 = 8589934592 is more than the "
                   "supported 4194304"));
  }
  // At the limit (4096 stages x 1024 microbatches) with two actions: the
  // verifier's index follows the actions, so 200 MiB of address space do.
  const std::string at_limit =
      temp_file("at_limit.json", json_plan(2, 2048, 1024,
                                           "{\"rank\": 0, \"actions\": [\"0F0\"]}, "
                                           "{\"rank\": 1, \"actions\": [\"1F0\"]}"));
  for (const char* cmd : {"verify", "simulate", "lower"}) {
    auto r = run_cli_capped({cmd, at_limit}, 200);
    INFO(cmd << ": " << r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(contains(r.out + r.err, "stage 0 microbatch 0 has no backward"));
  }
}

TEST_CASE("robustness: a cross-rank cycle is exit 1 in every command that judges a plan",
          "[robustness]") {
  // Defect 3: verify said 2 (an input error), lower said 1.
  const std::string cycle = temp_file("cycle.csv", "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
  auto v = run_cli({"verify", cycle});
  CHECK(v.exit_code == 1);
  CHECK(contains(v.out, "FAILED under rendezvous transport: 1 problem(s)"));
  CHECK(contains(
      v.out,
      "error[compute-cycle]: the compute order cannot complete (cyclic wait across ranks): "
      "rank 0 waits at 0B0 (index 1) for the backward of stage 1 microbatch 0; rank 1 "
      "waits at 1F1 (index 0) for 0F1"));
  auto j = run_cli({"verify", cycle, "-f", "json", "--model", "all"});
  CHECK(j.exit_code == 1);
  CHECK(contains(j.out, "\"code\": \"compute-cycle\""));
  auto l = run_cli({"lower", cycle});
  CHECK(l.exit_code == 1);
  CHECK(contains(l.err, "cyclic wait across ranks"));
  for (const std::vector<std::string>& args : {std::vector<std::string>{"simulate", cycle},
                                               {"simulate", cycle, "--lower"},
                                               {"render", cycle, "--text"}}) {
    auto r = run_cli(args);
    INFO(args[0] << " " << r.err);
    CHECK(r.exit_code == 1);
  }
}

TEST_CASE("robustness: every command reading a file says 'cannot read' for a directory",
          "[robustness]") {
  // Defect 4: "basic_filebuf::underflow" with exit 3.
  const std::string plan = temp_file("ok.csv", "0F0,0B0\n");
  const std::vector<std::vector<std::string>> commands = {
      {"verify", "/tmp"},
      {"lower", "/tmp"},
      {"convert", "/tmp", "-f", "json"},
      {"show", "/tmp"},
      {"simulate", "/tmp"},
      {"render", "/tmp", "--text"},
      {"simulate", plan, "--stage-costs", "/tmp"},
      {"plan", "-s", "zbv", "-p", "2", "-m", "4", "--stage-costs", "/tmp"},
      {"lower", plan, "--stage-costs", "/tmp"},
      {"compare", "-p", "2", "-m", "4", "--stage-costs", "/tmp"},
      {"export", "megatron", "/tmp", "--layers", plan},
      {"render", "--trace", "/tmp", "--text"}};
  for (const auto& args : commands) {
    auto r = run_cli(args);
    INFO(args[0] << " " << args[1] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "pipeplan: error: cannot read '/tmp': it is a directory"));
  }
  // calibrate takes folders of torch traces: one without any is named.
  const std::string empty = temp_file("empty_dir_marker.txt", "");
  const std::string dir = empty.substr(0, empty.rfind('/')) + "/no_traces_here";
  std::filesystem::create_directories(dir);
  run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "-o", dir + "/p.csv"});
  auto none = run_cli({"calibrate", dir});
  INFO(none.err);
  CHECK(none.exit_code == 2);
  CHECK(contains(none.err, "no_traces_here: no .json trace under this folder"));
  auto missing = run_cli({"verify", "/nonexistent/x.json"});
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.err, "cannot read '/nonexistent/x.json': no such file"));
}

TEST_CASE("robustness: render scales are bounded", "[robustness]") {
  // Defect 5: --columns-per-unit 1e9 ran out of memory, --px-per-unit 1e300
  // wrote a 3.3e+301 px wide SVG.
  // The option's own range is checked where it is parsed...
  auto huge = run_cli(
      {"render", "-s", "1f1b", "-p", "2", "-m", "2", "--text", "--columns-per-unit", "1e9"});
  CHECK(huge.exit_code == 2);
  CHECK(contains(huge.err, "--columns-per-unit: 1e9 is more than the supported 1e+05"));
  // ... and the width once the makespan is known.
  auto text = run_cli(
      {"render", "-s", "1f1b", "-p", "2", "-m", "2", "--text", "--columns-per-unit", "100000"});
  CHECK(text.exit_code == 2);
  CHECK(contains(text.err,
                 "pipeplan: error: a text timeline at 1e+05 columns per time unit would be "
                 "9e+05 columns wide, more than the supported 100000"));
  auto cols =
      run_cli({"render", "-s", "1f1b", "-p", "2", "-m", "2", "--text", "--columns", "2000000000"});
  CHECK(cols.exit_code == 2);
  CHECK(contains(cols.err, "more than the supported 100000"));
  const std::string svg = temp_file("wide.svg", "");
  auto px300 = run_cli(
      {"render", "-s", "1f1b", "-p", "2", "-m", "2", "--svg", svg, "--px-per-unit", "1e300"});
  CHECK(px300.exit_code == 2);
  CHECK(contains(px300.err, "--px-per-unit: 1e300 is more than the supported 1e+07"));
  auto px =
      run_cli({"render", "-s", "1f1b", "-p", "2", "-m", "2", "--svg", svg, "--px-per-unit", "1e7"});
  CHECK(px.exit_code == 2);
  CHECK(contains(px.err,
                 "pipeplan: error: an SVG timeline at 1e+07 px per time unit would be "
                 "9.00001e+07 px wide, more than the supported 1e+07"));
  // Issue 25: nan passed CLI11's PositiveNumber and drew with a nan scale.
  for (const char* option : {"--px-per-unit", "--columns-per-unit", "--columns"})
    for (const char* bad : {"nan", "inf", "-1", "0"}) {
      auto r = run_cli({"render", "-s", "1f1b", "-p", "2", "-m", "2", "--svg", svg, option, bad});
      CHECK(r.exit_code == 2);
      CHECK(r.out.empty());
    }
  auto ok =
      run_cli({"render", "-s", "1f1b", "-p", "2", "-m", "2", "--text", "--columns-per-unit", "4"});
  CHECK(ok.exit_code == 0);
}

TEST_CASE("robustness: simulate refuses costs that overflow, never ok with inf/nan",
          "[robustness]") {
  // Defect 6: makespan inf, bubble -nan, "ok": true with "makespan": null.
  auto cost = run_cli(
      {"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--cost", "F=1e308,B=1e308", "-f", "json"});
  CHECK(cost.exit_code == 2);
  CHECK(cost.out.empty());
  CHECK(contains(cost.err, "cost F 1e+308 is more than the supported 1e+12 time units"));
  const std::string scales = temp_file("scales.csv", "0,1e308\n");
  auto scale = run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--stage-costs", scales});
  CHECK(scale.exit_code == 2);
  CHECK(contains(scale.err,
                 "stage 0 scaled cost F 1e+308 is more than the supported 1e+12 time units"));
  auto comm = run_cli(
      {"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--comm", "0,1e-320", "--bytes", "1e18"});
  CHECK(comm.exit_code == 2);
  CHECK(contains(comm.err,
                 "transfer time (latency + bytes / bandwidth) inf is more than the supported"));
  // Lowering plans with the same costs, under the same bounds (both modes).
  const std::string compute = temp_file("compute.csv", "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  for (const char* mode : {"latency-hiding", "seed"}) {
    auto lowered = run_cli({"lower", compute, "--lowering", mode, "--comm", "1e300"});
    INFO(mode << ": " << lowered.err);
    CHECK(lowered.exit_code == 2);
    CHECK(contains(lowered.err, "comm latency 1e+300 is more than the supported 1e+12 time units"));
    CHECK(lowered.err.size() < 300);
  }
  auto planned = run_cli({"plan", "-s", "zbv", "-p", "2", "-m", "4", "--cost", "F=1e308,B=1e308"});
  CHECK(planned.exit_code == 2);
  CHECK(contains(planned.err, "cost F 1e+308 is more than the supported 1e+12 time units"));
  auto fine = run_cli(
      {"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--cost", "F=1e12,B=1e12", "-f", "json"});
  CHECK(fine.exit_code == 0);
  CHECK(contains(fine.out, "\"ok\": true"));
  CHECK(!contains(fine.out, "\"makespan\": null"));
}

TEST_CASE("robustness: planner, readers and verifier share one set of limits", "[robustness]") {
  // Defect 7: plan wrote pp 65537 files verify refused; -p 20000000 ran 52 s
  // and 10 GB before exit 3; compare -p 512 -m 20000 took 116 s and 8 GB.
  auto wide = run_cli({"plan", "-s", "gpipe", "-p", "65537", "-m", "1", "-f", "json"});
  CHECK(wide.exit_code == 2);
  CHECK(contains(wide.err, "--pp: 65537 is more than the supported 65536 ranks"));
  auto huge = run_cli({"plan", "-s", "gpipe", "-p", "20000000", "-m", "1"});
  CHECK(huge.exit_code == 2);
  CHECK(contains(huge.err, "--pp: 20000000 is more than the supported 65536 ranks"));
  auto cmp = run_cli({"compare", "-p", "512", "-m", "20000"});
  CHECK(cmp.exit_code == 2);
  CHECK(contains(
      cmp.err,
      "stages x microbatches = 512 x 20000 = 10240000 is more than the supported 4194304"));
  // The largest planned shape reads back: what plan writes, verify accepts.
  auto edge =
      run_cli({"plan", "-s", "gpipe", "-p", "65536", "-m", "1", "--compute-only", "-f", "json"});
  REQUIRE(edge.exit_code == 0);
  CHECK(run_cli({"verify", "-"}, edge.out).exit_code == 0);
  auto json = run_cli({"verify", "-"}, json_plan(65537, 1, 1, "{\"rank\": 0, \"actions\": []}"));
  CHECK(json.exit_code == 2);
  CHECK(contains(json.err, "pp_degree: 65537 is larger than the supported 65536"));
  // Plans built in code meet the same limits in the verifier.
  pipeplan::Plan p;
  p.meta.pp_degree = 1;
  p.meta.num_microbatches = 1 << 20;
  p.meta.stages_per_rank = 8;
  p.rank_ids = {0};
  p.ranks = {{}};
  CHECK_THROWS_WITH(pipeplan::verify(p),
                    Catch::Contains("verify: stages x microbatches = 8 x 1048576"));
}

TEST_CASE("robustness: JSON -> CSV -> JSON is exact when the last rank has no actions",
          "[robustness]") {
  // Defect 8: pp 2 became 1, v 2 became 4, mapping v became loop.
  const std::string in =
      json_plan(2, 2, 1,
                "{\"rank\": 0, \"actions\": [\"0F0\", \"3F0\", \"3B0\", \"0B0\"]}, "
                "{\"rank\": 1, \"actions\": []}",
                "v");
  auto first = run_cli({"convert", "-", "-f", "json"}, in);
  REQUIRE(first.exit_code == 0);
  auto csv = run_cli({"convert", "-", "-f", "csv"}, first.out);
  REQUIRE(csv.exit_code == 0);
  CHECK(csv.out == "0F0,3F0,3B0,0B0\n\"\"\n");
  auto back = run_cli({"convert", "-", "-f", "json"}, csv.out);
  REQUIRE(back.exit_code == 0);
  CHECK(back.out == first.out);
  auto again = run_cli({"convert", "-", "-f", "csv"}, back.out);
  CHECK(again.out == csv.out);
}

TEST_CASE("robustness: the JSON reader refuses duplicate keys", "[robustness]") {
  // Defect 9: the last one won.
  std::string doc = json_plan(1, 1, 1, "{\"rank\": 0, \"actions\": [\"0F0\", \"0B0\"]}");
  auto top = run_cli({"verify", "-"}, doc.substr(0, doc.size() - 1) + ", \"pp_degree\": 1}");
  CHECK(top.exit_code == 2);
  CHECK(contains(top.err, "<stdin>: duplicate key 'pp_degree'"));
  auto entry =
      run_cli({"verify", "-"},
              json_plan(1, 1, 1, "{\"rank\": 0, \"actions\": [\"0F0\"], \"actions\": [\"0B0\"]}"));
  CHECK(entry.exit_code == 2);
  CHECK(contains(entry.err, "<stdin>: ranks[0]: duplicate key 'actions'"));
  CHECK(run_cli({"verify", "-"}, doc).exit_code == 0);
}

TEST_CASE("robustness: messages name the problem", "[robustness]") {
  // Defect 10. An integer too large for 64 bits is still an integer.
  auto big = run_cli({"verify", "-"},
                     "{\"format\": \"pipeplan.plan\", \"version\": 1, \"schedule\": \"custom\", "
                     "\"pp_degree\": 100000000000000000000000000000, \"num_microbatches\": 1, "
                     "\"stages_per_rank\": 1, \"stage_to_rank\": \"loop\", \"compute_only\": true, "
                     "\"ranks\": [{\"rank\": 0, \"actions\": []}]}");
  CHECK(big.exit_code == 2);
  CHECK(contains(big.err,
                 "pp_degree: 100000000000000000000000000000 is larger than the supported 65536"));
  CHECK(!contains(big.err, "fractional"));
  // An unknown flag is named, before any missing required option.
  auto flag = run_cli({"plan", "--bogus-flag"});
  CHECK(flag.exit_code == 2);
  CHECK(contains(flag.err, "pipeplan: error: unknown option '--bogus-flag' for 'plan'"));
  CHECK(!contains(flag.err, "required"));
  auto typo = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "--compute-onyl"});
  CHECK(typo.exit_code == 2);
  CHECK(contains(typo.err,
                 "unknown option '--compute-onyl' for 'plan' (did you mean '--compute-only'?)"));
  // A bad option value reads like every other error and points at the help.
  auto value = run_cli({"plan", "-s", "1f1b", "-p", "x", "-m", "2"});
  CHECK(value.exit_code == 2);
  CHECK(value.err == "pipeplan: error: --pp: 'x' is not an integer; see 'pipeplan plan --help'\n");
  auto over = run_cli({"plan", "-s", "gpipe", "-p", "65537", "-m", "1"});
  CHECK(over.exit_code == 2);
  CHECK(contains(over.err, "pipeplan: error: --pp: 65537 is more than the supported 65536 ranks"));
  auto command = run_cli({"plam"});
  CHECK(command.exit_code == 2);
  CHECK(contains(command.err, "pipeplan: error: unknown command 'plam' (did you mean 'plan'?)"));
  // What an error quotes is capped: a 3 MB cell is not repeated.
  const std::string cell(3 << 20, 'X');
  auto long_value = run_cli({"plan", "-s", "1f1b", "-p", std::string(100000, 'X'), "-m", "2"});
  CHECK(long_value.exit_code == 2);
  CHECK(long_value.err.size() < 600);
  auto huge = run_cli({"verify", temp_file("huge_cell.csv", "0F0," + cell + "\n")});
  CHECK(huge.exit_code == 2);
  CHECK(huge.err.size() < 600);
  CHECK(contains(huge.err, "(3145728 bytes)"));
  auto huge_json = run_cli({"verify", "-"},
                           json_plan(1, 1, 1, "{\"rank\": 0, \"actions\": [\"" + cell + "\"]}"));
  CHECK(huge_json.exit_code == 2);
  CHECK(huge_json.err.size() < 600);
  // One rule for -v: a given value is a count, at least 1 (omit it for the default).
  for (const char* v : {"0", "-1"}) {
    auto r = run_cli({"plan", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", v});
    INFO(v);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err,
                   "pipeplan: error: interleaved-1f1b: stages_per_rank must be positive, got " +
                       std::string(v) + "; pass -v 1 or more"));
  }
  auto v_big = run_cli({"plan", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", "5000"});
  CHECK(v_big.exit_code == 2);
  CHECK(contains(v_big.err, "5000 is more than the supported 4096"));
  // Counts on the command line: too large is named as such, not "could not convert".
  auto p_big = run_cli({"plan", "-s", "1f1b", "-p", "99999999999", "-m", "2"});
  CHECK(p_big.exit_code == 2);
  CHECK(contains(p_big.err, "--pp: 99999999999 is more than the supported 65536 ranks"));
  // Global flags are accepted after the command too.
  auto quiet = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "-f", "text", "-q"});
  CHECK(quiet.exit_code == 0);
  CHECK(contains(quiet.out, "rank 0: 0F0"));
  auto verbose = run_cli({"verify", "--verbose", "-"},
                         json_plan(1, 1, 1, "{\"rank\": 0, \"actions\": [\"0F0\", \"0B0\"]}"));
  CHECK(verbose.exit_code == 0);
}

TEST_CASE("robustness: a hostile trace is an input error, in memory that follows its records",
          "[robustness]") {
  // A measured trace (calibrate, render --trace) read by the same rules as a
  // plan: duplicate keys refused, numbers bounded, quoted text capped, and a
  // step number far beyond the records costs nothing.
  const pipeplan::Plan p = pipeplan::plan(pipeplan::Problem{"1f1b", 2, 2});
  std::ostringstream plan_json;
  pipeplan::write_json(p, plan_json);
  auto trace = [&](const std::string& records, const std::string& extra = "") {
    return "{\"format\": \"pipeplan.trace\", \"version\": 1, " + extra +
           "\"plan\": " + plan_json.str() + ", \"records\": [" + records + "]}";
  };
  const std::string far =
      temp_file("far.json", trace("[1073741824, 0, 0, \"0F0\", 0, 1, 0, 0, 0]"));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"calibrate", far}, {"render", "--trace", far, "--text"}}) {
    auto r = run_cli_capped(args, 300);
    INFO(args[0] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "step 1 has no record of rank 0 index 0 (0F0)"));
  }
  auto dup = run_cli(
      {"calibrate", temp_file("dup.json", trace("", "\"source\": \"a\", \"source\": \"b\", "))});
  CHECK(dup.exit_code == 2);
  CHECK(contains(dup.err, "duplicate key 'source'"));
  auto huge = run_cli(
      {"calibrate", temp_file("huge.json", trace("[1, 0, 0, \"0F0\", -1e308, 1e308, 0, 0, 0]"))});
  CHECK(huge.exit_code == 2);
  CHECK(contains(huge.err, "records[0]: start must be a number of ms within +-1e15"));
  auto index = run_cli(
      {"calibrate", temp_file("index.json", trace("[1, 0, 4294967296, \"0F0\", 0, 1, 0, 0, 0]"))});
  CHECK(index.exit_code == 2);
  CHECK(contains(index.err, "records[0]: index must be an integer in 0..33554432"));
  const std::string name(1 << 20, 'Q');
  auto action = run_cli(
      {"calibrate", temp_file("action.json", trace("[1, 0, 0, \"" + name + "\", 0, 1, 0, 0, 0]"))});
  CHECK(action.exit_code == 2);
  CHECK(contains(action.err, "(1048576 bytes)"));
  CHECK(action.err.size() < 600);
}

// Hardening 3 (issue 39). The complexity cases are sized so that the old
// quadratic code took minutes and the linear code is instant: ctest's
// timeout is the bound, no test measures time.

TEST_CASE("robustness: a stage set costs time linear in its text", "[robustness]") {
  // Finding 1: each "0-1048575" part was expanded and the whole set sorted
  // again (2,000 repeats > 60 s); ranges are now merged before expanding.
  std::string text;
  for (int k = 0; k < 20000; ++k) text += "0-1048575,";
  text += "7";
  const StageSet set = parse_stage_set(text, "--recompute");
  CHECK(set.stages.size() == static_cast<std::size_t>(limits::kMaxStages));
  CHECK(to_string(set) == "0-1048575");
  CHECK(parse_stage_set("9,3-5,4,0-1,4-6", "x").stages == std::vector<int>{0, 1, 3, 4, 5, 6, 9});
  // Beyond the limit: refused as the range is read, before it is expanded.
  CHECK_THROWS_WITH(parse_stage_set(text + ",5-1048576", "--offload"),
                    Catch::Contains("stage 1048576 is beyond the supported 1048576 stages"));
  // Through the CLI: a stage beyond the plan is refused, named, at once.
  std::string arg;
  for (int k = 0; k < 2000; ++k) arg += (k ? "," : "") + std::string("0-1048575");
  for (const char* cmd : {"plan", "simulate"}) {
    for (const char* flag : {"--recompute", "--offload"}) {
      const CliResult r = run_cli({cmd, "-s", "1f1b", "-p", "4", "-m", "8", flag, arg});
      INFO(cmd << " " << flag << ": " << r.err);
      CHECK(r.exit_code == 2);
      CHECK(contains(r.err, "policy names stage 4, but the plan has 4 stages (0..3)"));
    }
  }
}

TEST_CASE("robustness: one large BATCH_P2P group is checked in near-linear time",
          "[robustness]") {
  // Finding 2: each member was compared with every earlier one (40,000
  // members 5-8 s); half a million now take a hash lookup each.
  constexpr int kMembers = 1 << 19;
  std::string cell = "(";
  std::vector<Action> list;
  for (int k = 0; k < kMembers; ++k) {
    cell += (k ? ";0SEND_F" : "0SEND_F") + std::to_string(k);
    list.push_back(Action(ActionType::SendF, 0, k, -1, -1, k + 1 < kMembers));
  }
  std::vector<Action> out;
  io::CellError error;
  CHECK(io::parse_cell(cell + ")BATCH_P2P", out, error));
  CHECK(out.size() == static_cast<std::size_t>(kMembers));
  std::string why;
  CHECK(first_bad_group(list, &why) == -1);
  // The same messages as before, at the first repeated member.
  out.clear();
  CHECK_FALSE(io::parse_cell(cell + ";0SEND_F7;0SEND_F8)BATCH_P2P", out, error));
  CHECK(out.empty());
  CHECK(contains(error.message, "0SEND_F7 is twice in the group"));
  list.back().batch_next = true;
  list.push_back(make(ActionType::SendF, 0, 9));
  CHECK(first_bad_group(list, &why) == kMembers);
  CHECK(why == "0SEND_F9 is twice in one BATCH_P2P group");
}

TEST_CASE("robustness: messages escape control bytes as \\xNN in hex", "[robustness]") {
  // Finding 8: the action parser quoted the raw byte ("got '<ESC>'") and
  // the Megatron layout reader wrote ESC as \x27 (decimal).
  const auto clean = [](const CliResult& r) {
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "got '\\x1b'"));
    CHECK(!contains(r.err, "\x1b"));
  };
  clean(run_cli({"verify", temp_file("esc.csv", "0F0,\x1b[2J\n")}));
  clean(run_cli({"verify", temp_file("esc_group.csv", "(0SEND_F0;0SEND_F\x1b)BATCH_P2P\n"), "-m",
                 "1"}));
  clean(run_cli({"verify", temp_file("esc.json", json_plan(1, 1, 1,
                                                           "{\"rank\": 0, \"actions\": "
                                                           "[\"0F\\u001b\"]}"))}));
  CHECK_THROWS_WITH(expand_megatron_layout("E|t\x1bL"),
                    Catch::Contains("invalid layer character '\\x1b'"));
  CHECK(limits::excerpt("a\x1b\x7f\n") == "a\\x1b\\x7f\\x0a");
}

TEST_CASE("robustness: tiny values keep their significant digits in reports", "[robustness]") {
  // Finding 9: values below the report's decimals read as 0 ("host
  // bandwidth 0", which the JSON uses for infinite; "budget 0").
  CHECK(detail::format_number(1e-11) == "1e-11");
  CHECK(detail::format_number(1e-300, 4) == "1e-300");
  CHECK(detail::format_number(-1.23456789e-9) == "-1.23457e-09");
  CHECK(detail::format_number(0.0) == "0");
  CHECK(detail::format_number(-0.0) == "0");
  CHECK(detail::format_number(2.25) == "2.25");
  CHECK(detail::format_number(1.0 / 3.0) == "0.333333");
  const CliResult host = run_cli(
      {"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--offload", "0", "--host-bw", "1e-11"});
  INFO(host.err);
  CHECK(contains(host.out, "host bandwidth 1e-11"));
  const CliResult comm =
      run_cli({"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--comm", "1e-11,1e-11"});
  CHECK(contains(comm.out, "latency 1e-11"));
  const CliResult budget = run_cli({"search", "-p", "2", "-m", "2", "--layers",
                                    temp_file("tiny.csv", "name,F,B,W,activation\na,1,2,1,1\n"
                                                          "b,1,2,1,1\n"),
                                    "--memory-limit", "1e-300"});
  CHECK(budget.exit_code == 2);
  CHECK(contains(budget.err, "memory budget 1e-300 per rank"));
}

TEST_CASE("robustness: an empty value is an error for every option", "[robustness]") {
  // Finding 10: '' was read as if the option were absent (exit 0).
  const std::vector<std::vector<std::string>> cases = {
      {"plan", "-s", "1f1b", "-p", "4", "-m", "8", "--recompute", ""},
      {"plan", "-s", "1f1b", "-p", "4", "-m", "8", "--offload", ""},
      {"simulate", "-s", "1f1b", "-p", "4", "-m", "8", "--host-bw", ""},
      {"search", "-p", "4", "-m", "8", "--layout", ""},
      {"train", "-s", "1f1b", "-p", "2", "-m", "2", "--recompute", ""},
      {"train", "-s", "1f1b", "-p", "2", "-m", "2", "--offload", ""},
      {"plan", "-s", "", "-p", "4", "-m", "8"},
  };
  for (const auto& args : cases) {
    const CliResult r = run_cli(args);
    INFO(args[0] << " " << args[args.size() - 2] << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, ": an empty value; give one or leave the option out"));
  }
  const CliResult named = run_cli({"search", "-p", "4", "-m", "8", "--layout", ""});
  CHECK(contains(named.err, "--layout: an empty value"));
  // "--recompute=" gives no value at all: CLI11 asks for one.
  const CliResult bare = run_cli({"simulate", "-s", "1f1b", "-p", "4", "-m", "8", "--recompute="});
  CHECK(bare.exit_code == 2);
  CHECK(contains(bare.err, "--recompute: 1 required"));
}

TEST_CASE("robustness: a lowering option where nothing is lowered is refused, naming both",
          "[robustness]") {
  // One exclusive-flag rule: the flag and what makes it inert, in one line.
  auto both = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "--batch-p2p", "--compute-only"});
  CHECK(both.exit_code == 2);
  CHECK(contains(both.err, "give --batch-p2p or --compute-only, not both (the compute order holds "
                           "no SEND/RECV for it to place)"));
  auto sim = run_cli(
      {"simulate", "-s", "1f1b", "-p", "2", "-m", "2", "--lowering", "seed", "--compute-only"});
  CHECK(sim.exit_code == 2);
  CHECK(contains(sim.err, "give --lowering or --compute-only, not both"));
  const std::string lowered =
      temp_file("lowered.json", run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2"}).out);
  const std::string compute = temp_file(
      "compute.json", run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "--compute-only"}).out);
  for (const std::string& flag : {"--batch-p2p", "--serial-safe"}) {
    auto r = run_cli({"simulate", lowered, flag});
    INFO(flag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, flag + " shapes a lowering, and a plan FILE is simulated as it is: give "
                                 "--lower too"));
  }
  auto exact = run_cli({"simulate", lowered, "--lowering", "exact"});
  CHECK(exact.exit_code == 2);
  CHECK(contains(exact.err, "--lowering shapes a lowering"));
  auto held = run_cli({"simulate", lowered, "--lower", "--batch-p2p"});
  CHECK(held.exit_code == 2);
  CHECK(contains(held.err, "already holds its SEND/RECV: --batch-p2p has nothing to lower"));
  // Where the flag does its work it is taken.
  CHECK(run_cli({"simulate", compute, "--lower", "--batch-p2p"}).exit_code == 0);
  CHECK(run_cli({"simulate", lowered}).exit_code == 0);
}

TEST_CASE("robustness: train refuses a memory policy on a forward-only run, as plan does",
          "[robustness]") {
  // The rule runs before the executor in every build (this one has no LibTorch).
  const std::string why =
      "a forward-only plan keeps no activations for a backward: nothing to recompute or offload";
  auto train = run_cli({"train", "--forward-only", "--recompute", "all"});
  CHECK(train.exit_code == 2);
  CHECK(contains(train.err, why));
  auto plan =
      run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "--forward-only", "--recompute", "all"});
  CHECK(plan.exit_code == 2);
  CHECK(contains(plan.err, why));
}

TEST_CASE("robustness: export torchtitan writes both files or neither, and only a training plan",
          "[robustness][torchtitan]") {
  namespace fs = std::filesystem;
  const std::string layers = temp_file(
      "tt_layers.csv",
      "name,F,B,W,activation\ntok_embeddings,1,2,1,1\nlayers.0,1,2,1,1\nlayers.1,1,2,1,1\n"
      "norm,1,2,1,1\nlm_head,1,2,1,1\n");
  const std::string training =
      temp_file("tt_train.json", run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2"}).out);
  const fs::path dir = fs::temp_directory_path() / ("pipeplan_tt_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "torchtitan.args");  // a folder where the config goes
  std::ofstream(dir / "schedule.csv") << "old\n";
  auto partial = run_cli({"export", "torchtitan", training, "--layers", layers, "-o", dir.string()});
  CHECK(partial.exit_code == 2);
  CHECK(contains(partial.err, "torchtitan.args': it exists and is not a file (nothing written)"));
  std::ifstream kept(dir / "schedule.csv");
  std::string line;
  std::getline(kept, line);
  CHECK(line == "old");
  for (const auto& entry : fs::directory_iterator(dir))
    CHECK(entry.path().filename().string().find("pipeplan-tmp") == std::string::npos);
  fs::remove(dir / "torchtitan.args");
  auto ok = run_cli({"export", "torchtitan", training, "--layers", layers, "-o", dir.string()});
  CHECK(ok.exit_code == 0);
  CHECK(fs::exists(dir / "torchtitan.args"));
  // A forward-only plan: torch's runtime would refuse it at startup.
  const std::string forward = temp_file(
      "tt_forward.json",
      run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "--forward-only"}).out);
  const fs::path fdir = dir / "forward";
  auto fwd = run_cli({"export", "torchtitan", forward, "--layers", layers, "-o", fdir.string()});
  CHECK(fwd.exit_code == 2);
  CHECK(contains(fwd.err, "torchtitan trains, and the plan is forward-only"));
  CHECK(!fs::exists(fdir));
  fs::remove_all(dir);
}
