// Executor: setup, the step loop with its hooks, and per-stage gradient
// completion. What each action does is in actions.cc.
#include "pipeplan/exec/executor.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>

#include "exec/replay.h"
#include "pipeplan/error.h"

namespace pipeplan::exec {

Executor::Impl::Impl(const Plan& p, int r, int w, ExecOptions o)
    : plan(prepare_plan(p, r, w, o.transport)), rank(r), world(w), opt(std::move(o)) {
  num_stages = plan.meta.num_stages();
  num_mb = plan.meta.num_microbatches;
  local = plan.meta.stages_of(rank);
  local_index.assign(num_stages, -1);
  for (std::size_t i = 0; i < local.size(); ++i) local_index[local[i]] = static_cast<int>(i);
  modules.resize(local.size());
  trainable.resize(local.size());
  params_checked.assign(local.size(), false);
  for (const InputRoute& route : opt.input_stages) {
    if (route.stages.empty())
      throw InputError("ExecOptions::input_stages: an input routed to no stage");
    for (int s : route.stages)
      if (s < 0 || s >= num_stages)
        throw InputError("ExecOptions::input_stages names stage " + std::to_string(s) +
                         " but the plan has stages 0.." + std::to_string(num_stages - 1));
    routes.push_back(route.stages);
  }
  for (std::size_t i = 0; i < routes.size(); ++i)
    for (int s : routes[i])
      if (local_index[s] >= 0) {
        local_inputs.push_back(static_cast<int>(i));
        break;
      }
  specs.resize(num_stages);
  given.assign(num_stages, false);
  learned.assign(num_stages, false);
  header_ops.resize(num_stages);
  header_msgs.resize(num_stages);
  for (const auto& [s, spec] : opt.output_specs) {
    if (s < 0 || s >= num_stages - 1)
      throw InputError("ExecOptions::output_specs names stage " + std::to_string(s) +
                       ", which has no outgoing boundary");
    specs[s] = spec;
    given[s] = true;
  }
  plan_forward_only = plan.meta.forward_only || !has_backward(plan.ranks[rank]);
  fwd_program = forward_projection(plan.ranks[rank]);
  fwd_program_proved = plan_forward_only;
}

// Forward-only steps of a training plan run its forward projection; it is
// proved like any plan (once, without communicating) before it runs.
void Executor::Impl::prove_forward_projection() {
  if (fwd_program_proved) return;
  VerifyOptions vo;
  vo.transport = opt.transport;
  VerifyResult result = verify(forward_projection(plan), vo);
  if (!result.ok()) {
    throw PlanRejected(
        "the forward-only part of the plan (its F, SEND_F and RECV_F actions) is "
        "not proved deadlock-free under " +
            std::string(to_string(opt.transport)) +
            " transport; refusing to run a forward-only step; give the executor "
            "a forward-only plan (pipeplan plan --forward-only) for evaluation:\n" +
            format_diagnostics(result.diagnostics),
        result.diagnostics);
  }
  fwd_program_proved = true;
}

void Executor::Impl::connect(std::shared_ptr<Communicator> c) {
  if (!c) throw InputError(me() + "connect() needs a communicator");
  if (c->size() != world)
    throw InputError(me() + "the process group has " + std::to_string(c->size()) +
                     " ranks but the executor was built for " + std::to_string(world));
  if (c->rank() != rank)
    throw InputError(me() + "the process group says this process is rank " +
                     std::to_string(c->rank()));
  // Everything both ends of a boundary must agree on, hashed.
  std::string options = std::to_string(opt.reexchange_shapes) + "/" +
                        std::to_string(static_cast<int>(opt.loss_reduction)) + "/" +
                        std::to_string(opt.loss_on_every_rank) + "/";
  for (const auto& r : routes) options += "[" + detail::join(r) + "]";
  for (const auto& [s, spec] : opt.output_specs)
    options += std::to_string(s) + ":" + to_string(spec) + ";";
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : options) h = (h ^ ch) * 1099511628211ULL;
  const std::int64_t fp = detail::fingerprint(plan);
  const auto flags = static_cast<std::int64_t>(h >> 2);
  at::Tensor t = at::tensor(std::vector<std::int64_t>{fp, -fp, flags, -flags},
                            at::TensorOptions().dtype(at::kLong))
                     .to(c->device());
  c->allreduce_max(t, timeout());
  t = t.to(at::kCPU);
  auto at_ = [&t](int i) { return t[i].item<std::int64_t>(); };
  if (at_(0) != fp || -at_(1) != fp)
    throw InputError(me() +
                     "the ranks were given different plans; every rank must run the "
                     "same plan");
  if (at_(2) != flags || -at_(3) != flags)
    throw InputError(me() +
                     "the ranks were given different executor options (output_specs, "
                     "reexchange_shapes, input_stages, loss_reduction or "
                     "loss_on_every_rank); give every rank the same");
  comm = std::move(c);
  closed = false;
}

