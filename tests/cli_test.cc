// The CLI, run as a user would: exit codes, messages, formats.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeplan/error.h"
#include "test_util.h"

using pipeplan::test::run_cli;
using pipeplan::test::temp_file;

TEST_CASE("cli: no arguments plans, verifies and shows 1f1b pp=4 m=8", "[cli]") {
  auto r = run_cli({});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("rank 0") != std::string::npos);
  CHECK(r.out.find("rank 3") != std::string::npos);
}

TEST_CASE("cli: plan writes text, csv and json", "[cli]") {
  auto t = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "-f", "text"});
  REQUIRE(t.exit_code == 0);
  CHECK(t.out ==
        "rank 0: 0F0 0SEND_F0 0F1 0RECV_B0 0SEND_F1 0B0 0RECV_B1 0B1\n"
        "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n");
  auto c = run_cli({"plan", "-s", "gpipe", "-p", "2", "-m", "2", "-f", "csv", "--compute-only"});
  REQUIRE(c.exit_code == 0);
  CHECK(c.out == "0F0,0F1,0B1,0B0\n1F0,1F1,1B1,1B0\n");
  auto j = run_cli({"plan", "-s", "gpipe", "-p", "2", "-m", "2"});
  REQUIRE(j.exit_code == 0);
  CHECK(j.out.find("\"format\": \"pipeplan.plan\"") != std::string::npos);
}

