// pipeplan train: the demo MLP trained with SGD on synthetic data, pipelined
// by the executor across local ranks (or one rank of an external launcher),
// or unpipelined with --reference.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/lower_options.h"
#include "ir/numbers.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/memory_policy.h"
#include "pipeplan/planner.h"

#ifdef PIPEPLAN_HAVE_EXEC
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/data_parallel.h"
#include "pipeplan/exec/demo.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/launch.h"
#include "pipeplan/exec/log.h"
#include "pipeplan/exec/trace.h"
#include "pipeplan/trace.h"
#endif

namespace pipeplan::cli {

namespace {

// The documented ranges of train's options (docs/robustness.md): wide enough
// for any demo run, small enough that the model, a batch and the waits stay
// representable and allocatable.
constexpr long long kMaxSteps = 1000000;
constexpr long long kMaxBatch = 1 << 20;
constexpr int kMaxWidth = 8192;
constexpr double kMaxLearningRate = 1000;
constexpr double kMaxWaitSeconds = 1e6;  // 11.6 days: milliseconds fit easily
// Bytes of the demo model's weights (every stage) and of one batch tensor.
constexpr double kMaxModelBytes = 4.0 * (1LL << 30);
constexpr double kMaxBatchBytes = 1.0 * (1LL << 30);

struct TrainArgs {
  Problem problem;
  std::string plan_file;
  int nproc = 0;
  int steps = 5;
  std::uint64_t seed = 0;
  std::string backend = "gloo";
  bool reference = false;
  long long batch = 0;  // 0: 4 samples per microbatch
  double lr = 0.1;
  double timeout_s = 60.0;
  int dp = 1;
  bool forward_only = false;
  int width = 16;
  std::string trace, trace_records;
  bool verbose = false;
  double warn_after_s = 5.0;
  MemoryArgs memory;  // --recompute, --offload, --offload-lead
  CLI::Option* schedule_opt = nullptr;
  CLI::Option* nproc_opt = nullptr;
};

#ifdef PIPEPLAN_HAVE_EXEC

// `%#.12g` keeps trailing zeros: always 12 significant digits.
void print_step(int k, double loss) {
  std::printf("step %d loss %#.12g\n", k, loss);
  std::fflush(stdout);
}

Plan load_train_plan(const TrainArgs& a) {
  const MemoryPolicy memory = memory_policy(a.memory);
  if (!a.plan_file.empty()) {
    if (a.schedule_opt->count() > 0) throw InputError("give either --plan or -s, not both");
    return apply_memory_policy(load_plan(a.plan_file), memory);
  }
  // The policy goes into the compute order; the executor lowers it with the
  // schedule's lowering, as `pipeplan plan --recompute/--offload` does.
  if (!memory.empty()) return apply_memory_policy(Planner(a.problem).compute(), memory);
  if (a.forward_only) {
    // The schedule's own forward-only order (the executor would otherwise
    // run the forward projection of the training plan).
    Problem pr = a.problem;
    pr.forward_only = true;
    return plan(pr);
  }
  return plan(a.problem);
}

exec::DemoConfig demo_config(const TrainArgs& a, const Plan& p, at::Device device) {
  exec::DemoConfig c;
  c.num_stages = p.meta.num_stages();
  c.width = a.width;
  c.seed = a.seed;
  c.device = device;
  return c;
}

std::int64_t batch_size(const TrainArgs& a, const Plan& p) {
  if (a.batch < 0) throw InputError("--batch must be positive");
  return a.batch > 0 ? a.batch : 4LL * p.meta.num_microbatches;
}

// The world, the demo model and its batches must fit: refused up front
// (exit 2), not by an overflow or by an allocation failing inside torch.
void check_run_size(const TrainArgs& a, const Plan& p) {
  const long long world = static_cast<long long>(p.meta.pp_degree) * a.dp;
  if (world > limits::kMaxRanks)
    throw InputError("pp_degree " + std::to_string(p.meta.pp_degree) + " x --dp " +
                     std::to_string(a.dp) + " = " + std::to_string(world) +
                     " ranks is more than the supported " + std::to_string(limits::kMaxRanks));
  auto gib = [](double bytes) { return detail::format_number(bytes / (1LL << 30), 2) + " GiB"; };
  const double w = a.width;
  const double weights = (w * w + w) * 8.0 * p.meta.num_stages();
  if (weights > kMaxModelBytes)
    throw InputError("--width " + std::to_string(a.width) + ": the demo model of " +
                     std::to_string(p.meta.num_stages()) + " stages would hold " + gib(weights) +
                     " of weights, more than the supported " + gib(kMaxModelBytes));
  const double batch = static_cast<double>(a.batch > 0 ? a.batch : 4LL * p.meta.num_microbatches);
  const double rows = batch * a.dp;
  if (rows * w * 8.0 > kMaxBatchBytes)
    throw InputError("--batch " + detail::format_number(batch) +
                     (a.dp > 1 ? " x --dp " + std::to_string(a.dp) : "") + " samples of width " +
                     std::to_string(a.width) + " make a " + gib(rows * w * 8.0) +
                     " batch, more than the supported " + gib(kMaxBatchBytes));
}

// The loss of the whole batch without a backward (forward-only reference).
double reference_forward_loss(const std::vector<exec::StageModule>& stages,
                              const exec::LossFn& loss, const std::vector<exec::InputRoute>& routes,
                              const exec::Values& inputs, const exec::Values& targets) {
  c10::NoGradGuard no_grad;
  exec::Values carried;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    exec::Values in = std::move(carried);
    for (std::size_t i = 0; i < inputs.size(); ++i)
      for (int to : routes[i].stages)
        if (to == static_cast<int>(s)) in.push_back(inputs[i]);
    carried = stages[s].forward(in);
  }
  return loss(carried, targets).item<double>();
}

int run_reference(const TrainArgs& a, const Plan& p, exec::Backend backend) {
  at::Device device = backend == exec::Backend::Nccl ? at::Device(at::kCUDA, 0) : at::kCPU;
  exec::DemoConfig c = demo_config(a, p, device);
  auto params = exec::demo_parameters(c);
  std::vector<exec::StageModule> stages;
  std::vector<at::Tensor> all;
  for (int s = 0; s < c.num_stages; ++s) {
    stages.push_back(exec::demo_stage(c, s, params[s]));
    for (const at::Tensor& t : params[s]) all.push_back(t);
  }
  // With --dp D the unpipelined model trains on the global batch of D replicas.
  const std::int64_t batch = batch_size(a, p) * a.dp;
  for (int k = 1; k <= a.steps; ++k) {
    exec::DemoBatch b = exec::demo_batch(c, batch, k);
    if (a.forward_only) {
      print_step(k, reference_forward_loss(stages, exec::demo_loss(c), exec::demo_input_stages(c),
                                           b.inputs, b.targets));
      continue;
    }
    double loss = exec::run_unpipelined(stages, exec::demo_loss(c), exec::demo_input_stages(c),
                                        b.inputs, b.targets);
    print_step(k, loss);
    exec::sgd_step(all, a.lr);
  }
  return kExitOk;
}

// After a communication failure peers may still hold our sockets; leave
// without running destructors that could wait on them.
[[noreturn]] void leave(int code) {
  std::fflush(stdout);
  std::cerr.flush();
  std::_Exit(code);
}

// "pipeplan train ARGS": how the trace was made.
std::string trace_source(const TrainArgs& /*a*/) {
  std::string s = "pipeplan train";
  const auto& raw = raw_args();
  for (std::size_t i = 1; i < raw.size(); ++i) s += " " + raw[i];
  return s;
}

void write_traces(const TrainArgs& a, const Trace& t) {
  if (!a.trace.empty()) {
    Output out(a.trace);
    write_trace_chrome(t, out.stream());
    out.close();
  }
  if (!a.trace_records.empty()) {
    Output out(a.trace_records);
    write_trace_json(t, out.stream());
    out.close();
  }
  exec::log_debug("trace of " + std::to_string(t.num_steps()) + " steps, " +
                  std::to_string(t.records.size()) + " records written");
}

int run_rank(const TrainArgs& a, const Plan& p, exec::Backend backend) {
  exec::DistEnv env = exec::DistEnv::from_environment();
  if (a.nproc_opt->count() > 0 && a.nproc != env.world_size)
    throw InputError("--nproc " + std::to_string(a.nproc) +
                     " disagrees with WORLD_SIZE=" + std::to_string(env.world_size));
  // Ranks share the machine's cores; one intra-op thread each avoids
  // oversubscription.
  at::set_num_threads(1);
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  const std::string rank_prefix = "rank " + std::to_string(env.rank) + ": ";

  try {
    const int pp = p.meta.pp_degree;
    if (a.dp > 1 && env.world_size != pp * a.dp)
      throw InputError("the plan is for pp_degree=" + std::to_string(pp) + " ranks, times --dp " +
                       std::to_string(a.dp) + " replicas makes " + std::to_string(pp * a.dp) +
                       " ranks, but WORLD_SIZE=" + std::to_string(env.world_size));
    // Checked before any communication, like every rank's executor does.
    if (a.dp == 1) exec::prepare_plan(p, env.rank, env.world_size, Transport::Rendezvous);
    else exec::prepare_plan(p, env.rank % pp, pp, Transport::Rendezvous);
    exec::ExecOptions opts;
    opts.timeout = timeout;
    opts.input_stages = {0, p.meta.num_stages() - 1};
    exec::configure_logging(a.verbose ? "debug" : "info");
    const auto t_connect = std::chrono::steady_clock::now();
    auto world = exec::Communicator::connect(env, backend, timeout);
    if (exec::log_debug_enabled()) {
      char ms[32];
      std::snprintf(
          ms, sizeof ms, "%.1f",
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_connect)
              .count());
      exec::log_debug("rank " + std::to_string(env.rank) + ": connected to " +
                      std::to_string(env.world_size) + " ranks (" + a.backend + ", " +
                      env.master_addr + ":" + std::to_string(env.master_port) + ") in " + ms +
                      " ms");
    }
    exec::ParallelGroups groups;
    if (a.dp > 1) {
      groups = exec::make_parallel_groups(world, pp, a.dp, timeout);
    } else {
      groups.pipeline = world;
      groups.pipeline_rank = env.rank;
    }
    // The tracer always watches waits (a warning names a stalled peer);
    // it records actions only when a trace is asked for.
    exec::TracerOptions to;
    to.record = !a.trace.empty() || !a.trace_records.empty();
    to.warn_after = std::chrono::milliseconds(static_cast<long long>(a.warn_after_s * 1000));
    auto tracer = std::make_shared<exec::Tracer>(to);
    exec::Executor ex(p, tracer->wrap(groups.pipeline), opts);
    ex.add_observer(tracer);
    at::Device device = backend == exec::Backend::Nccl
                            ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank))
                            : at::Device(at::kCPU);
    exec::DemoConfig c = demo_config(a, p, device);
    auto params = exec::demo_parameters(c);
    std::vector<at::Tensor> mine;
    for (int s : ex.local_stages()) {
      ex.set_stage(s, exec::demo_stage(c, s, params[s]));
      for (const at::Tensor& t : params[s]) mine.push_back(t);
    }
    ex.set_loss(exec::demo_loss(c));
    if (a.dp > 1) ex.add_observer(std::make_shared<exec::GradientAverager>(groups.data, timeout));
    const std::int64_t batch = batch_size(a, p);
    const bool first = ex.local_stages().front() == 0, last = ex.holds_last_stage();
    for (int k = 1; k <= a.steps; ++k) {
      // Every replica draws the global batch and keeps its own slice; each
      // rank passes only what its stages consume (x on the first stage, the
      // scale and the targets on the last).
      exec::DemoBatch b = exec::demo_batch(c, batch * a.dp, k);
      auto mine_of = [&](const exec::Value& v) -> exec::Value {
        return std::get<at::Tensor>(v).narrow(0, groups.replica * batch, batch);
      };
      exec::Values inputs, targets;
      if (first) inputs.push_back(mine_of(b.inputs[0]));
      if (last) {
        inputs.push_back(mine_of(b.inputs[1]));
        targets.push_back(mine_of(b.targets[0]));
      }
      std::optional<double> loss =
          a.forward_only ? ex.forward_only(inputs, targets).loss : ex.step(inputs, targets);
      // The global batch's loss: the mean of the replicas' losses.
      if (loss && a.dp > 1) loss = exec::global_loss(*groups.data, *loss, timeout);
      if (loss && groups.replica == 0) print_step(k, *loss);
      if (!a.forward_only) exec::sgd_step(mine, a.lr);
    }
    // Leave together: no rank closes its sockets while a peer still reads.
    ex.shutdown();
    if (to.record) {
      std::optional<Trace> t = tracer->gather(trace_source(a), timeout);
      if (t && groups.replica == 0) write_traces(a, *t);
    }
    if (a.dp > 1) world->barrier(timeout);
    return kExitOk;
  } catch (...) {
    // Mapped like every other failure (common.h), but reported with the rank
    // and left without unwinding: peers may still hold our sockets.
    const Failure f = classify(std::current_exception());
    // One write: the ranks share the launcher's stderr, and pieces written
    // apart interleave with a peer's report (writes up to PIPE_BUF stay whole).
    const std::string line =
        "pipeplan: error: " + (f.message.rfind(rank_prefix, 0) == 0 ? "" : rank_prefix) +
        f.message + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
    std::cerr.flush();
    leave(f.code);
  }
}

