// One rank of the executor equivalence test. For each schedule it trains the
// demo model pipelined (this rank's stages) and, in the same process, the
// unpipelined reference, and compares the loss and every local parameter
// gradient after each step. Results go to <out>/rank<R>.txt, one line per
// schedule: "ok NAME ...", "skip NAME: why" (shape refused) or "FAIL NAME: why".
// With --dp D the world holds D replicas of the pipeline (DP x PP): each
// replica steps on its slice of the global batch, a GradientAverager averages
// the gradients, and the reference trains on the global batch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "memory_util.h"
#include "pipeplan/error.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/data_parallel.h"
#include "pipeplan/exec/demo.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/planner.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;

struct Args {
  std::vector<std::string> schedules;
  int steps = 3;
  std::string out = ".";
  double timeout_s = 30;
  bool dynamic = false;    // batch size changes every step; shapes re-exchanged
  bool bad_spec = false;   // output_specs[0] given wrong: the step must fail and say so
  int throw_at = -1;       // this rank's first stage throws on microbatch 1 of step 1
  bool batch_p2p = false;  // the batched lowering (BATCH_P2P groups)
  bool tied = false;       // the last stage's weight tied to stage 0's (outputs = width)
  int dp = 1;              // data-parallel replicas of the pipeline
  bool bad_batch = false;  // rank 1 passes a batch of 3 rows per microbatch, rank 0 of 2
  std::string memory;      // recompute|offload|both: compare with the plan without, dropout on
  bool expect_error() const { return bad_spec || throw_at >= 0 || bad_batch; }
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--schedules") {
      std::stringstream ss(v);
      for (std::string s; std::getline(ss, s, ',');) a.schedules.push_back(s);
    } else if (k == "--steps") {
      a.steps = std::stoi(v);
    } else if (k == "--out") {
      a.out = v;
    } else if (k == "--timeout") {
      a.timeout_s = std::stod(v);
    } else if (k == "--dynamic") {
      a.dynamic = v == "1";
    } else if (k == "--bad-spec") {
      a.bad_spec = v == "1";
    } else if (k == "--tied") {
      a.tied = v == "1";
    } else if (k == "--bad-batch") {
      a.bad_batch = v == "1";
    } else if (k == "--dp") {
      a.dp = std::stoi(v);
    } else if (k == "--memory") {
      a.memory = v;
    } else if (k == "--throw-at") {
      a.throw_at = std::stoi(v);
    } else if (k == "--batch-p2p") {
      a.batch_p2p = v == "1";
    } else {
      throw InputError("unknown option " + k);
    }
  }
  return a;
}

double rel_err(const at::Tensor& got, const at::Tensor& want) {
  double scale = want.abs().max().item<double>();
  return (got - want).abs().max().item<double>() / std::max(scale, 1e-12);
}

// First microbatch count the schedule accepts at this pp (2p+1 covers
// counts that are not multiples of p).
std::optional<Problem> pick_problem(const std::string& name, int p, std::string& why) {
  for (int m : {2 * p + 1, 2 * p, 3 * p}) {
    Problem pr{name, p, m, 0};
    try {
      resolve(pr);
      return pr;
    } catch (const ShapeError& e) {
      why = e.what();
    }
  }
  return std::nullopt;
}

// Replica `replica`'s rows of a global batch of `dp` equal slices.
Values slice(const Values& global, int replica, int dp) {
  Values out;
  for (const Value& v : global) {
    const at::Tensor* t = std::get_if<at::Tensor>(&v);
    if (t == nullptr) {
      out.push_back(v);
      continue;
    }
    const std::int64_t rows = t->size(0) / dp;
    out.push_back(t->narrow(0, replica * rows, rows));
  }
  return out;
}

