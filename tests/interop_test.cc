// Interop with torch.distributed.pipelining and CI use: torch's own CSV dumps
// (tests/interop/torch_*.csv, written by torch 2.11 through
// tests/interop/gen_torch_csv.py), hand-written torch-style files, the
// lower/convert/verify commands, exit codes and JSON diagnostics.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::actions;
using pipeplan::test::read_source_file;
using pipeplan::test::run_cli;
using pipeplan::test::temp_file;

namespace {

const std::string kInterop = std::string(PIPEPLAN_TEST_DIR) + "/interop/";
const std::string kErrors = std::string(PIPEPLAN_TEST_DIR) + "/errors/";

struct TorchCase {
  std::string schedule;
  int p, m, v;
  StageMapping mapping;
  std::string file(const std::string& format) const {
    return "torch_" + schedule + "_p" + std::to_string(p) + "_m" + std::to_string(m) + "_v" +
           std::to_string(v) + "." + format + ".csv";
  }
};

// The multi-stage schedules torch dumped in both formats.
const std::vector<TorchCase> kTorchCases = {
    {"interleaved-1f1b", 2, 4, 2, StageMapping::Loop},
    {"interleaved-1f1b", 4, 8, 2, StageMapping::Loop},
    {"looped-bfs", 2, 4, 2, StageMapping::Loop},
    {"interleaved-zb", 2, 4, 2, StageMapping::Loop},
    {"interleaved-zb", 4, 8, 2, StageMapping::Loop},
    {"zbv", 2, 4, 2, StageMapping::V},
    {"zbv", 4, 8, 2, StageMapping::V},
    {"dualpipev", 2, 4, 2, StageMapping::V},
    {"dualpipev", 4, 8, 2, StageMapping::V},
};

Plan read_interop(const std::string& name, const CsvReadOptions& options = {}) {
  return parse_plan(read_source_file("tests/interop/" + name), name, options);
}

// The cells of a CSV file exactly as written, blanks dropped.
std::vector<std::vector<std::string>> raw_cells(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> row;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ','))
      if (!cell.empty()) row.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

Plan without_passthrough(Plan p) {
  for (auto& list : p.ranks)
    list.erase(std::remove_if(list.begin(), list.end(),
                              [](const Action& a) { return is_passthrough(a.type); }),
               list.end());
  return p;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("interop: torch's compute-only dumps read with inferred shape and mapping", "[interop]") {
  for (const auto& c : kTorchCases) {
    const std::string name = c.file("compute_only");
    INFO(name);
    Plan p = read_interop(name);
    CHECK(p.meta == PlanMeta{"custom", c.p, c.m, c.v, c.mapping});
    CHECK(p.is_whole());
    CHECK(p.is_compute_only());
    // Every non-blank cell, in order, is one action (blank cells are idle slots).
    auto cells = raw_cells(read_source_file("tests/interop/" + name));
    REQUIRE(cells.size() == p.ranks.size());
    for (std::size_t r = 0; r < cells.size(); ++r) {
      REQUIRE(cells[r].size() == p.ranks[r].size());
      for (std::size_t i = 0; i < cells[r].size(); ++i)
        CHECK(to_string(p.ranks[r][i]) == cells[r][i]);
    }
  }
  // One blank-celled example pinned exactly.
  Plan i = read_interop("torch_interleaved-1f1b_p2_m4_v2.compute_only.csv");
  CHECK(i.ranks[1] == actions("1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3"));
}

TEST_CASE("interop: pipeplan's compute orders equal torch 2.11's dumps", "[interop]") {
  for (const auto& c : kTorchCases) {
    INFO(c.file("compute_only"));
    Problem pr;
    pr.schedule = c.schedule;
    pr.pp_degree = c.p;
    pr.num_microbatches = c.m;
    pr.stages_per_rank = c.v;
    Plan ours = plan_compute(pr);
    Plan theirs = without_passthrough(read_interop(c.file("compute_only")));
    CHECK(ours.ranks == theirs.ranks);
    CHECK(ours.meta.mapping == theirs.meta.mapping);
  }
}

TEST_CASE("interop: torch's compute_comms dumps verify as written", "[interop]") {
  for (const auto& c : kTorchCases) {
    const std::string name = c.file("compute_comms");
    INFO(name);
    Plan p = read_interop(name);
    CHECK(p.meta == PlanMeta{"custom", c.p, c.m, c.v, c.mapping});
    CHECK_FALSE(p.is_compute_only());
    // UNSHARD/RESHARD/REDUCE_GRAD cells are kept, in place.
    CHECK(to_string(p.ranks[0].front()) == "0UNSHARD");
    CHECK(p.ranks[0].back().type == ActionType::Reshard);
    for (Transport t : {Transport::Rendezvous, Transport::Eager}) {
      VerifyResult res = verify(p, {t});
      INFO(format_diagnostics(res.diagnostics));
      CHECK(res.ok());
    }
  }
}

TEST_CASE("interop: torch's compute-only dumps lower and verify", "[interop]") {
  for (const auto& c : kTorchCases) {
    const std::string name = c.file("compute_only");
    INFO(name);
    Plan p = read_interop(name);
    REQUIRE(check_structure(p).empty());
    Plan lowered = lower(p);
    VerifyResult res = verify(lowered, {Transport::Rendezvous});
    INFO(format_diagnostics(res.diagnostics));
    CHECK(res.ok());
    auto r = run_cli({"verify", kInterop + name});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("is deadlock-free under rendezvous transport") != std::string::npos);
  }
}