TEST_CASE("cli: -f torch-csv on plan, convert and lower writes torch's dialect", "[cli]") {
  // torch 2.15's runtime retires each send at its WAIT_SEND_F/B (src/emit/plan_csv.cc).
  const std::string rows =
      "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1\r\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1WAIT_SEND_B0,1WAIT_SEND_B1\r\n";
  auto p = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "-f", "torch-csv"});
  REQUIRE(p.exit_code == 0);
  CHECK(p.out == rows);
  const std::string csv = temp_file("torch_csv_in.csv", "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  auto c = run_cli({"convert", csv, "-f", "torch-csv"});
  REQUIRE(c.exit_code == 0);
  CHECK(c.out == "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n");
  auto l = run_cli({"lower", csv, "-s", "1f1b", "-f", "torch-csv"});
  REQUIRE(l.exit_code == 0);
  CHECK(l.out == rows);
  // A plan with a batched P2P group is refused (exit 2), naming the cell.
  const std::string grouped =
      temp_file("torch_csv_groups.csv",
                "0F0,0SEND_F0,0F1,(0SEND_F1;0RECV_B0)BATCH_P2P,0B0,0RECV_B1,0B1\n"
                "1RECV_F0,1F0,1B0,(1SEND_B0;1RECV_F1)BATCH_P2P,1F1,1B1,1SEND_B1\n");
  auto g = run_cli({"convert", grouped, "-f", "torch-csv"});
  CHECK(g.exit_code == 2);
  CHECK(g.out.empty());
  CHECK(g.err.find("torch-csv: rank 0 index 3: (0SEND_F1;0RECV_B0)BATCH_P2P is a batched P2P "
                   "group, which torch's _load_csv cannot read") != std::string::npos);
  // So is a plan with memory actions (pipeplan's own; torch has none).
  const std::string memory =
      temp_file("torch_csv_memory.csv", "0F0,0F1,0RECOMPUTE0,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  REQUIRE(run_cli({"convert", memory, "-f", "csv"}).exit_code == 0);
  auto mem = run_cli({"convert", memory, "-f", "torch-csv"});
  CHECK(mem.exit_code == 2);
  CHECK(mem.out.empty());
  CHECK(mem.err.find("torch-csv: torch's CSV dialect has no memory actions, and the plan holds "
                     "0RECOMPUTE0 (rank 0 index 2)") != std::string::npos);
}

TEST_CASE("cli: --torch-version writes, refuses and proves for that torch release", "[cli]") {
  // torch 2.11 has no WAIT_* tokens (they arrive in 2.15.0, schedules.py
  // _ComputationType): the rows of torch-csv without them.
  // `pipeplan plan -s 1f1b -p 2 -m 2 -f torch-csv [--torch-version V]`
  auto plan_1f1b = [](const std::string& version) {
    std::vector<std::string> args = {"plan", "-s", "1f1b", "-p", "2", "-m", "2", "-f", "torch-csv"};
    if (!version.empty()) args.insert(args.end(), {"--torch-version", version});
    return run_cli(args);
  };
  auto p = plan_1f1b("2.11");
  REQUIRE(p.exit_code == 0);
  CHECK(p.out ==
        "0F0,0SEND_F0,0F1,0RECV_B0,0SEND_F1,0B0,0RECV_B1,0B1\r\n"
        "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\r\n");
  CHECK(plan_1f1b("2.15.0").out == plan_1f1b("").out);
  // REDUCE_GRAD is in torch from 2.10.0 (schedules.py _ComputationType).
  const std::string csv = temp_file("torch_version_in.csv", "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  const std::string out = temp_file("torch_version_out.csv", "");
  std::remove(out.c_str());
  auto r = run_cli({"lower", csv, "-s", "1f1b", "--reduce-grad", "-f", "torch-csv",
                    "--torch-version", "2.9", "-o", out});
  CHECK(r.exit_code == 2);
  CHECK(r.err ==
        "pipeplan: error: torch-csv: torch 2.9's runtime has no REDUCE_GRAD, and the plan holds "
        "0REDUCE_GRAD (rank 0 index 8); torch has REDUCE_GRAD from 2.10 on\n");
  CHECK_FALSE(std::ifstream(out).good());  // never a partial file
  CHECK(run_cli({"lower", csv, "-s", "1f1b", "--reduce-grad", "-f", "torch-csv", "--torch-version",
                 "2.10"})
            .exit_code == 0);
  // torch <= 2.11 posts every SEND/RECV as one batch_isend_irecv (_batch_p2p):
  // one stream per rank, `serial`; this lowering prefetches from two peers
  // and deadlocks there (pipeplan verify --model serial names the same chain).
  // `plan` lowers it serial-safe for 2.11 instead (the runtime 'torch-2.11').
  const std::string safe = temp_file("torch_version_safe.csv", "");
  auto d = run_cli({"plan", "-s", "interleaved-1f1b", "-p", "3", "-m", "1", "-v", "2", "--comm",
                    "0.5", "-f", "torch-csv", "--torch-version", "2.11", "-o", safe});
  CHECK(d.exit_code == 0);
  CHECK(d.err.find("lowered serial-safe: the schedule's own lowering is not deadlock-free under "
                   "runtime 'torch-2.11'") != std::string::npos);
  CHECK(run_cli({"verify", safe, "--runtime", "torch-2.11"}).exit_code == 0);
  const std::string lowered = temp_file("torch_version_serial.csv", "");
  REQUIRE(run_cli({"plan", "-s", "interleaved-1f1b", "-p", "3", "-m", "1", "-v", "2", "--comm",
                   "0.5", "-f", "csv", "-o", lowered})
              .exit_code == 0);
  // Written as it is, for 2.11, it is refused with the chain.
  auto c = run_cli({"convert", lowered, "-f", "torch-csv", "--torch-version", "2.11", "-o", out});
  CHECK(c.exit_code == 1);
  CHECK(c.err.rfind("pipeplan: error: torch 2.11's runtime ('torch-2.11') posts P2P as the serial "
                    "transport model, under which this plan is not deadlock-free:\n"
                    "error[stuck] rank 0 index 3 (3F0): rank 0 is stuck at index 3 (3F0): it "
                    "needs 3RECV_F0, but rank 2 has not posted its 2SEND_F0 (pair 0-2 position "
                    "0) yet\n",
                    0) == 0);
  CHECK(c.err.find("error[deadlock]: deadlock under serial transport: 3 of 3 ranks cannot finish "
                   "(0, 1, 2); waiting chain: rank 0 (at 3F0) -> rank 2 (at 2F0) -> rank 1 (at "
                   "1F0) -> rank 2 (at 2F0) [cycle]") != std::string::npos);
  CHECK_FALSE(std::ifstream(out).good());
  auto v = run_cli({"verify", lowered, "--model", "serial"});
  CHECK(v.exit_code == 1);
  CHECK(v.out.find("waiting chain: rank 0 (at 3F0) -> rank 2 (at 2F0) -> rank 1 (at 1F0) -> "
                   "rank 2 (at 2F0) [cycle]") != std::string::npos);
  // From 2.12 _batch_p2p posts plain isend/irecv: rendezvous, and it runs.
  auto ok = run_cli({"convert", lowered, "-f", "torch-csv", "--torch-version", "2.12"});
  CHECK(ok.exit_code == 0);
  CHECK(run_cli({"convert", lowered, "-f", "torch-csv", "--torch-version", "2.11"}).exit_code == 1);
  // Bad text, old releases, and a version for a format that is not torch's.
  auto bad = plan_1f1b("2.x");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err ==
        "pipeplan: error: torch version '2.x' is not MAJOR.MINOR[.PATCH] (e.g. 2.11 or "
        "2.15.0)\n");
  auto old = run_cli({"convert", csv, "-f", "torch-csv", "--torch-version", "2.5.1"});
  CHECK(old.exit_code == 2);
  CHECK(old.err.find("torch 2.5 is older than the oldest runtime pipeplan writes for (2.6)") !=
        std::string::npos);
  auto json = run_cli({"convert", csv, "-f", "json", "--torch-version", "2.11"});
  CHECK(json.exit_code == 2);
  CHECK(json.err ==
        "pipeplan: error: --torch-version 2.11: only -f torch-csv is written for a torch release "
        "(this writes json)\n");
  // A split backward: torch checks torch.compile'd stages only in its ZB
  // schedule classes, never for a CSV it loads (pytorch#143599, #161904).
  auto zb = run_cli({"plan", "-s", "zb-h1", "-p", "2", "-m", "2", "-f", "torch-csv"});
  CHECK(zb.exit_code == 0);
  CHECK(zb.err.find("warning: the plan splits backward (I/W), which torch.compile'd stages do "
                    "not support; torch 2.15 does not check it for a schedule loaded with "
                    "_load_csv") != std::string::npos);
  CHECK(p.err.empty());
}

TEST_CASE("cli: plan --rank emits one rank", "[cli]") {
  auto r = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "-r", "1", "-f", "text"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n");
  auto bad = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "-r", "2"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--rank 2 is out of range for pp_degree 2 (valid: 0..1)") !=
        std::string::npos);
}