std::string run_one(const std::string& name, int index, const Args& a, const ParallelGroups& g) {
  std::string why;
  std::optional<Problem> pr = pick_problem(name, g.pipeline->size(), why);
  if (!pr) return "skip " + name + ": " + why;
  Planner planner(*pr);
  LoweringChoice choice;
  choice.batch_p2p = a.batch_p2p;
  Plan plan = planner.plan(planner.lowering(choice));
  DemoConfig c;
  c.num_stages = plan.meta.num_stages();
  c.seed = 1000 + index;
  const int last = c.num_stages - 1;
  if (a.tied) c.outputs = c.width;
  ExecOptions opts;
  opts.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  opts.input_stages = demo_input_stages(c);
  opts.reexchange_shapes = a.dynamic;
  if (a.tied) opts.ties = {Tie{"w", {0, last}}};
  if (a.bad_spec)  // the real boundary is Float[2, 16], Float[2, 16], int
    opts.output_specs[0] = {
        {false, at::kFloat, {2, 8}}, {false, at::kFloat, {2, 16}}, {true, at::kFloat, {}}};
  Executor ex(plan, g.pipeline_rank, g.pipeline->size(), opts);
  if (a.dp > 1) ex.add_observer(std::make_shared<GradientAverager>(g.data, opts.timeout));
  auto pipe_params = demo_parameters(c);
  auto ref_params = demo_parameters(c);
  if (a.tied) {  // the pipeline's copies start equal; the reference uses one tensor twice
    c10::NoGradGuard no_grad;
    pipe_params[last][0].copy_(pipe_params[0][0]);
    ref_params[last][0] = ref_params[0][0];
  }
  std::vector<at::Tensor> pipe_local, ref_all;
  // Counts stage forwards: shapes must be learned without an extra forward.
  auto forwards = std::make_shared<long>(0);
  for (int s : ex.local_stages()) {
    StageModule st = demo_stage(c, s, pipe_params[s]);
    if (a.tied && (s == 0 || s == last)) st.tied["w"] = pipe_params[s][0];
    const bool throws = g.pipeline_rank == a.throw_at && s == ex.local_stages().front();
    st.forward = [inner = st.forward, forwards, throws, s](const Values& in) {
      if (++*forwards == 2 && throws)
        throw std::runtime_error("stage " + std::to_string(s) + " refuses microbatch 1");
      return inner(in);
    };
    ex.set_stage(s, st);
    for (auto& t : pipe_params[s]) pipe_local.push_back(t);
  }
  std::vector<StageModule> ref_stages;
  for (int s = 0; s < c.num_stages; ++s) {
    ref_stages.push_back(demo_stage(c, s, ref_params[s]));
    for (auto& t : ref_params[s]) ref_all.push_back(t);
  }
  ex.set_loss(demo_loss(c));
  ex.connect(g.pipeline);

  double loss_err = 0, grad_err = 0;
  int compared = 0;
  for (int k = 1; k <= a.steps; ++k) {
    const int m = plan.meta.num_microbatches;
    const int rows = a.dynamic ? k : (a.bad_batch && g.pipeline_rank == 1 ? 3 : 2);
    DemoBatch b = demo_batch(c, rows * m * a.dp, k);  // the global batch
    std::optional<double> loss;
    try {
      loss = ex.step(slice(b.inputs, g.replica, a.dp), slice(b.targets, g.replica, a.dp));
      if (loss && a.dp > 1) {  // the global batch's mean loss: the replicas' mean
        at::Tensor t = at::tensor({*loss}, at::kDouble);
        g.data->iallreduce_sum(t)->wait(opts.timeout, "summing the replicas' losses");
        loss = t.item<double>() / a.dp;
      }
    } catch (const std::exception& e) {
      if (a.expect_error()) return std::string("error ") + e.what();
      throw;
    }
    if (a.expect_error()) return "FAIL " + name + ": the step did not fail";
    double ref =
        run_unpipelined(ref_stages, demo_loss(c), demo_input_stages(c), b.inputs, b.targets);
    if (ex.holds_last_stage() != loss.has_value()) return "FAIL " + name + ": loss on wrong rank";
    const long want_forwards =
        static_cast<long>(k) * m * static_cast<long>(ex.local_stages().size());
    if (*forwards != want_forwards)
      return "FAIL " + name + ": " + std::to_string(*forwards) + " stage forwards after step " +
             std::to_string(k) + ", expected " + std::to_string(want_forwards);
    if (loss) loss_err = std::max(loss_err, std::abs(*loss - ref) / std::abs(ref));
    for (int s : ex.local_stages())
      for (std::size_t i = 0; i < pipe_params[s].size(); ++i) {
        const at::Tensor& g = pipe_params[s][i].grad();
        if (!g.defined())
          return "FAIL " + name + ": no gradient for stage " + std::to_string(s) + " parameter " +
                 std::to_string(i) + " at step " + std::to_string(k);
        grad_err = std::max(grad_err, rel_err(g, ref_params[s][i].grad()));
        ++compared;
      }
    sgd_step(pipe_local, 0.1);
    sgd_step(ref_all, 0.1);
  }
  std::ostringstream line;
  line << (loss_err <= 1e-5 && grad_err <= 1e-5 ? "ok " : "FAIL ") << name
       << " p=" << plan.meta.pp_degree << " m=" << plan.meta.num_microbatches
       << " v=" << plan.meta.stages_per_rank << " rank=" << g.pipeline_rank
       << " replica=" << g.replica << " stages=" << ex.local_stages().size()
       << " grads_compared=" << compared << " loss_rel_err=" << loss_err
       << " grad_rel_err=" << grad_err;
  return line.str();
}