TEST_CASE("interop: torch's 1F1B dump has an out-of-range microbatch", "[interop]") {
  // torch 2.11's Schedule1F1B order starts the last rank at F1 and ends at F8
  // (schedules.md). Told m=8, the reader keeps 3F8 and verify reports it.
  CsvReadOptions m8;
  m8.num_microbatches = 8;
  Plan p = read_interop("torch_1f1b_p4_m8_v1.compute_only.csv", m8);
  CHECK(p.meta == PlanMeta{"custom", 4, 8, 1, StageMapping::Loop});
  CHECK(to_string(p.ranks[3].front()) == "3F1");
  const std::string json = temp_file("torch_1f1b.json", "");
  auto conv = run_cli(
      {"convert", kInterop + "torch_1f1b_p4_m8_v1.compute_only.csv", "-m", "8", "-o", json});
  REQUIRE(conv.exit_code == 0);
  auto r = run_cli({"verify", json});
  CHECK(r.exit_code == 1);
  CHECK(r.out ==
        "FAILED under rendezvous transport: 1 problem(s)\n"
        "error[microbatch-out-of-range] rank 3 index 14 (3F8): rank 3 index 14: 3F8 names "
        "microbatch 8, but the plan has 8 microbatches (0..7)\n");
  // Without -m the microbatch count grows to 9 and microbatch 8 is missing elsewhere.
  Plan grown = read_interop("torch_1f1b_p4_m8_v1.compute_only.csv");
  CHECK(grown.meta.num_microbatches == 9);
  CHECK_FALSE(check_structure(grown).empty());
}

