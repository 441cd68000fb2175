// Multi-process executor tests: Gloo on CPU over loopback, ranks started as
// separate processes (the worker, or `pipeplan train`).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/launch.h"
#include "pipeplan/planner.h"
#include "proc_util.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::test;
using std::chrono::seconds;

const std::string kCli = PIPEPLAN_BINARY;
const std::string kWorker = PIPEPLAN_EXEC_WORKER;

// The schedules issue 4 names; every one must be in the table and pass.
const std::vector<std::string> kRequired = {"gpipe", "1f1b",           "interleaved-1f1b",
                                            "zbv",   "interleaved-zb", "dualpipev"};

std::string lower_case(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::map<std::string, std::string> rank_env(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}};
}

// Starts the worker on `nproc` local ranks with these arguments, each rank
// given `grace_ms` to end once another has failed.
exec::LaunchResult launch_workers(int nproc, int grace_ms, std::vector<std::string> args) {
  exec::LaunchOptions lo;
  lo.nproc = nproc;
  lo.grace = std::chrono::milliseconds(grace_ms);
  args.insert(args.begin(), kWorker);
  return exec::launch_local(args, lo);
}

// Launches the worker on `p` ranks over `names` and returns each rank's lines.
std::vector<std::vector<std::string>> run_workers(int p, const std::vector<std::string>& names,
                                                  bool dynamic,
                                                  const std::vector<std::string>& extra = {}) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ",") + n;
  const std::string dir = make_temp_dir("pipeplan-exec-worker");
  std::vector<std::string> args{
      "--schedules", list,        "--steps", "3",         "--out",
      dir,           "--timeout", "30",      "--dynamic", dynamic ? "1" : "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  exec::LaunchResult r = launch_workers(p, 40000, args);
  std::vector<std::vector<std::string>> lines(p);
  std::string all;
  for (int k = 0; k < p; ++k) {
    std::istringstream in(slurp(dir + "/rank" + std::to_string(k) + ".txt"));
    for (std::string l; std::getline(in, l);) {
      lines[k].push_back(l);
      all += l + "\n";
    }
  }
  INFO(all);
  REQUIRE(r.exit_code() == 0);
  return lines;
}

void check_every_schedule(int p) {
  std::vector<std::string> names;
  // Routed plans (DualPipe) are refused by the executor (its own test).
  for (const auto& s : schedules())
    if (!s.routes) names.push_back(s.name);
  for (const auto& req : kRequired)
    REQUIRE(std::find(names.begin(), names.end(), req) != names.end());
  auto lines = run_workers(p, names, false);
  for (int k = 0; k < p; ++k) {
    REQUIRE(lines[k].size() == names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string& l = lines[k][i];
      INFO("rank " << k << ": " << l);
      const bool required =
          std::find(kRequired.begin(), kRequired.end(), names[i]) != kRequired.end();
      if (required || l.rfind("skip", 0) != 0) CHECK(l.rfind("ok " + names[i] + " ", 0) == 0);
    }
  }
}

}  // namespace

TEST_CASE("exec: every schedule matches the unpipelined reference at pp=2", "[exec]") {
  check_every_schedule(2);
}

TEST_CASE("exec: every schedule matches the unpipelined reference at pp=3", "[exec]") {
  check_every_schedule(3);
}

TEST_CASE("exec: every schedule matches the unpipelined reference at pp=4", "[exec]") {
  check_every_schedule(4);
}

TEST_CASE("exec: re-exchanged shapes follow a batch size that changes every step", "[exec]") {
  auto lines = run_workers(2, {"1f1b", "zbv"}, true);
  for (const auto& rank_lines : lines) {
    REQUIRE(rank_lines.size() == 2);
    CHECK(rank_lines[0].rfind("ok 1f1b ", 0) == 0);
    CHECK(rank_lines[1].rfind("ok zbv ", 0) == 0);
  }
}

