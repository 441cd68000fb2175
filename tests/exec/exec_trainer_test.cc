// Multi-process tests of the trainer-facing executor: the documented example
// trainer (module stages, inputs only where consumed), data parallelism
// around pipelines (world 4 on Gloo) and forward-only `train`.
#include <catch2/catch.hpp>

#include <signal.h>

#include <cmath>

#include "pipeplan/exec/launch.h"
#include "pipeplan/profile.h"
#include "proc_util.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::test;

const std::string kCli = PIPEPLAN_BINARY;
const std::string kExample = PIPEPLAN_EXAMPLE_TRAINER;

// Runs `argv` as `n` local ranks; returns each rank's stdout.
std::vector<std::string> run_ranks(const std::vector<std::string>& argv, int n) {
  const std::string dir = make_temp_dir("pipeplan-exec-trainer");
  const int port = exec::free_loopback_port();
  std::vector<Child> ranks;
  for (int r = 0; r < n; ++r)
    ranks.push_back(spawn(argv,
                          {{"RANK", std::to_string(r)},
                           {"WORLD_SIZE", std::to_string(n)},
                           {"MASTER_ADDR", "127.0.0.1"},
                           {"MASTER_PORT", std::to_string(port)}},
                          dir, "rank" + std::to_string(r)));
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    const int code = wait_exit(ranks[r], std::chrono::seconds(120));
    INFO("rank " << r << " stderr: " << slurp(ranks[r].err_path));
    CHECK(code == 0);
    out.push_back(slurp(ranks[r].out_path));
  }
  return out;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double rel) {
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    INFO("step " << k + 1 << ": " << got[k] << " vs " << want[k]);
    CHECK(std::abs(got[k] - want[k]) <= rel * std::abs(want[k]));
  }
}

}  // namespace

TEST_CASE("exec trainer: the documented example trains like one process", "[exec][trainer]") {
  const std::string dir = make_temp_dir("pipeplan-exec-example");
  REQUIRE(run({kCli, "plan", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", "2", "-o",
               dir + "/piped.json"})
              .exit_code == 0);
  REQUIRE(
      run({kCli, "plan", "-s", "gpipe", "-p", "1", "-m", "4", "-o", dir + "/one.json"}).exit_code ==
      0);
  std::vector<std::string> one = run_ranks({kExample, dir + "/one.json", "4"}, 1);
  std::vector<std::string> piped = run_ranks({kExample, dir + "/piped.json", "4"}, 2);
  std::vector<double> want = losses_of(one[0]);
  REQUIRE(want.size() == 4);
  CHECK(want[3] < want[0]);  // it learns
  // Every rank prints the shared loss; the first rank passes only the tokens,
  // the second only the labels.
  for (const std::string& out : piped) check_close(losses_of(out), want, 1e-5);
}

TEST_CASE("exec trainer: DP x PP on 4 ranks equals unpipelined training on the global batch",
          "[exec][trainer][dp]") {
  for (const std::vector<std::string>& shape :
       {std::vector<std::string>{"-s", "1f1b", "-p", "2", "-m", "4"},
        std::vector<std::string>{"-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", "2"},
        std::vector<std::string>{"-s", "zbv", "-p", "2", "-m", "4"}}) {
    INFO(shape[1]);
    std::vector<std::string> ref{kCli, "train", "--reference", "--dp", "2", "--steps", "3"};
    ref.insert(ref.end(), shape.begin(), shape.end());
    std::vector<std::string> piped{kCli, "train",   "--dp", "2",         "--nproc",
                                   "4",  "--steps", "3",    "--timeout", "30"};
    piped.insert(piped.end(), shape.begin(), shape.end());
    Ran want = run(ref), got = run(piped);
    INFO(got.err);
    REQUIRE(want.exit_code == 0);
    REQUIRE(got.exit_code == 0);
    check_close(losses_of(got.out), losses_of(want.out), 1e-5);
    // The global batch differs from one replica's: --dp changes the losses.
    Ran single =
        run({kCli, "train", "--reference", "--steps", "3", "-s", "1f1b", "-p", "2", "-m", "4"});
    CHECK(losses_of(single.out)[0] != losses_of(want.out)[0]);
  }
}

TEST_CASE("exec trainer: forward-only train evaluates without updating", "[exec][trainer]") {
  const std::vector<std::string> shape{"-s", "zbv", "-p", "2", "-m", "4", "--steps", "3"};
  auto with = [&](std::vector<std::string> head) {
    head.insert(head.end(), shape.begin(), shape.end());
    return run(head);
  };
  Ran trained = with({kCli, "train", "--reference"});
  Ran ref = with({kCli, "train", "--reference", "--forward-only"});
  Ran piped = with({kCli, "train", "--forward-only", "--timeout", "30"});
  INFO(piped.err);
  REQUIRE(piped.exit_code == 0);
  std::vector<double> t = losses_of(trained.out), r = losses_of(ref.out), p = losses_of(piped.out);
  check_close(p, r, 1e-5);
  REQUIRE(t.size() == 3);
  CHECK(std::abs(r[0] - t[0]) <= 1e-12 * std::abs(t[0]));  // same first step
  // Later steps see fresh data with the initial weights, not the trained ones.
  CHECK(std::abs(r[2] - t[2]) > 1e-6 * std::abs(t[2]));
}