TEST_CASE("interop: hand-written torch-style CSVs lower to deadlock-free plans", "[interop]") {
  // ZB-H1-like, p=2 m=2, with idle cells and CRLF, written by hand.
  Plan zb = read_interop("handwritten_zb-h1_p2_m2.csv");
  CHECK(zb.meta == PlanMeta{"custom", 2, 2, 1, StageMapping::Loop});
  CHECK(zb.ranks[0] == actions("0F0 0F1 0I0 0W0 0I1 0W1"));
  auto r = run_cli({"lower", kInterop + "handwritten_zb-h1_p2_m2.csv"});
  REQUIRE(r.exit_code == 0);
  // Receives posted as early as the pair order allows, sends right after
  // their producers; both ends post each pair's transfers in one order
  // (0-1: F0, F1, B0, B1, as lower.h promises).
  CHECK(r.out ==
        "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0RECV_B1,0I0,0W0,0I1,0W1\n"
        "1RECV_F0,1RECV_F1,1F0,1I0,1SEND_B0,1F1,1I1,1SEND_B1,1W0,1W1\n");
  // The seed lowering posts each receive right before its consumer.
  auto rs = run_cli({"lower", kInterop + "handwritten_zb-h1_p2_m2.csv", "--lowering", "seed"});
  REQUIRE(rs.exit_code == 0);
  CHECK(rs.out ==
        "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0I0,0W0,0RECV_B1,0I1,0W1\n"
        "1RECV_F0,1F0,1I0,1SEND_B0,1RECV_F1,1F1,1I1,1SEND_B1,1W0,1W1\n");
  Plan lowered = parse_csv_plan(r.out, "lowered.csv");
  for (Transport t : {Transport::Rendezvous, Transport::Eager}) CHECK(verify(lowered, {t}).ok());

  // Interleaved, v=2, spaces around cells.
  Plan il = read_interop("handwritten_interleaved_p2_m2_v2.csv");
  CHECK(il.meta == PlanMeta{"custom", 2, 2, 2, StageMapping::Loop});
  CHECK(il.ranks[0] == actions("0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1"));
  auto ri =
      run_cli({"verify", kInterop + "handwritten_interleaved_p2_m2_v2.csv", "--model", "all"});
  CHECK(ri.exit_code == 0);
}

TEST_CASE("interop: lower reproduces pipeplan plan for known schedules", "[interop]") {
  for (const std::string s : {"gpipe", "1f1b"}) {
    INFO(s);
    auto compute = run_cli({"plan", "-s", s, "-p", "4", "-m", "8", "--compute-only", "-f", "csv"});
    REQUIRE(compute.exit_code == 0);
    auto lowered = run_cli({"lower", "-", "-s", s}, compute.out);
    REQUIRE(lowered.exit_code == 0);
    auto direct = run_cli({"plan", "-s", s, "-p", "4", "-m", "8", "-f", "csv"});
    CHECK(lowered.out == direct.out);
    // JSON in, JSON out (the input's format), same plan.
    auto cj = run_cli({"plan", "-s", s, "-p", "4", "-m", "8", "--compute-only"});
    auto lj = run_cli({"lower", "-"}, cj.out);
    REQUIRE(lj.exit_code == 0);
    CHECK(lj.out == run_cli({"plan", "-s", s, "-p", "4", "-m", "8"}).out);
  }
}