TEST_CASE("exec: train prints one loss per step, equal to --reference", "[exec][cli]") {
  Ran ref = run({kCli, "train", "--reference", "-s", "interleaved-1f1b", "-p", "2", "-m", "4",
                 "--steps", "3"});
  REQUIRE(ref.exit_code == 0);
  Ran piped = run({kCli, "train", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "--steps", "3",
                   "--nproc", "2", "--timeout", "30"});
  INFO(piped.err);
  REQUIRE(piped.exit_code == 0);
  std::vector<double> want = losses_of(ref.out), got = losses_of(piped.out);
  REQUIRE(want.size() == 3);
  REQUIRE(got.size() == 3);
  for (int k = 0; k < 3; ++k) CHECK(std::abs(got[k] - want[k]) <= 1e-5 * std::abs(want[k]));
  CHECK(want[2] != want[0]);  // the model trains: losses differ between steps
}

TEST_CASE("exec: train runs a plan file and lowers a compute-only one", "[exec][cli]") {
  const std::string dir = make_temp_dir("pipeplan-exec-plan");
  const std::string file = dir + "/zbv.json";
  Ran planned =
      run({kCli, "plan", "-s", "zbv", "-p", "2", "-m", "3", "--compute-only", "-o", file});
  REQUIRE(planned.exit_code == 0);
  Ran ref = run({kCli, "train", "--reference", "--plan", file, "--steps", "2"});
  Ran piped = run({kCli, "train", "--plan", file, "--steps", "2", "--timeout", "30"});
  INFO(piped.err);
  REQUIRE(ref.exit_code == 0);
  REQUIRE(piped.exit_code == 0);
  std::vector<double> want = losses_of(ref.out), got = losses_of(piped.out);
  REQUIRE(got.size() == 2);
  for (int k = 0; k < 2; ++k) CHECK(std::abs(got[k] - want[k]) <= 1e-5 * std::abs(want[k]));
}

TEST_CASE("exec: a searched plan trains like the unpipelined reference", "[exec][cli]") {
  const std::string dir = make_temp_dir("pipeplan-exec-search");
  const std::string file = dir + "/searched.json";
  const std::string layers = std::string(PIPEPLAN_SOURCE_DIR) + "/examples/layers/tiny4.csv";
  Ran searched = run({kCli, "search", "-p", "2", "-m", "4", "--layers", layers, "--comm", "0.5",
                      "--memory-limit", "6", "-o", file});
  INFO(searched.err);
  REQUIRE(searched.exit_code == 0);
  Ran ref = run({kCli, "train", "--reference", "--plan", file, "--steps", "3"});
  Ran piped = run({kCli, "train", "--plan", file, "--steps", "3", "--timeout", "30"});
  INFO(piped.err);
  REQUIRE(ref.exit_code == 0);
  REQUIRE(piped.exit_code == 0);
  std::vector<double> want = losses_of(ref.out), got = losses_of(piped.out);
  REQUIRE(got.size() == 3);
  REQUIRE(want.size() == 3);
  for (int k = 0; k < 3; ++k) CHECK(std::abs(got[k] - want[k]) <= 1e-5 * std::abs(want[k]));
  CHECK(want[2] != want[0]);
}

TEST_CASE("exec: a plan that deadlocks under rendezvous is refused before communicating",
          "[exec][cli]") {
  const std::string dir = make_temp_dir("pipeplan-exec-deadlock");
  const std::string file = dir + "/deadlock.csv";
  // Both ranks open pair 0-1 with a receive: an NCCL pair stream would hang.
  std::ofstream(file) << "0F0,0RECV_B0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n";
  Ran launched = run({kCli, "train", "--plan", file, "--nproc", "2"});
  CHECK(launched.exit_code == 1);
  CHECK(launched.out.empty());
  CHECK(launched.err.find("pipeplan: error: the plan is not proved deadlock-free under "
                          "rendezvous transport; refusing to run it:") != std::string::npos);
  CHECK(launched.err.find("fifo-both-recv") != std::string::npos);
  // A lone rank refuses as well, without waiting for peers that never come
  // (it would sit in the store for --timeout 600 otherwise).
  int port = exec::free_loopback_port();
  Ran lone =
      run({kCli, "train", "--plan", file, "--timeout", "600"}, rank_env(1, 2, port), seconds(60));
  CHECK(lone.exit_code == 1);
  CHECK(lone.err.rfind("pipeplan: error: rank 1: the plan is not proved deadlock-free", 0) == 0);
}