TEST_CASE("cli: plan output round-trips through verify (json and csv, file and stdin)", "[cli]") {
  for (const char* fmt : {"json", "csv"}) {
    auto p = run_cli({"plan", "-s", "1f1b", "-p", "4", "-m", "8", "-f", fmt});
    REQUIRE(p.exit_code == 0);
    std::string path = temp_file(std::string("plan.") + fmt, p.out);
    auto v = run_cli({"verify", path, "--model", "all"});
    INFO(v.out << v.err);
    CHECK(v.exit_code == 0);
    CHECK(v.out.find("is deadlock-free under rendezvous transport") != std::string::npos);
    CHECK(v.out.find("is deadlock-free under serial transport") != std::string::npos);
    auto s = run_cli({"verify", "-"}, p.out);
    CHECK(s.exit_code == 0);
  }
}

TEST_CASE("cli: every schedule's default plan verifies under --model all", "[cli]") {
  // --serial-safe's help: library schedules' default plans already run under
  // the serial model (interleaved-1f1b p=4 m=4 v=2 used to deadlock there;
  // m = 8 as dualpipev needs 2p).
  for (const char* s : {"interleaved-1f1b", "looped-bfs", "interleaved-zb", "vpp-fthenb", "zbv",
                        "dualpipev", "zb-h2", "gpipe"}) {
    auto p = run_cli({"plan", "-s", s, "-p", "4", "-m", "8", "-f", "json"});
    INFO(s << "\n" << p.err);
    REQUIRE(p.exit_code == 0);
    auto v = run_cli({"verify", temp_file(std::string(s) + ".json", p.out), "--model", "all"});
    INFO(v.out << v.err);
    CHECK(v.exit_code == 0);
    CHECK(v.out.find("is deadlock-free under serial transport") != std::string::npos);
  }
  // With stated costs the pairs' orders are searched for them, and serial
  // safety is the flag's.
  auto p = run_cli({"plan", "-s", "interleaved-1f1b", "-p", "4", "-m", "4", "-v", "2", "--comm",
                    "1", "--serial-safe", "-f", "json"});
  REQUIRE(p.exit_code == 0);
  CHECK(run_cli({"verify", temp_file("stated.json", p.out), "--model", "serial"}).exit_code == 0);
}