void Executor::Impl::check_ready(bool training) const {
  if (broken)
    throw InputError(me() + "a previous step failed mid-way; this executor cannot continue");
  if (closed) throw InputError(me() + "the executor was shut down");
  if (!comm) throw InputError(me() + "connect() the executor to a process group first");
  for (std::size_t i = 0; i < local.size(); ++i)
    if (!modules[i])
      throw InputError(me() + "owns stage " + std::to_string(local[i]) +
                       " but no module was registered for it (set_stage)");
  if (training && holds_last() && !loss_fn)
    throw InputError(me() + "holds the last stage but no loss function was set (set_loss)");
}

// The hooks cost nothing without observers: no clock, no event.
// Cell by cell: an action, or a BATCH_P2P group (groups.cc).
void Executor::Impl::run_program(const std::vector<Action>& program) {
  for (std::size_t i = 0; i < program.size();) {
    const std::size_t n = cell_size(program, i);
    if (n > 1) run_group(program, i, n);
    else run_observed(program, i);
    i += n;
  }
}

// One action, seen by the observers (when there are any).
void Executor::Impl::run_observed(const std::vector<Action>& program, std::size_t i) {
  if (observers.empty()) {
    run_action(program[i]);
    return;
  }
  ActionEvent e;
  e.rank = rank;
  e.step = step_index;
  e.forward_only = fwd_step;
  e.action = program[i];
  e.index = i;
  e.bytes = 0;
  e.start = e.end = Clock::now();
  for (const auto& o : observers) o->on_entry(e);
  last_bytes = 0;
  run_action(program[i]);
  e.end = Clock::now();
  if (is_comm(program[i].type)) e.bytes = last_bytes;
  for (const auto& o : observers) o->on_exit(e);
}

void Executor::Impl::weight_grads_done(int stage) {
  const int li = local_index[stage];
  if (--backward_left[li] == 0) finish_stage(li);
}

// Every microbatch's weight gradient of a stage is in: add the step's
// gradient to .grad now, so observers (data-parallel averaging) can start
// while the rest of the backward runs.
void Executor::Impl::finish_stage(int li) {
  const double scale = opt.loss_reduction == LossReduction::Mean ? 1.0 / num_mb : 1.0;
  for (std::size_t p = 0; p < trainable[li].size(); ++p) {
    at::Tensor& sum = grad_sums[li][p];
    if (!sum.defined()) continue;
    if (scale != 1.0) sum.mul_(scale);
    at::Tensor& g = trainable[li][p].mutable_grad();
    if (g.defined()) g.add_(sum);
    else g = std::move(sum);
    sum = at::Tensor();
  }
  for (const auto& o : observers) o->on_stage_grads_ready(local[li], trainable[li]);
}

StepResult Executor::Impl::run(const Values& inputs, const Values& targets, bool forward_only) {
  // Even an error found before communicating may be this rank's alone, with
  // its peers already waiting in the step: shutdown() must not wait for them.
  last_step_failed = true;
  StepResult r = run_step(inputs, targets, forward_only);
  last_step_failed = false;
  return r;
}

StepResult Executor::Impl::run_step(const Values& inputs, const Values& targets,
                                    bool forward_only) {
  fwd_step = forward_only || plan_forward_only;
  check_ready(!fwd_step);
  if (fwd_step) prove_forward_projection();
  split_batch(inputs, targets);
  broken = true;  // until the step completes: peers would be left mid-step
  const int n = static_cast<int>(local.size());
  slots.assign(n, std::vector<detail::Slot>(num_mb));
  grad_sums.assign(n, {});
  backward_left.assign(n, num_mb);
  for (int i = 0; i < n; ++i) grad_sums[i].resize(trainable[i].size());
  losses.assign(num_mb, at::Tensor());
  final_outputs.assign(fwd_step && holds_last() ? num_mb : 0, {});
  header_sent.assign(num_stages, false);
  header_received.assign(num_stages, false);
  for (const auto& o : observers) o->on_step_begin(step_index, fwd_step);
  run_program(fwd_step ? fwd_program : plan.ranks[rank]);
  for (auto& [key, sends] : fwd_sends)
    for (auto& s : sends) s.op->wait(timeout(), s.what);
  fwd_sends.clear();
  for (auto& s : other_sends) s.op->wait(timeout(), s.what);
  other_sends.clear();
  if (!recvs.empty()) throw InternalError(me() + "a posted receive was never consumed");
  for (int li = 0; li < n; ++li)
    for (int m = 0; m < num_mb; ++m) {
      const detail::Slot& sl = slots[li][m];
      if (!sl.forward_done || (!fwd_step && !sl.weight_grad_done))
        throw InternalError(me() + "stage " + std::to_string(local[li]) + " microbatch " +
                            std::to_string(m) + " never finished its " +
                            (sl.forward_done ? "backward" : "forward"));
    }
  for (const auto& o : observers) o->on_step_end(step_index, fwd_step);
  StepResult result;
  if (holds_last() && losses[0].defined()) {
    at::Tensor all = at::stack(losses);
    result.loss =
        (opt.loss_reduction == LossReduction::Mean ? all.mean() : all.sum()).item<double>();
    result.losses = losses;
  }
  if (fwd_step) result.outputs = merged_outputs();
  if (opt.loss_on_every_rank) {
    // [has loss, loss]: summed, so every rank learns the last stage's value.
    at::Tensor t = at::zeros({2}, at::TensorOptions().dtype(at::kDouble));
    if (result.loss) {
      t[0] = 1.0;
      t[1] = *result.loss;
    }
    t = t.to(comm->device());
    comm->iallreduce_sum(t)->wait(
        timeout(), me() + "sharing the step loss across " + std::to_string(world) + " ranks");
    t = t.to(at::kCPU);
    if (t[0].item<double>() > 0) result.loss = t[1].item<double>();
  }
  slots.clear();
  grad_sums.clear();
  owned.clear();
  mb_targets.clear();
  losses.clear();
  final_outputs.clear();
  ++step_index;
  broken = false;
  return result;
}