TEST_CASE("exec trainer: a killed rank fails every other rank cleanly, without _Exit",
          "[exec][trainer]") {
  // The example trainer unwinds normally on an error (executor and group
  // destructors run): the surviving ranks must still exit promptly.
  const std::string dir = make_temp_dir("pipeplan-exec-example-kill");
  REQUIRE(
      run({kCli, "plan", "-s", "1f1b", "-p", "3", "-m", "3", "-o", dir + "/plan.json"}).exit_code ==
      0);
  const int port = exec::free_loopback_port();
  std::vector<Child> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(spawn({kExample, dir + "/plan.json", "1000000"},
                          {{"RANK", std::to_string(r)},
                           {"WORLD_SIZE", "3"},
                           {"MASTER_ADDR", "127.0.0.1"},
                           {"MASTER_PORT", std::to_string(port)}},
                          dir, "rank" + std::to_string(r)));
  REQUIRE(wait_for_text(ranks[0].out_path, "step 3 ", std::chrono::seconds(90)));
  ::kill(ranks[1].pid, SIGKILL);
  CHECK(wait_exit(ranks[1], std::chrono::seconds(30)) == 128 + SIGKILL);
  for (int r : {0, 2}) {
    const int code = wait_exit(ranks[r], std::chrono::seconds(60));
    INFO("rank " << r << " stderr: " << slurp(ranks[r].err_path));
    CHECK(code == 4);  // pipeplan::exit_code: a failed peer
    CHECK(slurp(ranks[r].err_path).rfind("error: rank " + std::to_string(r) + ": ", 0) == 0);
  }
}

TEST_CASE("exec trainer: profile -> search -> train, split by the searched partition",
          "[exec][trainer][profile]") {
  const std::string dir = make_temp_dir("pipeplan-exec-profile");
  const std::string layers = dir + "/layers.csv";
  REQUIRE(run({kExample, "--profile", layers}).exit_code == 0);
  // The profile reads back as a layer profile of the trainer's 14 modules.
  const LayerProfile profile = parse_layer_profile(slurp(layers), layers);
  REQUIRE(profile.size() == 14);
  CHECK(profile.layers[0].name == "0.Embedding");
  CHECK(profile.layers[2].name == "2.Functional");
  CHECK(profile.layers[0].input_size() == 4 * 6 * 8);  // int64 token ids
  for (const Layer& l : profile.layers) {
    INFO(l.name);
    CHECK(l.f > 0);
    CHECK(l.b > 0);
    CHECK(l.activation > 0);
  }
  CHECK(profile.layers[0].w == profile.layers[0].b);  // token ids: no input gradient
  CHECK(profile.layers[2].w == 0);                    // GELU: no parameters
  // The search reads it and records its partition in the plan.
  const Ran searched = run({kCli, "search", "-p", "2", "-m", "4", "--layers", layers,
                            "--time-limit", "1", "-o", dir + "/plan.json"});
  INFO(searched.err);
  REQUIRE(searched.exit_code == 0);
  REQUIRE(
      run({kCli, "plan", "-s", "gpipe", "-p", "1", "-m", "4", "-o", dir + "/one.json"}).exit_code ==
      0);
  // The trainer splits by the plan's partition and trains like one process.
  const std::vector<double> want = losses_of(run_ranks({kExample, dir + "/one.json", "3"}, 1)[0]);
  REQUIRE(want.size() == 3);
  for (const std::string& out : run_ranks({kExample, dir + "/plan.json", "3"}, 2))
    check_close(losses_of(out), want, 1e-5);
}

TEST_CASE("exec bench: pipeplan-exec-bench has --help, refuses bad input, measures overhead",
          "[exec][bench]") {
  const std::string bench = PIPEPLAN_EXEC_BENCH;
  const Ran help = run({bench, "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--overhead") != std::string::npos);
  CHECK(help.out.find("--schedule") == std::string::npos);  // rank mode stays internal
  const Ran bad = run({bench, "--steps", "0"});
  CHECK(bad.exit_code == 2);
  CHECK(run({bench, "--bogus"}).exit_code == 2);
  const Ran shape = run({bench, "--microbatches", "2"});  // 1f1b on 4 ranks needs 4
  CHECK(shape.exit_code == 2);
  CHECK(shape.err.find("needs at least pp_degree=4 microbatches") != std::string::npos);
  const Ran o = run({bench, "--overhead", "--microbatches", "4", "--steps", "2"});
  INFO(o.err);
  REQUIRE(o.exit_code == 0);
  CHECK(o.out.find("actions_per_step=32 overhead_us_per_action=") != std::string::npos);
  // The fastest step's CPU time is labelled as such, not as a median.
  CHECK(o.out.find("min_cpu_ms=") != std::string::npos);
  CHECK(o.out.find("median_ms=") == std::string::npos);
  CHECK(o.out.find(" observer_us_per_action=") != std::string::npos);
  const Ran wall = run({bench, "--overhead", "--wall", "--microbatches", "4", "--steps", "2"});
  REQUIRE(wall.exit_code == 0);
  CHECK(wall.out.find("median_ms=") != std::string::npos);
}
