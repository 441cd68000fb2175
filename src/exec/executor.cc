// Executor: setup, the step (the replay loop with its hooks) and the public
// face. What each action does is in actions.cc.
#include "pipeplan/exec/executor.h"

#include <ATen/ATen.h>

#include <limits>
#include <optional>
#include <unordered_set>

#include "exec/replay.h"
#include "pipeplan/error.h"
#include "pipeplan/exec/build.h"

namespace pipeplan::exec {

Executor::Impl::Impl(const Plan& p, int r, int w, ExecOptions o)
    : plan(prepare_plan(p, r, w, o.transport)),
      rank(r),
      world(w),
      opt(std::move(o)),
      num_stages(plan.meta.num_stages()),
      num_mb(plan.meta.num_microbatches),
      transfers(plan.meta, rank, opt),
      stages(plan.meta, rank),
      ties(plan.meta, rank, opt.ties) {
  // Its stage adapters feed every microbatch at stage 0 and take every loss at
  // the last stage (docs/format.md, "Microbatch routes").
  if (plan.meta.has_routes())
    throw InputError("the executor runs plans whose microbatches cross every stage; this " +
                     plan.meta.schedule +
                     " plan routes microbatches over part of the stages (plan, verify and "
                     "simulate it; run it with DeepSeek's DualPipe)");
  for (const InputRoute& route : opt.input_stages) {
    if (route.stages.empty())
      throw InputError("ExecOptions::input_stages: an input routed to no stage");
    for (int s : route.stages)
      if (s < 0 || s >= num_stages)
        throw InputError("ExecOptions::input_stages names stage " + std::to_string(s) +
                         " but the plan has stages 0.." + std::to_string(num_stages - 1));
    routes.push_back(route.stages);
    replicated.push_back(route.replicated);
  }
  for (std::size_t i = 0; i < routes.size(); ++i)
    for (int s : routes[i])
      if (stages.owns(s)) {
        local_inputs.push_back(static_cast<int>(i));
        break;
      }
  memory = detail::MemoryPlan(plan.ranks[rank], stages.stages(), num_mb);
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
  for (std::size_t i = 0; i < routes.size(); ++i)
    options += "[" + detail::join(routes[i]) + (replicated[i] ? "]r" : "]");
  for (const auto& [s, spec] : opt.output_specs)
    options += std::to_string(s) + ":" + to_string(spec) + ";";
  options += ties.describe();
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
                     "reexchange_shapes, input_stages, loss_reduction, "
                     "loss_on_every_rank or ties); give every rank the same");
  comm = std::move(c);
  transfers.use(comm.get());
  closed = false;
}

void Executor::Impl::check_ready(bool training) const {
  if (broken)
    throw InputError(me() + "a previous step failed mid-way; this executor cannot continue");
  if (closed) throw InputError(me() + "the executor was shut down");
  if (!comm) throw InputError(me() + "connect() the executor to a process group first");
  if (const std::optional<int> missing = stages.missing_module())
    throw InputError(me() + "owns stage " + std::to_string(*missing) +
                     " but no module was registered for it (set_stage)");
  if (training && holds_last() && !stages.loss())
    throw InputError(me() + "holds the last stage but no loss function was set (set_loss)");
}

std::string Executor::Impl::unprefixed(const std::exception& e) const {
  std::string what = detail::message_of(e);
  if (what.rfind(me(), 0) == 0) what.erase(0, me().size());
  return what;
}

// Any error of an action (a stage's forward, the loss, a transfer) says
// where it happened: rank, stage, microbatch and action. Its type is kept
// (a torch error in user code becomes an InputError).
template <class F>
void Executor::Impl::in_context(const std::string& where, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    const std::string what = unprefixed(e);
    const std::string ctx = me() + where + ": ";
    if (dynamic_cast<const CommError*>(&e) != nullptr) throw CommError(ctx + what);
    if (dynamic_cast<const InternalError*>(&e) != nullptr) throw InternalError(ctx + what);
    if (dynamic_cast<const PlanRejected*>(&e) != nullptr) throw;
    throw InputError(ctx + what);
  }
}