TEST_CASE("cli: verify exits 1 with named diagnostics on a hanging plan", "[cli]") {
  // Sends right after forwards: pair 0-1 position 1 has two sends.
  std::string csv =
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";
  std::string path = temp_file("hang.csv", csv);
  auto r = run_cli({"verify", path});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find(
            "pair 0-1 position 1: rank 0 posts 0SEND_F1 while rank 1 posts 1SEND_B0 (both send; "
            "NCCL pair stream hangs)") != std::string::npos);
  auto e = run_cli({"verify", path, "--model", "eager"});
  CHECK(e.exit_code == 0);
  auto j = run_cli({"verify", path, "-f", "json"});
  CHECK(j.exit_code == 1);
  CHECK(j.out.find("\"code\": \"fifo-both-send\"") != std::string::npos);
}

TEST_CASE("cli: bad input exits 2 with a clear message", "[cli]") {
  auto unknown = run_cli({"plan", "-s", "1f1c", "-p", "2", "-m", "2"});
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err.find("unknown schedule '1f1c' (did you mean '1f1b'?)") != std::string::npos);
  auto shape = run_cli({"plan", "-s", "1f1b", "-p", "4", "-m", "2"});
  CHECK(shape.exit_code == 2);
  CHECK(shape.err.find("1f1b: needs at least pp_degree=4 microbatches, got 2") !=
        std::string::npos);
  auto cmd = run_cli({"plam"});
  CHECK(cmd.exit_code == 2);
  CHECK(cmd.err.find("unknown command 'plam' (did you mean 'plan'?)") != std::string::npos);
  auto missing = run_cli({"verify", "/nonexistent/plan.json"});
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("cannot read '/nonexistent/plan.json': no such file") !=
        std::string::npos);
  auto bad_action = run_cli({"verify", temp_file("bad.csv", "0F0,0BW0\n")});
  CHECK(bad_action.exit_code == 2);
  CHECK(bad_action.err.find("0BW0") != std::string::npos);
  auto bad_json = run_cli({"verify", "-"}, "{\"format\": \"pipeplan.plan\", ");
  CHECK(bad_json.exit_code == 2);
  auto usage = run_cli({"plan", "-p", "2"});
  CHECK(usage.exit_code == 2);
}

TEST_CASE("cli: exit_code maps each error to its documented code", "[cli]") {
  using namespace pipeplan;
  CHECK(exit_code(PlanRejected("x", {})) == 1);
  CHECK(exit_code(InputError("x")) == 2);
  CHECK(exit_code(ShapeError("x", "pass {m}")) == 2);
  CHECK(exit_code(InternalError("x")) == 3);
  CHECK(exit_code(CommError("x")) == 4);
  CHECK(exit_code(std::runtime_error("x")) == 3);
  CHECK(exit_code(std::bad_alloc()) == 3);
  CHECK((kExitOk == 0 && kExitInvalid == 1 && kExitUsage == 2 && kExitInternal == 3 &&
         kExitPeer == 4));
}