int run_train(const TrainArgs& a) {
  auto backend = exec::parse_backend(a.backend);
  if (!exec::backend_available(*backend))
    throw InputError("backend '" + a.backend + "' is not available in this LibTorch build" +
                     (*backend == exec::Backend::Nccl ? " (NCCL needs a CUDA LibTorch)" : ""));
  if (a.steps < 0) throw InputError("--steps must not be negative");
  if (!(a.timeout_s > 0)) throw InputError("--timeout must be positive");
  if (a.dp < 1) throw InputError("--dp must be at least 1");
  Plan p = load_train_plan(a);
  check_run_size(a, p);
  if (a.reference) return run_reference(a, p, *backend);
  if (exec::DistEnv::present()) return run_rank(a, p, *backend);

  const int nproc = a.nproc_opt->count() > 0 ? a.nproc : p.meta.pp_degree * a.dp;
  if (nproc < 1) throw InputError("--nproc must be at least 1");
  if (a.dp > 1 && nproc != p.meta.pp_degree * a.dp)
    throw InputError("--nproc " + std::to_string(nproc) + " does not equal pp_degree " +
                     std::to_string(p.meta.pp_degree) + " x --dp " + std::to_string(a.dp) + " = " +
                     std::to_string(p.meta.pp_degree * a.dp) + " ranks");
  // Same checks every rank repeats, done once here so a bad plan or world
  // size fails before any process starts (guarded() reports a refusal).
  exec::prepare_plan(p, 0, nproc / a.dp, Transport::Rendezvous);
  exec::LaunchOptions lo;
  lo.nproc = nproc;
  lo.grace = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000) + 10000);
  exec::LaunchResult r = exec::launch_local(exec::own_command_line(), lo);
  if (r.first_failed >= 0) {
    std::cerr << "pipeplan: error: rank " << r.first_failed << " of " << nproc
              << " failed with exit status " << r.exit_codes[r.first_failed];
    if (!r.killed.empty())
      std::cerr << "; " << r.killed.size() << " rank(s) killed after the grace period";
    std::cerr << "\n";
  }
  return r.exit_code();
}