TEST_CASE("exec: a routed plan (DualPipe) is refused with the reason", "[exec][cli]") {
  Ran r = run({kCli, "train", "-s", "dualpipe", "-p", "2", "-m", "4", "--timeout", "30"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("the executor runs plans whose microbatches cross every stage; this dualpipe "
                   "plan routes microbatches over part of the stages") != std::string::npos);
}

TEST_CASE("exec: a world size other than the plan's pp degree is refused", "[exec][cli]") {
  int port = exec::free_loopback_port();
  Ran lone = run({kCli, "train", "-s", "1f1b", "-p", "2", "-m", "4", "--timeout", "600"},
                 rank_env(0, 3, port), seconds(60));
  CHECK(lone.exit_code == 2);
  CHECK(lone.err ==
        "pipeplan: error: rank 0: the plan is for pp_degree=2 ranks but the process group has "
        "world size 3; start exactly 2 ranks\n");
  Ran launched = run({kCli, "train", "-s", "1f1b", "-p", "2", "-m", "4", "--nproc", "3"});
  CHECK(launched.exit_code == 2);
  CHECK(launched.err ==
        "pipeplan: error: the plan is for pp_degree=2 ranks but the process group has world "
        "size 3; start exactly 2 ranks\n");
}

TEST_CASE("exec: a batch that does not split into microbatches is an input error", "[exec][cli]") {
  Ran r =
      run({kCli, "train", "-s", "1f1b", "-p", "2", "-m", "4", "--batch", "10", "--timeout", "30"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  // Each rank checks its batch before communicating; the launcher may stop
  // the second rank once the first has failed, so at least one reports it.
  int reported = 0;
  for (int rank = 0; rank < 2; ++rank)
    reported += r.err.find("pipeplan: error: rank " + std::to_string(rank) +
                           ": a batch of 10 samples does not divide into 4 microbatches "
                           "(remainder 2); use a batch size that is a multiple of 4\n") !=
                std::string::npos;
  INFO(r.err);
  CHECK(reported >= 1);
}

TEST_CASE("exec: a killed rank makes every other rank fail instead of hanging", "[exec][cli]") {
  const std::string dir = make_temp_dir("pipeplan-exec-kill");
  const int port = exec::free_loopback_port();
  std::vector<Child> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(spawn({kCli, "train", "-s", "1f1b", "-p", "3", "-m", "6", "--steps", "1000000",
                           "--timeout", "20"},
                          rank_env(r, 3, port), dir, "rank" + std::to_string(r)));
  // Rank 2 holds the last stage and prints the losses: training is under way.
  REQUIRE(wait_for_text(ranks[2].out_path, "step 3 ", seconds(90)));
  const auto killed = std::chrono::steady_clock::now();
  ::kill(ranks[1].pid, SIGKILL);
  CHECK(wait_exit(ranks[1], seconds(30)) == 128 + SIGKILL);
  // Both survivors at once: when each exits after the kill.
  std::map<int, double> exit_ms;
  while (exit_ms.size() < 2 &&
         std::chrono::steady_clock::now() - killed < std::chrono::seconds(60)) {
    for (int r : {0, 2}) {
      int status = 0;
      if (exit_ms.count(r) == 0 && ::waitpid(ranks[r].pid, &status, WNOHANG) == ranks[r].pid) {
        ranks[r].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        exit_ms[r] =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed)
                .count();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(exit_ms.size() == 2);
  std::printf("killed rank 1 of 3: rank 0 exited after %.0f ms, rank 2 after %.0f ms\n", exit_ms[0],
              exit_ms[2]);
  for (int r : {0, 2}) {
    INFO("rank " << r << " stderr: " << slurp(ranks[r].err_path));
    CHECK(ranks[r].exit_code == 4);  // a failed peer, not a bad plan
    CHECK(slurp(ranks[r].err_path).rfind("pipeplan: error: rank " + std::to_string(r) + ": ", 0) ==
          0);
  }
  // Rank 0 (it serves the store) waits for rank 2's report, not for the
  // killed rank's, which never comes (it lingered 2 s for it before).
  CHECK(exit_ms[0] < exit_ms[2] + 1000);
}

TEST_CASE("exec: a stalled rank makes its peer time out", "[exec][cli]") {
  const std::string dir = make_temp_dir("pipeplan-exec-stall");
  const int port = exec::free_loopback_port();
  std::vector<Child> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(spawn({kCli, "train", "-s", "gpipe", "-p", "2", "-m", "2", "--steps", "1000000",
                           "--timeout", "3"},
                          rank_env(r, 2, port), dir, "rank" + std::to_string(r)));
  REQUIRE(wait_for_text(ranks[1].out_path, "step 2 ", seconds(90)));
  ::kill(ranks[0].pid, SIGSTOP);
  const int code = wait_exit(ranks[1], seconds(60));
  const std::string err = slurp(ranks[1].err_path);
  ::kill(ranks[0].pid, SIGKILL);
  wait_exit(ranks[0], seconds(30));
  INFO("rank 1 stderr: " << err);
  CHECK(code == 4);
  CHECK(err.rfind("pipeplan: error: rank 1: ", 0) == 0);
  CHECK(lower_case(err).find("timed out") != std::string::npos);
}

TEST_CASE("exec: a wrong output_specs fails the step naming the mismatch and the fix", "[exec]") {
  const std::string dir = make_temp_dir("pipeplan-exec-badspec");
  exec::LaunchResult r = launch_workers(
      2, 30000,
      {"--schedules", "1f1b", "--steps", "1", "--out", dir, "--timeout", "30", "--bad-spec", "1"});
  const std::string sender = slurp(dir + "/rank0.txt"), receiver = slurp(dir + "/rank1.txt");
  INFO("rank 0: " << sender << "rank 1: " << receiver);
  CHECK(r.exit_code() == 0);
  CHECK(sender ==
        "error rank 0: stage 0, microbatch 0, action 0SEND_F0: stage 0 returns [Float[2, 16], "
        "Float[2, 16], int] for microbatch 0 but "
        "ExecOptions::output_specs[0] says [Float[2, 8], Float[2, 16], int]; correct "
        "output_specs[0] (the same on every rank), or leave stage 0 out of output_specs to "
        "learn its shapes from the first transfer\n");
  // The peer fails too, when rank 0's connection closes (rank 0 served the
  // store, so its report may have left with it), naming its receive from
  // rank 0. No timing is assumed: a loaded machine may hold rank 1 back
  // until after rank 0 left, so the receive fails either where it is waited
  // for (1F0) or where it is posted (1RECV_F0). The generous timeout keeps
  // a slow start from failing connect; no rank waits for it.
  CHECK(receiver.rfind("error rank 1: stage 1, microbatch 0, action 1", 0) == 0);
  const bool waited = receiver.find("action 1F0: 1RECV_F0 from rank 0") != std::string::npos;
  const bool posted = receiver.find("action 1RECV_F0: ") != std::string::npos &&
                      receiver.find("from rank 0") != std::string::npos;
  CHECK((waited || posted));
}

// Stage 0's weight tied to the last stage's, on different ranks (1f1b,
// interleaved-1f1b) and on one (zbv's V): the worker compares the loss and
// every local gradient (each copy against the one shared tensor of the
// reference) after each of 3 steps. With --dp 2 the world holds two replicas
// of the pipeline (DP x PP): the tie is summed in each replica, then averaged
// across them, equal to the tied model trained on the global batch.
TEST_CASE("exec: tied parameters across ranks match the tied unpipelined model", "[exec][tie]") {
  for (const char* dp : {"1", "2"}) {
    const int world = 2 * std::stoi(dp);
    const std::string dir = make_temp_dir("pipeplan-exec-tied");
    exec::LaunchResult r =
        launch_workers(world, 40000,
                       {"--schedules", "1f1b,interleaved-1f1b,zbv", "--steps", "3", "--out", dir,
                        "--timeout", "30", "--tied", "1", "--dp", dp});
    CHECK(r.exit_code() == 0);
    for (int k = 0; k < world; ++k) {
      const std::string lines = slurp(dir + "/rank" + std::to_string(k) + ".txt");
      INFO("dp " << dp << " rank " << k << ": " << lines);
      for (const std::string name : {"1f1b", "interleaved-1f1b", "zbv"})
        CHECK(lines.find("ok " + name + " p=2") != std::string::npos);
      CHECK(lines.find("FAIL") == std::string::npos);
    }
  }
}

TEST_CASE("exec: the batch size is checked across ranks", "[exec]") {
  // Rank 0 slices x (10 rows), rank 1 the scale and the targets (15 rows):
  // each rank's values agree and divide into the 5 microbatches, so only a
  // check across the ranks sees the mismatch. Both ranks fail, before any
  // action.
  const std::string dir = make_temp_dir("pipeplan-exec-bad-batch");
  exec::LaunchResult r = launch_workers(
      2, 30000,
      {"--schedules", "1f1b", "--steps", "1", "--out", dir, "--timeout", "30", "--bad-batch", "1"});
  CHECK(r.exit_code() == 0);
  const std::string why = "the ranks were given different batch sizes (between 10 and 15 samples; ";
  const std::string tail =
      "); every rank's sliced inputs and targets must share the batch dimension\n";
  CHECK(slurp(dir + "/rank0.txt") == "error rank 0: " + why + "here input 0 has 10" + tail);
  CHECK(slurp(dir + "/rank1.txt") == "error rank 1: " + why + "here input 1 has 15" + tail);
}

TEST_CASE("exec: a throwing stage is reported with its context on every rank", "[exec]") {
  // Plain and batched (BATCH_P2P groups) plans: a peer failing inside a group
  // names the group.
  for (const char* batched : {"0", "1"}) {
    const std::string dir = make_temp_dir("pipeplan-exec-throw");
    const auto start = std::chrono::steady_clock::now();
    exec::LaunchResult r =
        launch_workers(3, 30000,
                       {"--schedules", "1f1b", "--steps", "1", "--out", dir, "--timeout", "20",
                        "--throw-at", "1", "--batch-p2p", batched});
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string origin = "stage 1, microbatch 1, action 1F1: stage 1 refuses microbatch 1";
    std::vector<std::string> got;
    for (int k = 0; k < 3; ++k) got.push_back(slurp(dir + "/rank" + std::to_string(k) + ".txt"));
    INFO("batched " << batched << "\nrank 0: " << got[0] << "rank 1: " << got[1]
                    << "rank 2: " << got[2]);
    CHECK(r.exit_code() == 0);
    CHECK(took < 20);  // well within the timeout: the peers see the closed connections
    CHECK(got[1] == "error rank 1: " + origin + "\n");
    // Each peer names where it was (an action or a group) and what it waited
    // for, then which rank failed and why.
    for (int k : {0, 2}) {
      const std::string at = "error rank " + std::to_string(k) + ": stage " + std::to_string(k);
      CHECK((got[k].rfind(at + ", microbatch ", 0) == 0 || got[k].rfind(at + ", group (", 0) == 0));
      CHECK(got[k].find("from rank 1 failed") != std::string::npos);
      CHECK(got[k].find("; rank 1 failed: " + origin + "\n") != std::string::npos);
    }
  }
}

TEST_CASE("exec: a missing rank fails connect on every rank within the timeout", "[exec]") {
  const std::string dir = make_temp_dir("pipeplan-exec-missing");
  // WORLD_SIZE=3 with rank 2 never started; and a world of 2 without rank 0
  // (which serves the store).
  const int port = exec::free_loopback_port(), lone_port = exec::free_loopback_port();
  const std::vector<std::string> cmd = {kWorker, "--schedules", "1f1b", "--out",
                                        dir,     "--timeout",   "3"};
  std::vector<Child> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(spawn(cmd, rank_env(r, 3, port), dir, "rank" + std::to_string(r)));
  Child lone = spawn(cmd, rank_env(1, 2, lone_port), dir, "lone");
  for (int r = 0; r < 2; ++r) {
    CHECK(wait_exit(ranks[r], seconds(60)) == 2);
    CHECK(slurp(ranks[r].err_path) ==
          "exec_worker: rank " + std::to_string(r) +
              ": 2 of 3 ranks joined the group within 3000 ms; missing: rank 2 (start "
              "WORLD_SIZE=3 processes with the same MASTER_ADDR and MASTER_PORT)\n");
  }
  CHECK(wait_exit(lone, seconds(60)) == 2);
  // (c10d logs its own line first.)
  CHECK(slurp(lone.err_path)
            .find("exec_worker: rank 1: cannot form the store at 127.0.0.1:" +
                  std::to_string(lone_port) + " within 3000 ms: ") != std::string::npos);
  // Each connect() gave up within the timeout (it measures itself: starting
  // the processes on a loaded machine takes seconds of its own). Before one
  // deadline covered the whole, each phase took its own timeout.
  for (Child* c : {&ranks[0], &ranks[1], &lone}) {
    const std::string out = slurp(c->out_path);
    INFO(out);
    double took = 1e9;
    REQUIRE(std::sscanf(out.c_str(), "connect failed after %lf s", &took) == 1);
    CHECK(took < 3 + 1.5);
  }
}

// BATCH_P2P groups: each group's members are posted as one batch and waited
// for together (groups.cc); the losses of every step, hence the gradients of
// the steps before it, match the unpipelined model's.
TEST_CASE("exec: plans with BATCH_P2P groups train like the unpipelined reference", "[exec][cli]") {
  const std::string dir = make_temp_dir("pipeplan-exec-batch-p2p");
  struct Shape {
    const char* schedule;
    const char* p;
    const char* m;
  };
  for (Shape s :
       {Shape{"1f1b", "4", "6"}, Shape{"interleaved-1f1b", "2", "4"}, Shape{"zbv", "2", "4"}}) {
    const std::string file = dir + "/" + s.schedule + ".json";
    Ran planned =
        run({kCli, "plan", "-s", s.schedule, "-p", s.p, "-m", s.m, "--batch-p2p", "-o", file});
    REQUIRE(planned.exit_code == 0);
    INFO(s.schedule << "\n" << slurp(file));
    REQUIRE(slurp(file).find("BATCH_P2P") != std::string::npos);
    Ran ref = run({kCli, "train", "--reference", "--plan", file, "--steps", "3"});
    Ran piped = run({kCli, "train", "--plan", file, "--steps", "3", "--timeout", "30"});
    INFO(ref.err << piped.err);
    REQUIRE(ref.exit_code == 0);
    REQUIRE(piped.exit_code == 0);
    std::vector<double> want = losses_of(ref.out), got = losses_of(piped.out);
    REQUIRE(got.size() == 3);
    REQUIRE(want.size() == 3);
    for (int k = 0; k < 3; ++k) CHECK(std::abs(got[k] - want[k]) <= 1e-5 * std::abs(want[k]));
    CHECK(want[2] != want[0]);
  }
}

TEST_CASE("exec: memory actions over Gloo train exactly like the plan without, dropout on",
          "[exec][memory]") {
  const std::vector<std::string> names = {"1f1b", "interleaved-1f1b", "zbv"};
  for (const std::string mode : {"recompute", "offload", "both"}) {
    auto lines = run_workers(2, names, false, {"--memory", mode});
    for (const auto& rank_lines : lines) {
      REQUIRE(rank_lines.size() == names.size());
      for (std::size_t i = 0; i < names.size(); ++i) {
        INFO(rank_lines[i]);
        CHECK(rank_lines[i].rfind("ok " + names[i] + " memory=" + mode + " ", 0) == 0);
      }
    }
  }
}

TEST_CASE("exec: train runs a plan with memory actions like the plan without",
          "[exec][cli][memory]") {
  const std::string dir = make_temp_dir("pipeplan-exec-memory");
  const std::string file = dir + "/recompute.csv";
  {
    std::ofstream out(file);
    out << "0F0,0F1,0OFFLOAD1,0RECOMPUTE0,0B0,0RELOAD1,0B1\n1F0,1B0,1F1,1RECOMPUTE1,1B1\n";
  }
  Ran ref = run({kCli, "train", "--reference", "--plan", file, "--steps", "3"});
  Ran piped = run({kCli, "train", "--plan", file, "--steps", "3", "--timeout", "30"});
  INFO(ref.err << piped.err);
  REQUIRE(ref.exit_code == 0);
  REQUIRE(piped.exit_code == 0);
  std::vector<double> want = losses_of(ref.out), got = losses_of(piped.out);
  REQUIRE(got.size() == 3);
  REQUIRE(want.size() == 3);
  for (int k = 0; k < 3; ++k) CHECK(std::abs(got[k] - want[k]) <= 1e-5 * std::abs(want[k]));
}

TEST_CASE("exec: train --recompute and --offload train like --reference", "[exec][cli][memory]") {
  for (const std::vector<std::string>& policy :
       {std::vector<std::string>{"-s", "1f1b", "--recompute", "all"},
        std::vector<std::string>{"-s", "zbv", "--offload", "all", "--offload-lead", "2"},
        std::vector<std::string>{"-s", "interleaved-1f1b", "-v", "2", "--recompute", "1",
                                 "--offload", "0,3"}}) {
    std::vector<std::string> base{kCli, "train", "-p", "2", "-m", "4", "--steps", "2"};
    base.insert(base.end(), policy.begin(), policy.end());
    std::vector<std::string> ref = base;
    ref.push_back("--reference");
    base.insert(base.end(), {"--timeout", "30"});
    Ran want_run = run(ref), got_run = run(base);
    INFO(policy[1] << " " << policy[2] << "\n" << want_run.err << got_run.err);
    REQUIRE(want_run.exit_code == 0);
    REQUIRE(got_run.exit_code == 0);
    std::vector<double> want = losses_of(want_run.out), got = losses_of(got_run.out);
    REQUIRE(got.size() == 2);
    REQUIRE(want.size() == 2);
    for (int k = 0; k < 2; ++k) CHECK(std::abs(got[k] - want[k]) <= 1e-5 * std::abs(want[k]));
  }
  Ran bad = run({kCli, "train", "-s", "1f1b", "-p", "2", "-m", "4", "--recompute", "7"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("stage 7") != std::string::npos);
}

TEST_CASE("exec: NCCL without a usable GPU fails the rank cleanly (exit 4)", "[exec][cli]") {
  // PyPI's LibTorch is a CUDA build: the NCCL backend is compiled in and its
  // group is formed for real; on a machine without a GPU (CI) forming it must
  // fail like any broken communication, never crash or hang.
  if (!exec::backend_available(exec::Backend::Nccl)) {
    WARN("this LibTorch has no NCCL backend: nothing to check");
    return;
  }
  Ran r = run({kCli, "train", "--backend", "nccl", "-s", "1f1b", "-p", "1", "-m", "2", "--steps",
               "1", "--timeout", "30"});
  if (r.exit_code == 0) {
    WARN("a GPU is here: NCCL trained (scripts/gpu_smoke.sh checks its losses)");
    return;
  }
  INFO(r.err);
  CHECK(r.exit_code == 4);
  CHECK(r.err.find("pipeplan: error: rank 0: ") != std::string::npos);
  CHECK(r.err.find("nccl") != std::string::npos);
}