TEST_CASE("interop: lower --reduce-grad adds torch's REDUCE_GRAD after each last backward",
          "[interop]") {
  auto r =
      run_cli({"lower", kInterop + "handwritten_zb-h1_p2_m2.csv", "--reduce-grad", "-f", "text"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out ==
        "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0RECV_B1 0I0 0W0 0I1 0W1 0REDUCE_GRAD\n"
        "rank 1: 1RECV_F0 1RECV_F1 1F0 1I0 1SEND_B0 1F1 1I1 1SEND_B1 1W0 1W1 1REDUCE_GRAD\n");
  // The library pass: counted per stage over B, W and the B of a group; an
  // existing REDUCE_GRAD is kept and not duplicated.
  Plan p;
  p.meta = PlanMeta{"custom", 1, 2, 2, StageMapping::V};
  p.rank_ids = {0};
  p.ranks = {actions("0F0 1F0 (0F1;1B0)OVERLAP_F_B 1F1 1B1 0B0 0I1 0W1 1REDUCE_GRAD")};
  CHECK(add_reduce_grad(p).ranks[0] ==
        actions("0F0 1F0 (0F1;1B0)OVERLAP_F_B 1F1 1B1 0B0 0I1 0W1 0REDUCE_GRAD 1REDUCE_GRAD"));
  // After the sends that follow the last backward.
  Plan q;
  q.meta = PlanMeta{"custom", 2, 1, 1, StageMapping::Loop};
  q.rank_ids = {0, 1};
  q.ranks = {actions("0F0 0SEND_F0 0RECV_B0 0B0"), actions("1RECV_F0 1F0 1B0 1SEND_B0")};
  CHECK(add_reduce_grad(q).ranks ==
        std::vector<std::vector<Action>>{actions("0F0 0SEND_F0 0RECV_B0 0B0 0REDUCE_GRAD"),
                                         actions("1RECV_F0 1F0 1B0 1SEND_B0 1REDUCE_GRAD")});
}

TEST_CASE("interop: lower keeps torch's pass-through cells in place", "[interop]") {
  // torch's GPipe dump ends each row with <stage>REDUCE_GRAD; lowering keeps
  // it last (after the final send) and --reduce-grad does not add another.
  const std::string gpipe = kInterop + "torch_gpipe_p4_m8_v1.compute_only.csv";
  for (const bool again : {false, true}) {
    std::vector<std::string> args = {"lower", gpipe, "-f", "text"};
    if (again) args.push_back("--reduce-grad");
    auto r = run_cli(args);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("1B7 1SEND_B7 1REDUCE_GRAD\nrank 2:") != std::string::npos);
    CHECK(r.out.find("REDUCE_GRAD 1REDUCE_GRAD") == std::string::npos);
    std::size_t count = 0;
    for (std::size_t at = 0; (at = r.out.find("REDUCE_GRAD", at)) != std::string::npos; ++at)
      ++count;
    CHECK(count == 4);
  }
}

