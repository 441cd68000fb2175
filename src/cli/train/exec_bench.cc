// pipeplan-exec-bench: step time of the executor against hand-written loops
// over the same demo model, and its host overhead per action (the numbers of
// docs/executor.md, "What was measured"). Installed next to pipeplan-train.
//   pipeplan-exec-bench [--width W] [--microbatches M] [--rows R] [--steps K]
//   pipeplan-exec-bench --overhead [--wall] [--microbatches M] [--steps K]
// Prints one line per variant: "<variant> median_ms=<t> loss=<last loss>"
// (--overhead: "min_cpu_ms=<t>", the fastest step's CPU time, unless --wall).
// Multi-rank variants start copies of this binary (RANK set = rank mode).
// --overhead: in one process, no communication, a model so small that the
// arithmetic is negligible; prints the executor's host time per action over
// the hand-written accumulation loop (with and without an observer).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <time.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <tuple>

#include "pipeplan/error.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/demo.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/hooks.h"
#include "pipeplan/exec/launch.h"
#include "pipeplan/planner.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;
using Clock = std::chrono::steady_clock;

constexpr int kStages = 4;
constexpr int kWarmup = 3;

struct Args {
  int width = 16, m = 8, rows = 32, steps = 30;
  std::string schedule;  // rank mode only
  int pp = 1, v = 1;
  bool overhead = false;
  bool wall = false;  // --overhead: wall-clock medians instead of the fastest CPU time
};

// Parses the command line; std::nullopt with the exit code on --help or bad
// input (CLI11 prints what is wrong).
std::optional<Args> parse(int argc, char** argv, int& code) {
  Args a;
  CLI::App app(
      "Executor benchmark: the demo model's step time under the executor against hand-written "
      "loops (1, 2 and 4 Gloo ranks), or with --overhead the host time per action in one "
      "process (docs/executor.md)",
      "pipeplan-exec-bench");
  const auto positive = CLI::Range(1, 1 << 20);
  app.add_option("--width", a.width, "Model width (default 16)")->check(positive);
  app.add_option("--microbatches", a.m, "Microbatches per step (default 8)")->check(positive);
  app.add_option("--rows", a.rows, "Rows per microbatch (default 32)")->check(positive);
  app.add_option("--steps", a.steps, "Timed steps after 3 warm-up steps (default 30)")
      ->check(positive);
  app.add_flag("--overhead", a.overhead,
               "Host overhead per action: width 4, 1 row per microbatch, one process, the "
               "fastest step's thread CPU time against hand-written accumulation");
  app.add_flag("--wall", a.wall,
               "With --overhead: the median wall-clock step instead of the fastest step's CPU "
               "time (includes time the thread was not running)");
  // Rank mode, when this binary starts its own ranks (not for users).
  app.add_option("--schedule", a.schedule)->group("");
  app.add_option("--pp", a.pp)->group("")->check(positive);
  app.add_option("--v", a.v)->group("")->check(positive);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
    return std::nullopt;
  }
  return a;
}