TEST_CASE("cli: list shows every schedule with constraints; version and help", "[cli]") {
  auto l = run_cli({"list"});
  REQUIRE(l.exit_code == 0);
  CHECK(l.out.find("1f1b\n  aliases:     1F1B, Schedule1F1B") != std::string::npos);
  CHECK(l.out.find("constraints: v = 1; m >= p") != std::string::npos);
  auto v = run_cli({"--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out.find("pipeplan 0.1.0") != std::string::npos);
  auto h = run_cli({"--help"});
  CHECK(h.exit_code == 0);
  CHECK(h.out.find("verify") != std::string::npos);
}

TEST_CASE("cli: show prints a timeline of a plan file", "[cli]") {
  auto p = run_cli({"plan", "-s", "gpipe", "-p", "2", "-m", "2", "-f", "csv"});
  REQUIRE(p.exit_code == 0);
  auto s = run_cli({"show", temp_file("show.csv", p.out)});
  CHECK(s.exit_code == 0);
  CHECK(s.out.find("rank 1") != std::string::npos);
}

TEST_CASE("cli: --batch-p2p on plan, lower, simulate and compare", "[cli]") {
  const std::string batched =
      "rank 0: 0F0 0SEND_F0 0F1 (0RECV_B0;0SEND_F1)BATCH_P2P 0B0 0RECV_B1 0B1\n"
      "rank 1: 1RECV_F0 1F0 1B0 (1SEND_B0;1RECV_F1)BATCH_P2P 1F1 1B1 1SEND_B1\n";
  auto p = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "--batch-p2p", "-f", "text"});
  REQUIRE(p.exit_code == 0);
  CHECK(p.out == batched);
  const std::string compute = temp_file("batch_p2p_in.csv", "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  auto l = run_cli({"lower", compute, "-s", "1f1b", "--batch-p2p", "-f", "text"});
  REQUIRE(l.exit_code == 0);
  CHECK(l.out == batched);
  auto s = run_cli({"simulate", "-s", "1f1b", "-p", "4", "-m", "8", "--batch-p2p"});
  CHECK(s.exit_code == 0);
  auto c = run_cli({"compare", "-p", "4", "-m", "8", "--batch-p2p"});
  CHECK(c.exit_code == 0);
  CHECK(c.out.find("1f1b") != std::string::npos);
  // Receives right before their consumers: no latency hiding, no prefetch.
  auto bad = run_cli(
      {"plan", "-s", "zbv", "-p", "2", "-m", "4", "--batch-p2p", "--lowering", "latency-hiding"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("does not combine with the latency-hiding lowering") != std::string::npos);
  auto cap = run_cli({"plan", "-s", "zbv", "-p", "2", "-m", "4", "--batch-p2p", "--prefetch", "2"});
  CHECK(cap.exit_code == 2);
}

TEST_CASE("cli: show and render draw BATCH_P2P groups", "[cli]") {
  auto plan = run_cli({"plan", "-s", "1f1b", "-p", "2", "-m", "2", "--batch-p2p", "-f", "csv"});
  REQUIRE(plan.exit_code == 0);
  const std::string file = temp_file("batch_p2p_show.csv", plan.out);
  auto show = run_cli({"show", file});
  REQUIRE(show.exit_code == 0);
  // '|' where each rank reaches its group (after 0F1 at 2, after 1B0 at 4).
  CHECK(show.out ==
        "       0              5\n"
        "rank 0 F0 F1|.  .  B0--- .  B1---\n"
        "rank 1 .  F0 B0---|F1 B1--- .  .\n"
        "unit costs F=1 B=2 I=1 W=1, F+B group 3, comms free; makespan 9\n"
        "|: BATCH_P2P group (members posted together, completed together)\n"
        "  rank 0 at 2: (0RECV_B0;0SEND_F1)BATCH_P2P\n"
        "  rank 1 at 4: (1SEND_B0;1RECV_F1)BATCH_P2P\n");
  auto svg = run_cli({"render", file, "--svg", "-"});
  REQUIRE(svg.exit_code == 0);
  CHECK(svg.out.find("<title>(0RECV_B0;0SEND_F1)BATCH_P2P ") != std::string::npos);
  CHECK(svg.out.find("BATCH_P2P group</text>") != std::string::npos);
  auto trace = run_cli({"render", file, "--chrome-trace", "-"});
  REQUIRE(trace.exit_code == 0);
  CHECK(trace.out.find("{\"name\":\"(1SEND_B0;1RECV_F1)BATCH_P2P\",\"cat\":\"BATCH_P2P\"") !=
        std::string::npos);
}

TEST_CASE("cli: diagnose names where a run hung, from Flight Recorder dumps or a trace", "[cli]") {
  const std::string dir = std::string(PIPEPLAN_TEST_DIR) + "/diagnose/";
  auto hang = run_cli({"diagnose", dir + "hang.csv", dir + "hang_rank0", dir + "hang_rank1"});
  CHECK(hang.exit_code == 1);
  CHECK(hang.err.empty());
  CHECK(hang.out.find("rank 0: waiting (" + dir +
                      "hang_rank0)\n"
                      "  last completed:  none\n"
                      "  first unmatched: 0RECV_B0 (step 1, index 1)\n"
                      "  posted 0RECV_B0, which waits for 1SEND_B0 on rank 1\n") !=
        std::string::npos);
  CHECK(hang.out.find("  first unmatched: 1RECV_F0 (step 1, index 0)\n") != std::string::npos);
  CHECK(hang.out.find("\nhang: 2 of 2 ranks waiting (0, 1); waiting chain: rank 0 (at 0RECV_B0) "
                      "-> rank 1 (at 1RECV_F0) -> rank 0 [cycle]\n") != std::string::npos);
  auto json =
      run_cli({"diagnose", dir + "hang.csv", dir + "hang_rank1", dir + "hang_rank0", "-f", "json"});
  CHECK(json.exit_code == 1);
  CHECK(json.out.find("\"format\": \"pipeplan.diagnosis\"") != std::string::npos);
  CHECK(json.out.find("\"completed\": false") != std::string::npos);

  auto ok = run_cli({"diagnose", dir + "ok.csv", dir + "ok_rank0", dir + "ok_rank1"});
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("\ncompleted: every rank finished 1 step(s) of the plan\n") !=
        std::string::npos);

  // pipeplan's own trace of the same hang: rank 0 ran 0F0 and nothing else.
  auto plan = run_cli({"convert", dir + "hang.csv", "-f", "json"});
  REQUIRE(plan.exit_code == 0);
  const std::string trace =
      temp_file("stuck.json",
                "{\"format\": \"pipeplan.trace\", \"version\": 1, \"time_unit\": \"ms\", "
                "\"source\": \"stuck\", \"plan\": " +
                    plan.out +
                    ", \"columns\": [\"step\", \"rank\", \"index\", \"action\", \"start\", "
                    "\"end\", \"wait\", \"bytes\", \"post\"], \"records\": [[1, 0, 0, \"0F0\", "
                    "0, 1, 0, 0, 0]]}");
  auto traced = run_cli({"diagnose", dir + "hang.csv", trace});
  CHECK(traced.exit_code == 1);
  CHECK(traced.out.find("from a pipeplan trace (observed: all)") != std::string::npos);
  CHECK(traced.out.find("  last completed:  0F0 (step 1, index 0)\n") != std::string::npos);
  CHECK(traced.out.find("-> rank 0 [cycle]\n") != std::string::npos);
}

TEST_CASE("cli: diagnose refuses bad dumps with a clear message, exit 2", "[cli]") {
  const std::string dir = std::string(PIPEPLAN_TEST_DIR) + "/diagnose/";
  auto expect = [](const std::vector<std::string>& args, const std::string& message) {
    auto r = run_cli(args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find(message) != std::string::npos);
  };
  expect({"diagnose", dir + "hang.csv"}, "diagnose needs the run's records");
  expect({"diagnose", dir + "hang.csv", dir + "hang.csv"},
         "hang.csv: offset 0: not a pickle (a pickle of protocol 2 or later starts with 0x80, "
         "this starts with 0x30)");
  const std::string dump = pipeplan::test::read_source_file("tests/diagnose/hang_rank0");
  expect({"diagnose", dir + "hang.csv", temp_file("cut_rank0", dump.substr(0, 301))},
         "cut_rank0: offset ");
  expect({"diagnose", dir + "hang.csv", temp_file("cut_rank0", dump.substr(0, 301))},
         ": truncated");
  const std::string three =
      temp_file("three.csv",
                "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1SEND_F1,1RECV_B1,1B0,1SEND_B0\n"
                "2RECV_F1,2F0,2B0,2SEND_B1\n");
  expect({"diagnose", three, dir + "ok_rank0"},
         "ok_rank0: the dump is of 2 ranks (process group '0'), the plan of 3");
  expect({"diagnose", dir + "hang.csv", dir + "ok_rank0", dir + "ok_rank1"},
         "ok_rank0: P2P op 0 of rank 0 (gloo_hooked:send 0->1, record 0) differs from the plan, "
         "whose op 0 there is 0RECV_B0 (step 1, index 1), a receive from rank 1");
  expect({"diagnose", dir + "hang.csv", dir + "hang_rank0", dir + "hang_rank0"},
         "hang_rank0: a second dump of rank 0");
}