TEST_CASE("interop: lower refuses plans it cannot lower", "[interop]") {
  auto missing = run_cli({"lower", kInterop + "missing_mb_gpipe_p2_m3.csv"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.out.empty());
  CHECK(missing.err == "cannot lower " + kInterop +
                           "missing_mb_gpipe_p2_m3.csv: its compute order has 2 problem(s)\n"
                           "error[missing-forward] rank 1 (1F1): stage 1 microbatch 1 has no "
                           "forward (expected 1F1 on rank 1)\n"
                           "error[missing-backward] rank 1 (1B1): stage 1 microbatch 1 has no "
                           "backward (expected 1B1, or "
                           "1I1 and 1W1, on rank 1)\n");

  auto comms = run_cli({"lower", kInterop + "moved_recv_1f1b_p2_m2.csv"});
  CHECK(comms.exit_code == 2);
  CHECK(comms.err ==
        "pipeplan: error: " + kInterop +
            "moved_recv_1f1b_p2_m2.csv already has communication (rank 0 action 1 is "
            "0SEND_F0); lower takes a compute-only plan, 'pipeplan verify' checks this "
            "one as written\n");

  auto one = run_cli({"plan", "-s", "1f1b", "-p", "4", "-m", "8", "-r", "1", "--compute-only"});
  auto partial = run_cli({"lower", "-"}, one.out);
  CHECK(partial.exit_code == 2);
  CHECK(partial.err ==
        "pipeplan: error: lower needs every rank of the plan; <stdin> holds 1 of 4 ranks\n");
}

TEST_CASE("interop: a missing microbatch fails verify with exit 1", "[interop]") {
  auto r = run_cli({"verify", kInterop + "missing_mb_gpipe_p2_m3.csv", "-f", "json"});
  CHECK(r.exit_code == 1);
  auto doc = nlohmann::json::parse(r.out);
  CHECK(doc["ok"] == false);
  const auto& d = doc["models"][0]["diagnostics"][0];
  CHECK(d["code"] == "missing-forward");
  CHECK(d["rank"] == 1);
  CHECK(d["action"] == "1F1");
  CHECK(d["message"] == "stage 1 microbatch 1 has no forward (expected 1F1 on rank 1)");
}

TEST_CASE("interop: receives moved next to their consumers hang under rendezvous", "[interop]") {
  // 1F1B p=2 m=2 with 1RECV_F1 right before 1F1 (after 1SEND_B0): at pair
  // position 1 rank 0 sends F1 while rank 1 sends B0.
  const std::string small = kInterop + "moved_recv_1f1b_p2_m2.csv";
  auto r = run_cli({"verify", small});
  CHECK(r.exit_code == 1);
  CHECK(r.out.rfind(
            "FAILED under rendezvous transport: 4 problem(s)\n"
            "error[fifo-both-send] rank 0 index 3 (0SEND_F1): pair 0-1 position 1: rank 0 "
            "posts 0SEND_F1 while rank 1 posts 1SEND_B0 (both send; NCCL pair stream hangs)\n",
            0) == 0);
  CHECK(run_cli({"verify", small, "--model", "eager"}).exit_code == 0);

  // torch's own interleaved compute_comms dump with 3RECV_F1 moved from
  // before 3B0 to right before 3F1: position 5 of pair 0-1 becomes
  // 2SEND_F1 against 3SEND_B0, and rank 1's receives from rank 0 change
  // order, so rank 0's fourth send (2SEND_F1) meets rank 1's fourth receive
  // (1RECV_F2): corruption under every model, eager included.
  const std::string big = kInterop + "moved_recv_interleaved-1f1b_p2_m4_v2.csv";
  auto j = run_cli({"verify", big, "-f", "json"});
  CHECK(j.exit_code == 1);
  auto doc = nlohmann::json::parse(j.out);
  const auto& diags = doc["models"][0]["diagnostics"];
  REQUIRE(diags.size() >= 2);
  CHECK(diags[0] == nlohmann::json::parse(R"J({"code": "fifo-both-send", "rank": 0, "index": 11,
    "action": "2SEND_F1", "message": "pair 0-1 position 5: rank 0 posts 2SEND_F1 while rank 1 posts 3SEND_B0 (both send; NCCL pair stream hangs)"})J"));
  CHECK(diags[1]["code"] == "fifo-corruption");
  CHECK(diags[1]["rank"] == 1);
  CHECK(diags[1]["index"] == 12);
  CHECK(diags[1]["action"] == "1RECV_F2");
  const auto eager = run_cli({"verify", big, "--model", "eager"});
  CHECK(eager.exit_code == 1);
  CHECK(eager.out.find("error[fifo-corruption] rank 1 index 12 (1RECV_F2): send 3 from rank 0 "
                       "to rank 1: rank 0 sends 2SEND_F1 (Forward(2, 1))") != std::string::npos);
}

TEST_CASE("interop: convert round-trips exactly", "[interop]") {
  for (const auto& c : kTorchCases)
    for (const std::string format : {"compute_only", "compute_comms"}) {
      const std::string src = kInterop + c.file(format);
      INFO(src);
      const std::string json = temp_file("rt.json", ""), csv = temp_file("rt.csv", ""),
                        json2 = temp_file("rt2.json", "");
      REQUIRE(run_cli({"convert", src, "-o", json}).exit_code == 0);  // -f from the extension
      REQUIRE(run_cli({"convert", json, "-f", "csv", "-o", csv}).exit_code == 0);
      REQUIRE(run_cli({"convert", csv, "-f", "json", "-o", json2}).exit_code == 0);
      CHECK(slurp(json) == slurp(json2));
      // The CSV equals torch's file with idle cells dropped and LF line ends.
      std::string expected;
      for (const auto& row : raw_cells(read_source_file("tests/interop/" + c.file(format)))) {
        for (std::size_t i = 0; i < row.size(); ++i) expected += (i ? "," : "") + row[i];
        expected += "\n";
      }
      CHECK(slurp(csv) == expected);
    }
  // JSON -> CSV -> JSON keeps a named schedule when told its name back.
  auto j = run_cli({"plan", "-s", "zbv", "-p", "2", "-m", "4"});
  auto c = run_cli({"convert", "-", "-f", "csv"}, j.out);
  auto back = run_cli({"convert", "-", "-f", "json", "-s", "zbv"}, c.out);
  CHECK(back.out == j.out);
  auto text = run_cli({"convert", "-", "-f", "text"}, j.out);
  CHECK(text.out.rfind("rank 0: 0F0 0SEND_F0 0F1", 0) == 0);
}

TEST_CASE("interop: convert and the CSV options refuse contradictions", "[interop]") {
  auto j = run_cli({"plan", "-s", "zbv", "-p", "2", "-m", "4"});
  auto clash = run_cli({"convert", "-", "-f", "csv", "--mapping", "loop"}, j.out);
  CHECK(clash.exit_code == 2);
  CHECK(clash.err ==
        "pipeplan: error: --mapping loop contradicts <stdin>, which says stage_to_rank v\n");
  auto m = run_cli({"convert", "-", "-f", "csv", "-m", "5"}, j.out);
  CHECK(m.err ==
        "pipeplan: error: --microbatches 5 contradicts <stdin>, which says num_microbatches 4\n");

  auto no_format = run_cli({"convert", "-"}, j.out);
  CHECK(no_format.exit_code == 2);
  CHECK(no_format.err ==
        "pipeplan: error: convert: say which format to write with -f json|csv|torch-csv|text\n");

  // A single rank cannot become a CSV; no output file is left behind.
  auto one = run_cli({"plan", "-s", "1f1b", "-p", "4", "-m", "8", "-r", "2"});
  const std::string out = temp_file("never.csv", "");
  std::filesystem::remove(out);
  auto partial = run_cli({"convert", "-", "-o", out}, one.out);
  CHECK(partial.exit_code == 2);
  CHECK(partial.err ==
        "pipeplan: error: CSV holds every rank of a plan (one row each); this plan holds 1 of 4 "
        "ranks: write it as json or text\n");
  CHECK_FALSE(std::filesystem::exists(out));

  // --mapping decides for CSV input, and a wrong one names both ranks.
  auto v = run_cli({"convert", kInterop + "torch_zbv_p2_m4_v2.compute_only.csv", "-f", "json",
                    "--mapping", "loop"});
  CHECK(v.exit_code == 2);
  CHECK(v.err == "pipeplan: error: " + kInterop +
                     "torch_zbv_p2_m4_v2.compute_only.csv:2:6: rank 1 runs stage 2 (2F0), but "
                     "stage_to_rank loop places stage 2 on rank 0\n");
}

TEST_CASE("interop: malformed inputs exit 2 with a located message", "[interop]") {
  // tests/errors/NAME.{csv,json} with the expected message in NAME.err
  // ("FILE" stands for the path given on the command line).
  std::size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kErrors)) {
    const std::string path = entry.path().string();
    const std::string ext = entry.path().extension().string();
    if (ext != ".csv" && ext != ".json") continue;
    std::string expected =
        slurp(std::filesystem::path(entry.path()).replace_extension(".err").string());
    for (std::size_t at; (at = expected.find("FILE")) != std::string::npos;)
      expected.replace(at, 4, path);
    INFO(path);
    for (const std::string cmd : {"verify", "convert", "lower", "show"}) {
      std::vector<std::string> args = {cmd, path};
      if (cmd == "convert") args = {cmd, path, "-f", "json"};
      auto r = run_cli(args);
      CHECK(r.exit_code == 2);
      CHECK(r.out.empty());
      CHECK(r.err == "pipeplan: error: " + expected);
    }
    ++checked;
  }
  CHECK(checked == 17);
}