namespace {

std::string action_context(const Action& a) {
  return "stage " + std::to_string(a.stage) + ", microbatch " + std::to_string(a.microbatch) +
         ", action " + to_string(a);
}

// A group's own steps (its shape headers, its wait) name every member.
std::string group_context(const Action* members, std::size_t n) {
  std::string cell;
  append_cell(cell, members, n);
  return "stage " + std::to_string(members[0].stage) + ", group " + cell;
}

}  // namespace

void Executor::Impl::run_in_context(const Action& a) {
  in_context(action_context(a), [&] { run_action(a); });
}

// The hooks cost nothing without observers: no clock, no event.
// Cell by cell: an action, or a BATCH_P2P group.
void Executor::Impl::run_program(const std::vector<Action>& program) {
  for (std::size_t i = 0; i < program.size();) {
    const std::size_t n = cell_size(program, i);
    if (n > 1 || program[i].waited) run_group(program, i, n);  // a group of one too
    else run_observed(program, i);
    i += n;
  }
}

// One action, seen by the hooks when anything watches.
void Executor::Impl::run_observed(const std::vector<Action>& program, std::size_t i) {
  if (!hooks.watching()) {
    run_in_context(program[i]);
    return;
  }
  Watched w = enter(program, i);
  run_in_context(program[i]);
  ran(w);
  leave(w);
}

// The hooks' side of an action: on_entry, what it moved, on_exit with the
// time it was blocked on peers (Transfers counts every wait while watched).
Executor::Impl::Watched Executor::Impl::enter(const std::vector<Action>& program, std::size_t i) {
  Watched w;
  ActionEvent& e = w.event;
  e.rank = rank;
  e.step = step_index;
  e.forward_only = fwd_step;
  e.action = program[i];
  e.index = i;
  e.start = e.end = Clock::now();
  hooks.entry(e);
  w.waited_before = transfers.waited();
  return w;
}

void Executor::Impl::ran(Watched& w) {
  const ActionType t = w.event.action.type;
  if (is_comm(t)) w.event.bytes = transfers.last_bytes();
  if (t == ActionType::Offload || t == ActionType::Reload) w.event.bytes = last_moved;
}

void Executor::Impl::leave(Watched& w) {
  w.event.end = Clock::now();
  w.event.wait = transfers.waited() - w.waited_before;
  hooks.exit(w.event);
}

// A BATCH_P2P group: its members posted as one batch (each seen by the hooks
// as its own action), then waited for together; the rank goes on only when
// the group ended (transfer_groups.cc). Watched, the last member's on_exit
// comes after the group's wait, which is that member's `wait`.
void Executor::Impl::run_group(const std::vector<Action>& program, std::size_t first,
                               std::size_t n) {
  const Action* members = program.data() + first;
  const auto outputs = [this](int stage, int mb) -> const Values& {
    return slot(stage, mb).outputs;
  };
  if (comm->backend() == Backend::Nccl)
    in_context(group_context(members, n),
               [&] { transfers.exchange_group_headers(members, n, outputs); });
  const std::size_t last_member = first + n - 1;
  std::optional<Watched> last_seen;
  transfers.begin_group();
  try {
    for (std::size_t k = first; k < last_member; ++k) run_observed(program, k);
    if (hooks.watching()) last_seen = enter(program, last_member);
    run_in_context(program[last_member]);
    if (last_seen) ran(*last_seen);
  } catch (...) {
    transfers.end_group();
    throw;
  }
  in_context(group_context(members, n), [&] {
    transfers.end_group();
    transfers.await_group(members, n);
  });
  if (last_seen) leave(*last_seen);
}