#endif  // PIPEPLAN_HAVE_EXEC

#ifdef PIPEPLAN_TRAIN_DELEGATE
int exec_train_binary() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw InternalError("cannot locate the pipeplan binary (/proc/self/exe)");
  self[n] = '\0';
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/') + 1);
  std::string bin = dir + "pipeplan-train";
  std::vector<std::string> args{bin};
  const auto& raw = raw_args();
  auto it = std::find(raw.begin() + 1, raw.end(), std::string("train"));
  if (it != raw.end()) args.insert(args.end(), it + 1, raw.end());
  std::vector<char*> argv;
  for (auto& x : args) argv.push_back(x.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(bin.c_str(), argv.data());
  throw InputError("cannot run " + bin + " (" + std::strerror(errno) +
                   "); it is built next to pipeplan when LibTorch is found");
}
#endif

}  // namespace

std::function<int()> setup_train(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  a->problem.pp_degree = 2;
  a->problem.num_microbatches = 4;
  app.add_option("--plan", a->plan_file, "Plan file (JSON or CSV) instead of -s/-p/-m/-v");
  add_problem_options(app, a->problem, false);
  a->schedule_opt = app.get_option("--schedule");
  a->nproc_opt = app.add_option("--nproc", a->nproc,
                                "Start this many local ranks (default: the plan's pp degree); "
                                "ignored when RANK/WORLD_SIZE are set")
                     ->check(integer_in(1, limits::kMaxRanks, " ranks"));
  app.add_option("--steps", a->steps, "Training steps")
      ->check(integer_in(0, kMaxSteps))
      ->capture_default_str();
  app.add_option("--seed", a->seed, "Seed of the weights and the synthetic data")
      ->capture_default_str();
  app.add_option("--backend", a->backend, "c10d backend")
      ->check(CLI::IsMember({"gloo", "nccl"}))
      ->capture_default_str();
  app.add_flag("--reference", a->reference, "Train the same model unpipelined in this process");
  app.add_option("--batch", a->batch, "Samples per step (default: 4 per microbatch)")
      ->check(integer_in(1, kMaxBatch, " samples"));
  app.add_option("--lr", a->lr, "SGD learning rate")
      ->check(number_in(0, kMaxLearningRate))
      ->capture_default_str();
  app.add_option("--timeout", a->timeout_s, "Seconds any wait for a peer may take")
      ->check(number_in(0, kMaxWaitSeconds, /*above_min=*/true))
      ->capture_default_str();
  app.add_option("--dp", a->dp,
                 "Data-parallel replicas of the pipeline (world = pp x dp ranks); with "
                 "--reference: train on the global batch of dp replicas")
      ->check(integer_in(1, limits::kMaxRanks, " replicas"))
      ->capture_default_str();
  app.add_option("--width", a->width,
                 "Hidden width of the demo model (larger: more compute per action)")
      ->check(integer_in(1, kMaxWidth))
      ->capture_default_str();
  app.add_option("--trace", a->trace,
                 "Record every action of every step and write a Chrome trace (Perfetto) with "
                 "the records embedded, for pipeplan calibrate / render --trace");
  app.add_option("--trace-records", a->trace_records,
                 "Write the trace's records as a JSON table (pipeplan.trace)");
  app.add_flag("--verbose", a->verbose,
               "Debug log on stderr: connect, per-step times (or PIPEPLAN_LOG_LEVEL=debug)");
  app.add_option("--warn-after", a->warn_after_s,
                 "Warn while a wait for a peer lasts longer than this many seconds (0: never)")
      ->check(number_in(0, kMaxWaitSeconds))
      ->capture_default_str();
  add_memory_options(app, a->memory);
  app.add_flag("--forward-only", a->forward_only,
               "Evaluate only: forward steps printing the loss, weights never updated");
  app.footer(
      "Prints 'step <k> loss <value>' once per step (k from 1) from the rank holding the "
      "last stage.\nExit codes: 0 ok, 1 plan rejected or a peer failed, 2 usage or input "
      "error.");
  return [a]() -> int {
    // The request's own rules hold in every build, before any rank starts:
    // plan, simulate and Python refuse the same (memory_policy.h).
    require_backward_for(memory_policy(a->memory), a->forward_only);
#if defined(PIPEPLAN_HAVE_EXEC)
    return run_train(*a);
#elif defined(PIPEPLAN_TRAIN_DELEGATE)
    // LibTorch lives in the sibling pipeplan-train binary, so the rest of the
    // CLI starts without loading it; hand it every argument after "train".
    return exec_train_binary();
#else
    std::cerr << "pipeplan: error: pipeplan was built without LibTorch; 'train' needs the "
                 "executor (install LibTorch, e.g. libtorch-dev, and rebuild)\n";
    return kExitUsage;
#endif
  };
}

}  // namespace pipeplan::cli