DemoConfig config(const Args& a) {
  DemoConfig c;
  c.num_stages = kStages;
  c.width = a.width;
  return c;
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

// --overhead measures this thread's CPU time and keeps the fastest step: on
// a shared machine wall time mostly measures the other processes.
bool g_cpu_min = false;

double now_ms() {
  if (!g_cpu_min)
    return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Times `step(k)` over the steps after the warmup; returns {median ms (the
// minimum with g_cpu_min), last loss}.
template <class F>
std::pair<double, double> time_steps(const Args& a, F step) {
  std::vector<double> ms;
  double loss = 0;
  for (int k = 1; k <= kWarmup + a.steps; ++k) {
    const double t0 = now_ms();
    loss = step(k);
    const double dt = now_ms() - t0;
    if (k > kWarmup) ms.push_back(dt);
  }
  if (g_cpu_min) return {*std::min_element(ms.begin(), ms.end()), loss};
  return {median(ms), loss};
}

// The statistic's name: the median wall-clock step, or (--overhead without
// --wall) the fastest step's thread CPU time.
const char* stat_label() { return g_cpu_min ? "min_cpu_ms" : "median_ms"; }

void report(const std::string& name, std::pair<double, double> r) {
  std::printf("%-44s %s=%.3f loss=%.9g\n", name.c_str(), stat_label(), r.first, r.second);
  std::fflush(stdout);
}

// Every stage of the demo model, and all their parameters.
std::pair<std::vector<StageModule>, std::vector<at::Tensor>> whole_model(const DemoConfig& c) {
  auto params = demo_parameters(c);
  std::vector<StageModule> stages;
  std::vector<at::Tensor> all;
  for (int s = 0; s < kStages; ++s) {
    stages.push_back(demo_stage(c, s, params[s]));
    for (auto& t : params[s]) all.push_back(t);
  }
  return {std::move(stages), std::move(all)};
}

// Hand-written: the whole batch through all stages, one backward.
std::pair<double, double> full_batch_loop(const Args& a) {
  DemoConfig c = config(a);
  auto model = whole_model(c);  // (lambdas cannot capture structured bindings in C++17)
  std::vector<StageModule>& stages = model.first;
  std::vector<at::Tensor>& all = model.second;
  return time_steps(a, [&](int k) {
    DemoBatch b = demo_batch(c, static_cast<std::int64_t>(a.m) * a.rows, k);
    double loss = run_unpipelined(stages, demo_loss(c), demo_input_stages(c), b.inputs, b.targets);
    sgd_step(all, 0.1);
    return loss;
  });
}

// Hand-written gradient accumulation over the same microbatches.
std::pair<double, double> microbatch_loop(const Args& a) {
  DemoConfig c = config(a);
  auto model = whole_model(c);  // (lambdas cannot capture structured bindings in C++17)
  std::vector<StageModule>& stages = model.first;
  std::vector<at::Tensor>& all = model.second;
  LossFn loss_fn = demo_loss(c);
  return time_steps(a, [&](int k) {
    DemoBatch b = demo_batch(c, static_cast<std::int64_t>(a.m) * a.rows, k);
    const at::Tensor& x = std::get<at::Tensor>(b.inputs[0]);
    const at::Tensor& scale = std::get<at::Tensor>(b.inputs[1]);
    const at::Tensor& y = std::get<at::Tensor>(b.targets[0]);
    double sum = 0;
    for (int m = 0; m < a.m; ++m) {
      Values carried = {x.narrow(0, m * a.rows, a.rows)};
      for (int s = 0; s < kStages; ++s) {
        if (s == kStages - 1) carried.push_back(scale.narrow(0, m * a.rows, a.rows));
        carried = stages[s].forward(carried);
      }
      at::Tensor loss = loss_fn(carried, {y.narrow(0, m * a.rows, a.rows)}) / a.m;
      loss.backward();
      sum += loss.item<double>();
    }
    sgd_step(all, 0.1);
    return sum;
  });
}

// Sees every event and does nothing: the cost of the hooks themselves.
struct NullObserver : Observer {
  std::int64_t n = 0;
  void on_entry(const ActionEvent& /*e*/) override { ++n; }
  void on_exit(const ActionEvent& /*e*/) override { ++n; }
};

// The executor on this rank; `comm` of the right size.
std::pair<double, double> executor_loop(const Args& a, const Plan& p, const DistEnv& env,
                                        const std::shared_ptr<Communicator>& comm,
                                        bool observed = false) {
  DemoConfig c = config(a);
  ExecOptions opts;
  opts.input_stages = demo_input_stages(c);
  Executor ex(p, env.rank, env.world_size, opts);
  if (observed) ex.add_observer(std::make_shared<NullObserver>());
  auto params = demo_parameters(c);
  std::vector<at::Tensor> mine;
  for (int s : ex.local_stages()) {
    ex.set_stage(s, demo_stage(c, s, params[s]));
    for (auto& t : params[s]) mine.push_back(t);
  }
  ex.set_loss(demo_loss(c));
  ex.connect(comm);
  return time_steps(a, [&](int k) {
    DemoBatch b = demo_batch(c, static_cast<std::int64_t>(a.m) * a.rows, k);
    std::optional<double> loss = ex.step(b.inputs, b.targets);
    sgd_step(mine, 0.1);
    return loss.value_or(0.0);
  });
}

std::string label(const Args& a, const std::string& what) {
  return what + " (w=" + std::to_string(a.width) + ")";
}

}  // namespace

// Host overhead per action, in one process (section "Overhead" of the docs).
int overhead(Args a) {
  g_cpu_min = !a.wall;
  a.width = 4;
  a.rows = 1;
  DistEnv env;
  env.master_port = free_loopback_port();
  auto comm = Communicator::connect(env, Backend::Gloo, std::chrono::seconds(60));
  Plan p = plan(Problem{"interleaved-1f1b", 1, a.m, kStages});
  const double actions = static_cast<double>(p.ranks[0].size());
  auto hand = microbatch_loop(a);
  auto plain = executor_loop(a, p, env, comm);
  auto observed = executor_loop(a, p, env, comm, true);
  // Fastest step's CPU time (min_cpu_ms), or the median wall time (median_ms).
  report("hand-written accumulation (w=4, 1 row)", hand);
  report("executor interleaved-1f1b pp=1 v=4", plain);
  report("executor + observer", observed);
  const double per_action = (plain.first - hand.first) * 1000 / actions;
  const double with_observer = (observed.first - hand.first) * 1000 / actions;
  // The observer's own cost is the difference of two noisy timings: below
  // zero, it is smaller than their spread, not a speed-up.
  const double observer = with_observer - per_action;
  std::printf(
      "actions_per_step=%.0f overhead_us_per_action=%.2f with_observer=%.2f "
      "observer_us_per_action=%.2f%s\n",
      actions, per_action, with_observer, observer,
      observer < 0 ? " (negative: within the timing noise, read as 0)" : "");
  return 0;
}

// The multi-rank variants, planned before anything is timed (a shape they
// refuse is an input error, not a crash of a started rank).
const std::vector<std::tuple<const char*, int, int>> kRankVariants = {{"interleaved-1f1b", 2, 2},
                                                                      {"1f1b", 4, 1}};

int run_bench(Args a);

int main(int argc, char** argv) {
  int code = 0;
  const std::optional<Args> parsed = parse(argc, argv, code);
  if (!parsed) return code == 0 ? 0 : 2;
  try {
    return run_bench(*parsed);
  } catch (const InputError& e) {
    std::cerr << "pipeplan-exec-bench: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "pipeplan-exec-bench: error: " << e.what() << "\n";
    return 3;
  }
}

int run_bench(Args a) {
  at::set_num_threads(1);
  if (a.overhead) return overhead(a);
  if (!DistEnv::present())
    for (auto [schedule, pp, v] : kRankVariants) plan(Problem{schedule, pp, a.m, v});
  if (DistEnv::present()) {
    DistEnv env = DistEnv::from_environment();
    Plan p = plan(Problem{a.schedule, a.pp, a.m, a.v});
    auto comm = Communicator::connect(env, Backend::Gloo, std::chrono::seconds(60));
    auto r = executor_loop(a, p, env, comm);
    if (p.meta.rank_of(p.meta.num_stages() - 1) == env.rank)
      report(label(a, "executor " + a.schedule + " pp=" + std::to_string(a.pp) + " (gloo)"), r);
    comm->barrier(std::chrono::seconds(60));
    std::fflush(stdout);
    std::_Exit(0);
  }
  report(label(a, "hand-written full batch"), full_batch_loop(a));
  report(label(a, "hand-written microbatch accumulation"), microbatch_loop(a));
  {
    DistEnv env;
    env.master_port = free_loopback_port();
    auto comm = Communicator::connect(env, Backend::Gloo, std::chrono::seconds(60));
    Plan p = plan(Problem{"interleaved-1f1b", 1, a.m, kStages});
    report(label(a, "executor interleaved-1f1b pp=1 v=4"), executor_loop(a, p, env, comm));
  }
  std::vector<std::string> self = own_command_line();
  for (auto [schedule, pp, v] : kRankVariants) {
    std::vector<std::string> cmd = self;
    for (std::string x : {"--schedule", schedule}) cmd.push_back(x);
    cmd.push_back("--pp");
    cmd.push_back(std::to_string(pp));
    cmd.push_back("--v");
    cmd.push_back(std::to_string(v));
    LaunchOptions lo;
    lo.nproc = pp;
    if (launch_local(cmd, lo).exit_code() != 0) return 1;
  }
  return 0;
}