StepResult Executor::Impl::run(const Values& inputs, const Values& targets, bool forward_only) {
  // Even an error found before communicating may be this rank's alone, with
  // its peers already waiting in the step: shutdown() must not wait for them.
  last_step_failed = true;
  try {
    StepResult r = run_step(inputs, targets, forward_only);
    last_step_failed = false;
    return r;
  } catch (const CommError& e) {
    // A peer's failure seen from here: say where it started, when known.
    if (!comm) throw;
    // Read first: rank 0 keeps the store up until every peer reported.
    const std::string other = comm->reported_failure();
    comm->report_failure(unprefixed(e), /*origin=*/false);
    if (other.empty()) throw;
    throw CommError(std::string(e.what()) + "; " + other);
  } catch (const std::exception& e) {
    if (comm) comm->report_failure(unprefixed(e), /*origin=*/true);
    throw;
  }
}

StepResult Executor::Impl::run_step(const Values& inputs, const Values& targets,
                                    bool forward_only) {
  fwd_step = forward_only || plan_forward_only;
  check_ready(!fwd_step);
  if (fwd_step) prove_forward_projection();
  split_batch(inputs, targets);
  broken = true;  // until the step completes: peers would be left mid-step
  check_batch();
  if (!ties.empty() && !ties.checked()) ties.check_identical(*comm, stages, timeout());
  begin_step();
  transfers.time_waits(hooks.watching());
  hooks.step_begin(step_index, fwd_step);
  run_program(fwd_step ? fwd_program : plan.ranks[rank]);
  finish_step();
  hooks.step_end(step_index, fwd_step);
  StepResult result = step_result();
  slots.clear();
  stages.end_step();
  owned.clear();
  mb_targets.clear();
  losses.clear();
  final_outputs.clear();
  ++step_index;
  if (!fwd_step) ++training_steps;
  broken = false;
  return result;
}

// Every rank's sliced inputs and targets must share one batch size, also
// across ranks (a rank whose only sliced input is a wrong one cannot tell
// alone). One allreduce on the first step and on every step that learns
// shapes again (reexchange_shapes), the steps where the batch may change; on
// the others each rank compares its batch with the agreed one, without
// communicating. A world of one has nothing to compare.
void Executor::Impl::check_batch() {
  const bool agree = agreed_batch < 0 || opt.reexchange_shapes;
  if (world == 1 || (!agree && step_batch < 0)) return;
  if (!agree) {
    if (step_batch != agreed_batch)
      throw InputError(me() + step_batch_what + " has " + std::to_string(step_batch) +
                       " rows but the batch of the first step had " + std::to_string(agreed_batch) +
                       " samples; a batch size that changes between steps needs "
                       "ExecOptions::reexchange_shapes");
    return;
  }
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();
  const bool here = step_batch >= 0;
  at::Tensor t =
      at::tensor(std::vector<std::int64_t>{here ? step_batch : kNone, here ? -step_batch : kNone},
                 at::TensorOptions().dtype(at::kLong))
          .to(comm->device());
  comm->allreduce_max(t, timeout());
  t = t.to(at::kCPU);
  const std::int64_t most = t[0].item<std::int64_t>(), neg_least = t[1].item<std::int64_t>();
  if (most == kNone) return;  // no rank slices anything
  if (most != -neg_least)
    throw InputError(me() + "the ranks were given different batch sizes (between " +
                     std::to_string(-neg_least) + " and " + std::to_string(most) + " samples; " +
                     (step_batch < 0
                          ? std::string("this rank slices no input")
                          : "here " + step_batch_what + " has " + std::to_string(step_batch)) +
                     "); every rank's sliced inputs and targets must share the batch dimension");
  agreed_batch = most;
}

void Executor::Impl::begin_step() {
  slots.assign(stages.stages().size(), std::vector<detail::Slot>(num_mb));
  stages.begin_step(num_mb);
  losses.assign(num_mb, at::Tensor());
  final_outputs.assign(fwd_step && holds_last() ? num_mb : 0, {});
  transfers.begin_step(step_index);
}

