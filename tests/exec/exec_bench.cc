// Step time of the executor against hand-written loops over the same demo
// model (not a test; numbers for docs/executor.md). Usage:
//   exec_bench [--width W] [--microbatches M] [--rows R] [--steps K]
//   exec_bench --overhead 1 [--microbatches M] [--steps K]
// Prints one line per variant: "<variant> median_ms=<t> loss=<last loss>".
// Multi-rank variants start copies of this binary (RANK set = rank mode).
// --overhead: in one process, no communication, a model so small that the
// arithmetic is negligible; prints the executor's host time per action over
// the hand-written accumulation loop (with and without an observer).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

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
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    std::string v = argv[i + 1];
    if (k == "--width") a.width = std::stoi(v);
    else if (k == "--microbatches") a.m = std::stoi(v);
    else if (k == "--rows") a.rows = std::stoi(v);
    else if (k == "--steps") a.steps = std::stoi(v);
    else if (k == "--schedule") a.schedule = v;
    else if (k == "--pp") a.pp = std::stoi(v);
    else if (k == "--v") a.v = std::stoi(v);
    else if (k == "--overhead") a.overhead = v == "1";
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

void report(const std::string& name, std::pair<double, double> r) {
  std::printf("%-44s median_ms=%.3f loss=%.9g\n", name.c_str(), r.first, r.second);
  std::fflush(stdout);
}

// Hand-written: the whole batch through all stages, one backward.
std::pair<double, double> full_batch_loop(const Args& a) {
  DemoConfig c = config(a);
  auto params = demo_parameters(c);
  std::vector<StageModule> stages;
  std::vector<at::Tensor> all;
  for (int s = 0; s < kStages; ++s) {
    stages.push_back(demo_stage(c, s, params[s]));
    for (auto& t : params[s]) all.push_back(t);
  }
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
  auto params = demo_parameters(c);
  std::vector<StageModule> stages;
  std::vector<at::Tensor> all;
  for (int s = 0; s < kStages; ++s) {
    stages.push_back(demo_stage(c, s, params[s]));
    for (auto& t : params[s]) all.push_back(t);
  }
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
  g_cpu_min = true;
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
  // Fastest step's CPU time (reported as median_ms for a uniform format).
  report("hand-written accumulation (w=4, 1 row) [cpu min]", hand);
  report("executor interleaved-1f1b pp=1 v=4 [cpu min]", plain);
  report("executor + observer [cpu min]", observed);
  std::printf("actions_per_step=%.0f overhead_us_per_action=%.2f with_observer=%.2f\n", actions,
              (plain.first - hand.first) * 1000 / actions,
              (observed.first - hand.first) * 1000 / actions);
  return 0;
}

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  at::set_num_threads(1);
  if (a.overhead) return overhead(a);
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
  for (auto [schedule, pp, v] :
       {std::tuple<const char*, int, int>{"interleaved-1f1b", 2, 2}, {"1f1b", 4, 1}}) {
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