// One pipelined run of the demo in float64 with dropout on every stage's
// first output: the step losses (last stage) and the local gradients.
struct MemoryRun {
  std::vector<double> losses;
  std::vector<at::Tensor> grads;
};

MemoryRun run_dropout_demo(const Plan& plan, const Args& a, const DistEnv& env,
                           const std::shared_ptr<Communicator>& comm) {
  DemoConfig c;
  c.num_stages = plan.meta.num_stages();
  c.seed = 77;
  c.dtype = at::kDouble;
  ExecOptions opts;
  opts.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  opts.input_stages = demo_input_stages(c);
  Executor ex(plan, env.rank, env.world_size, opts);
  auto params = demo_parameters(c);
  std::vector<at::Tensor> local;
  for (int s : ex.local_stages()) {
    StageModule st = demo_stage(c, s, params[s]);
    st.forward = [inner = st.forward](const Values& in) {
      Values out = inner(in);
      out[0] = torch::dropout(std::get<at::Tensor>(out[0]), 0.25, /*train=*/true);
      return out;
    };
    ex.set_stage(s, st);
    for (auto& t : params[s]) local.push_back(t);
  }
  ex.set_loss(demo_loss(c));
  ex.connect(comm);
  MemoryRun r;
  for (int k = 1; k <= a.steps; ++k) {
    torch::manual_seed(1000 * env.rank + k);
    DemoBatch b = demo_batch(c, 2 * plan.meta.num_microbatches, k);
    if (std::optional<double> loss = ex.step(b.inputs, b.targets)) r.losses.push_back(*loss);
    for (const at::Tensor& t : local) r.grads.push_back(t.grad().clone());
    sgd_step(local, 0.1);
  }
  ex.shutdown();
  return r;
}

// The plan with memory actions on every (stage, microbatch) against the
// same plan without: equal losses and gradients (float64, 1e-10).
std::string run_memory(const std::string& name, const Args& a, const DistEnv& env,
                       const std::shared_ptr<Communicator>& comm) {
  std::string why;
  std::optional<Problem> pr = pick_problem(name, env.world_size, why);
  if (!pr) return "skip " + name + ": " + why;
  const Plan base = pipeplan::plan(*pr);
  const MemoryRun want = run_dropout_demo(base, a, env, comm);
  const MemoryRun got = run_dropout_demo(test::with_memory_actions(base, a.memory), a, env, comm);
  double diff = 0;
  if (got.losses.size() != want.losses.size() || got.grads.size() != want.grads.size())
    return "FAIL " + name + ": runs of different lengths";
  for (std::size_t k = 0; k < got.losses.size(); ++k)
    diff = std::max(diff, std::abs(got.losses[k] - want.losses[k]));
  for (std::size_t i = 0; i < got.grads.size(); ++i)
    diff = std::max(diff, (got.grads[i] - want.grads[i]).abs().max().item<double>());
  std::ostringstream line;
  line << (diff <= 1e-10 ? "ok " : "FAIL ") << name << " memory=" << a.memory
       << " rank=" << env.rank << " grads=" << got.grads.size() << " max_diff=" << diff;
  return line.str();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    at::set_num_threads(1);
    DistEnv env = DistEnv::from_environment();
    const auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<Communicator> comm;
    try {
      comm = Communicator::connect(
          env, Backend::Gloo,
          std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000)));
    } catch (const CommError&) {
      // How long connect() took, for the missing-rank test.
      std::printf("connect failed after %.3f s\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      std::fflush(stdout);
      throw;
    }
    std::ofstream out(a.out + "/rank" + std::to_string(env.rank) + ".txt");
    const std::chrono::milliseconds timeout(static_cast<long long>(a.timeout_s * 1000));
    ParallelGroups groups;
    if (a.dp > 1) {
      groups = make_parallel_groups(comm, env.world_size / a.dp, a.dp, timeout);
    } else {
      groups.pipeline = comm;
      groups.pipeline_rank = env.rank;
    }
    bool ok = true;
    for (std::size_t i = 0; i < a.schedules.size(); ++i) {
      std::string line = a.memory.empty() ? run_one(a.schedules[i], static_cast<int>(i), a, groups)
                                          : run_memory(a.schedules[i], a, env, comm);
      ok = ok && line.rfind("FAIL", 0) != 0;
      out << line << "\n" << std::flush;
      if (a.expect_error()) std::_Exit(0);  // the peers are mid-step
    }
    comm->barrier(timeout);
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  } catch (const std::exception& e) {
    std::cerr << "exec_worker: " << e.what() << "\n";
    std::fflush(stderr);
    std::_Exit(2);
  }
}