// Every send completed, every receive consumed, every microbatch done.
void Executor::Impl::finish_step() {
  transfers.finish_step();
  const std::vector<int>& local = stages.stages();
  for (std::size_t li = 0; li < local.size(); ++li)
    for (int m = 0; m < num_mb; ++m) {
      const detail::Slot& sl = slots[li][m];
      if (!sl.forward_done || (!fwd_step && !sl.weight_grad_done))
        throw InternalError(me() + "stage " + std::to_string(local[li]) + " microbatch " +
                            std::to_string(m) + " never finished its " +
                            (sl.forward_done ? "backward" : "forward"));
    }
  if (fwd_step) return;
  if (!ties.empty()) ties.reduce(*comm, stages, timeout());
  for (int s : ready_after_ties) hooks.stage_grads_ready(s, stages.trainable(s));
  ready_after_ties.clear();
}

// The step's loss (on every rank with loss_on_every_rank) and, forward-only,
// the last stage's outputs.
StepResult Executor::Impl::step_result() {
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
  const std::map<std::string, at::Tensor> tied = module.tied;
  impl_->stages.set(stage, std::move(module));
  impl_->ties.attach(stage, tied, impl_->stages);
}

void Executor::set_stages(const std::vector<StageModule>& all) {
  if (static_cast<int>(all.size()) != impl_->num_stages)
    throw InputError("set_stages: got " + std::to_string(all.size()) + " stages but the plan has " +
                     std::to_string(impl_->num_stages));
  for (int s : impl_->stages.stages()) set_stage(s, all[s]);
}

void Executor::set_stages(const StageFactory& factory, std::uint64_t seed) {
  for (int s : impl_->stages.stages()) set_stage(s, build_stage(factory, s, seed));
}

void Executor::set_loss(LossFn loss) { impl_->stages.set_loss(std::move(loss)); }
void Executor::connect(std::shared_ptr<Communicator> comm) { impl_->connect(std::move(comm)); }

void Executor::add_observer(std::shared_ptr<Observer> observer) {
  impl_->hooks.add(std::move(observer), impl_->plan, impl_->rank);
}

void Executor::remove_observer(const std::shared_ptr<Observer>& observer) {
  impl_->hooks.remove(observer);
}

void Executor::set_handler(ActionType type, PassThroughHandler handler) {
  impl_->hooks.set_handler(type, std::move(handler));
}

void Executor::train(bool on) { impl_->stages.train(on); }

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

void Executor::check_gradients() const { impl_->stages.check_gradients(); }
bool Executor::forward_only_plan() const { return impl_->plan_forward_only; }
const Plan& Executor::plan() const { return impl_->plan; }
int Executor::rank() const { return impl_->rank; }
const std::vector<int>& Executor::local_stages() const { return impl_->stages.stages(); }
std::vector<at::Tensor> Executor::local_parameters() const {
  std::vector<at::Tensor> all;
  for (NamedParameter& p : named_parameters()) all.push_back(std::move(p.tensor));
  return all;
}
std::vector<NamedParameter> Executor::named_parameters() const {
  std::vector<NamedParameter> all;
  std::unordered_set<const void*> seen;
  for (int s : impl_->stages.stages()) {
    if (!impl_->stages.registered(s)) continue;
    const std::vector<at::Tensor>& params = impl_->stages.trainable(s);
    const std::vector<std::string>& names = impl_->stages.trainable_names(s);
    for (std::size_t i = 0; i < params.size(); ++i)
      if (seen.insert(params[i].unsafeGetTensorImpl()).second)
        all.push_back({s, names[i], params[i]});
  }
  return all;
}
bool Executor::holds_last_stage() const { return impl_->holds_last(); }
BoundarySpec Executor::output_spec(int stage) const {
  if (stage < 0 || stage >= impl_->num_stages || !impl_->transfers.spec(stage)) return {};
  return *impl_->transfers.spec(stage);
}

}  // namespace pipeplan::exec