// --- the public face ---

Executor::Executor(const Plan& plan, int rank, int world_size, ExecOptions options)
    : impl_(std::make_unique<Impl>(plan, rank, world_size, std::move(options))) {}

Executor::Executor(const Plan& plan, std::shared_ptr<Communicator> group, ExecOptions options) {
  if (!group) throw InputError("Executor: no process group given");
  impl_ = std::make_unique<Impl>(plan, group->rank(), group->size(), std::move(options));
  impl_->connect(std::move(group));
}

Executor::~Executor() {
  if (!impl_) return;
  try {
    shutdown();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw
  }
}
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;

void Executor::set_stage(int stage, StageModule module) {
  Impl& im = *impl_;
  if (stage < 0 || stage >= im.num_stages || im.local_index[stage] < 0)
    throw InputError("stage " + std::to_string(stage) + " is not owned by rank " +
                     std::to_string(im.rank) + " (it owns stages " + detail::join(im.local) + ")");
  if (!module.forward) throw InputError("stage " + std::to_string(stage) + " has no forward");
  const int li = im.local_index[stage];
  im.trainable[li].clear();
  for (const at::Tensor& p : module.parameters)
    if (p.requires_grad()) im.trainable[li].push_back(p);
  im.params_checked[li] = false;
  im.modules[li] = std::move(module);
}

void Executor::set_stages(const std::vector<StageModule>& all) {
  if (static_cast<int>(all.size()) != impl_->num_stages)
    throw InputError("set_stages: got " + std::to_string(all.size()) + " stages but the plan has " +
                     std::to_string(impl_->num_stages));
  for (int s : impl_->local) set_stage(s, all[s]);
}

void Executor::set_loss(LossFn loss) { impl_->loss_fn = std::move(loss); }
void Executor::connect(std::shared_ptr<Communicator> comm) { impl_->connect(std::move(comm)); }

void Executor::add_observer(std::shared_ptr<Observer> observer) {
  if (!observer) throw InputError("add_observer: no observer given");
  observer->set_up(impl_->plan, impl_->rank);
  impl_->observers.push_back(std::move(observer));
}

void Executor::remove_observer(const std::shared_ptr<Observer>& observer) {
  auto& v = impl_->observers;
  v.erase(std::remove(v.begin(), v.end(), observer), v.end());
}

void Executor::set_handler(ActionType type, PassThroughHandler handler) {
  switch (type) {
    case ActionType::Unshard: impl_->handlers[0] = std::move(handler); return;
    case ActionType::Reshard: impl_->handlers[1] = std::move(handler); return;
    case ActionType::ReduceGrad: impl_->handlers[2] = std::move(handler); return;
    default:
      throw InputError("set_handler: " + std::string(to_string(type)) +
                       " is run by the executor; handlers exist for UNSHARD, RESHARD and "
                       "REDUCE_GRAD only (use an Observer to watch other actions)");
  }
}

void Executor::train(bool on) {
  for (auto& m : impl_->modules)
    if (m && m->module) m->module->train(on);
}

std::optional<double> Executor::step(const Values& inputs, const Values& targets,
                                     std::vector<at::Tensor>* losses) {
  StepResult r = impl_->run(inputs, targets, false);
  if (losses != nullptr) *losses = std::move(r.losses);
  return r.loss;
}

StepResult Executor::run_step(const Values& inputs, const Values& targets) {
  return impl_->run(inputs, targets, false);
}

StepResult Executor::forward_only(const Values& inputs, const Values& targets) {
  return impl_->run(inputs, targets, true);
}

void Executor::shutdown() {
  Impl& im = *impl_;
  if (im.closed || im.broken || im.last_step_failed || !im.comm) return;
  im.closed = true;
  im.comm->barrier(im.timeout());
}

bool Executor::forward_only_plan() const { return impl_->plan_forward_only; }
const Plan& Executor::plan() const { return impl_->plan; }
int Executor::rank() const { return impl_->rank; }
const std::vector<int>& Executor::local_stages() const { return impl_->local; }
bool Executor::holds_last_stage() const { return impl_->holds_last(); }
BoundarySpec Executor::output_spec(int stage) const {
  if (stage < 0 || stage >= impl_->num_stages || !impl_->specs[stage]) return {};
  return *impl_->specs[stage];
}

}  // namespace pipeplan::exec
