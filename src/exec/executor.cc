// Executor: replays one rank's action list. Each (local stage, microbatch)
// has a Slot holding exactly what later actions of that plan still need, and
// it is emptied as soon as the last of them ran, so memory follows the plan.
#include "pipeplan/exec/executor.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <tuple>

#include "exec/boundary.h"
#include "pipeplan/error.h"

namespace pipeplan::exec {

using detail::Dir;

namespace {

// What a (local stage, microbatch) still holds between its actions.
struct Slot {
  bool forward_done = false, input_grad_done = false, weight_grad_done = false;
  std::vector<at::Tensor> leaves;  // differentiable boundary inputs (I/B targets)
  Values outputs;                  // forward outputs, until sent and differentiated
  at::Tensor loss;                 // last stage only
  std::vector<at::Tensor> roots, seeds;  // backward roots and their gradients (kept for W)
  std::vector<at::Tensor> in_grads;      // gradients for `leaves`, until shipped upstream
  bool in_grads_ready = false;
};

struct PostedRecv {
  std::unique_ptr<PendingOp> op;  // null for a boundary without values
  at::Tensor message;
  BoundarySpec spec;
  std::string what;
};

struct PostedSend {
  std::unique_ptr<PendingOp> op;
  std::string what;
};

}  // namespace

struct Executor::Impl {
  Plan plan;
  int rank;
  int world;
  ExecOptions opt;
  int num_stages, num_mb;
  std::vector<int> local;        // ascending
  std::vector<int> local_index;  // stage -> index into `local`, or -1
  std::vector<std::optional<StageModule>> modules;
  LossFn loss_fn;
  std::shared_ptr<Communicator> comm;
  std::vector<std::optional<BoundarySpec>> specs;  // output spec per stage
  bool discovery = true;
  bool shapes_known = false;
  bool broken = false;
  int step_index = 0;

  // Per step.
  std::vector<std::vector<Slot>> slots;    // [local index][microbatch]
  std::vector<std::vector<Values>> owned;  // [local index][microbatch]: routed inputs
  std::vector<Values> mb_targets;
  std::map<std::tuple<int, int, int>, PostedRecv> recvs;  // (dir, stage, mb)
  std::map<std::pair<int, int>, std::vector<PostedSend>> fwd_sends;  // (stage, mb)
  std::vector<PostedSend> other_sends;
  std::vector<std::vector<at::Tensor>> grad_sums;  // [local index][parameter]
  std::vector<at::Tensor> losses;

  Impl(const Plan& p, int r, int w, ExecOptions o)
      : plan(prepare_plan(p, r, w, o.transport)), rank(r), world(w), opt(std::move(o)) {
    num_stages = plan.meta.num_stages();
    num_mb = plan.meta.num_microbatches;
    local = plan.meta.stages_of(rank);
    local_index.assign(num_stages, -1);
    for (std::size_t i = 0; i < local.size(); ++i) local_index[local[i]] = static_cast<int>(i);
    modules.resize(local.size());
    for (int s : opt.input_stages)
      if (s < 0 || s >= num_stages)
        throw InputError("ExecOptions::input_stages names stage " + std::to_string(s) +
                         " but the plan has stages 0.." + std::to_string(num_stages - 1));
    specs.resize(num_stages);
    for (const auto& [s, spec] : opt.output_specs) {
      if (s < 0 || s >= num_stages - 1)
        throw InputError("ExecOptions::output_specs names stage " + std::to_string(s) +
                         ", which has no outgoing boundary");
      specs[s] = spec;
    }
    discovery = opt.reexchange_shapes;
    for (int s = 0; s + 1 < num_stages; ++s)
      discovery = discovery || (crosses_ranks(plan.meta, s) && !specs[s]);
    shapes_known = !discovery;
  }

  std::string me() const { return "rank " + std::to_string(rank) + ": "; }
  bool on_me(int stage) const { return plan.meta.rank_of(stage) == rank; }
  int last() const { return num_stages - 1; }
  bool holds_last() const { return on_me(last()); }
  std::chrono::milliseconds timeout() const { return opt.timeout; }
  int tag(Dir dir, int stage, int mb, int index) const {
    return detail::make_tag(step_index, dir, stage, mb, index, num_stages, num_mb);
  }
  std::string name(ActionType t, int stage, int mb) const { return to_string(make(t, stage, mb)); }

  Slot& slot(int stage, int mb) {
    if (stage < 0 || stage >= num_stages || local_index[stage] < 0 || mb < 0 || mb >= num_mb)
      throw InternalError(me() + "action on stage " + std::to_string(stage) + " microbatch " +
                          std::to_string(mb) + ", which this rank does not own");
    return slots[local_index[stage]][mb];
  }

  void connect(std::shared_ptr<Communicator> c) {
    if (c->size() != world)
      throw InputError(me() + "the process group has " + std::to_string(c->size()) +
                       " ranks but the executor was built for " + std::to_string(world));
    if (c->rank() != rank)
      throw InputError(me() + "the process group says this process is rank " +
                       std::to_string(c->rank()));
    const std::int64_t fp = detail::fingerprint(plan);
    const std::int64_t flags = (discovery ? 1 : 0) | (opt.reexchange_shapes ? 2 : 0) |
                               static_cast<std::int64_t>(opt.input_stages.size()) << 2;
    at::Tensor t = at::tensor(std::vector<std::int64_t>{fp, -fp, flags, -flags},
                              at::TensorOptions().dtype(at::kLong))
                       .to(c->device());
    c->allreduce_max(t, timeout());
    t = t.to(at::kCPU);
    auto at_ = [&t](int i) { return t[i].item<std::int64_t>(); };
    if (at_(0) != fp || -at_(1) != fp)
      throw InputError(me() + "the ranks were given different plans; every rank must run the "
                              "same plan");
    if (at_(2) != flags || -at_(3) != flags)
      throw InputError(me() + "the ranks were given different executor options "
                              "(output_specs coverage, reexchange_shapes or input_stages)");
    comm = std::move(c);
  }

  void check_ready() const {
    if (broken)
      throw InputError(me() + "a previous step failed mid-way; this executor cannot continue");
    if (!comm) throw InputError(me() + "connect() the executor to a process group first");
    for (std::size_t i = 0; i < local.size(); ++i)
      if (!modules[i])
        throw InputError(me() + "owns stage " + std::to_string(local[i]) +
                         " but no module was registered for it (set_stage)");
    if (holds_last() && !loss_fn)
      throw InputError(me() + "holds the last stage but no loss function was set (set_loss)");
  }

  // Routes and slices the user values; throws before any communication.
  void split_batch(const Values& inputs, const Values& targets) {
    std::vector<int> routes = opt.input_stages;
    if (routes.empty()) routes.assign(inputs.size(), 0);
    if (routes.size() != inputs.size())
      throw InputError("ExecOptions::input_stages routes " + std::to_string(routes.size()) +
                       " inputs but step() got " + std::to_string(inputs.size()));
    std::int64_t batch = -1;
    std::string first;
    auto visit = [&](const Value& v, const std::string& what) {
      const auto* t = std::get_if<at::Tensor>(&v);
      if (t == nullptr) return;
      if (!t->defined() || t->dim() == 0)
        throw InputError(what + " is a tensor without a leading batch dimension");
      if (batch < 0) {
        batch = t->size(0);
        first = what;
      } else if (t->size(0) != batch) {
        throw InputError(what + " has " + std::to_string(t->size(0)) + " rows but " + first +
                         " has " + std::to_string(batch) +
                         "; every tensor input and target must share the batch dimension");
      }
    };
    for (std::size_t i = 0; i < inputs.size(); ++i) visit(inputs[i], "input " + std::to_string(i));
    for (std::size_t i = 0; i < targets.size(); ++i)
      visit(targets[i], "target " + std::to_string(i));
    if (batch < 0)
      throw InputError("step() needs at least one tensor input or target to split into "
                       "microbatches");
    if (batch % num_mb != 0)
      throw InputError("a batch of " + std::to_string(batch) + " samples does not divide into " +
                       std::to_string(num_mb) + " microbatches (remainder " +
                       std::to_string(batch % num_mb) + "); use a batch size that is a " +
                       "multiple of " + std::to_string(num_mb));
    const std::int64_t rows = batch / num_mb;
    owned.assign(local.size(), std::vector<Values>(num_mb));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      int li = local_index[routes[i]];
      if (li < 0) continue;
      for (int m = 0; m < num_mb; ++m) owned[li][m].push_back(detail::slice(inputs[i], m, rows));
    }
    mb_targets.assign(num_mb, {});
    if (holds_last())
      for (int m = 0; m < num_mb; ++m)
        for (const Value& v : targets) mb_targets[m].push_back(detail::slice(v, m, rows));
  }

  // --- shape discovery: one no-grad forward of microbatch 0, stage by stage ---

  Values probe_receive(int from_stage) {
    const int peer = plan.meta.rank_of(from_stage);
    const std::string what = me() + "receiving the shapes of stage " +
                             std::to_string(from_stage) + "'s outputs from rank " +
                             std::to_string(peer);
    at::Tensor meta = at::empty({detail::kMetaLength},
                                at::TensorOptions().dtype(at::kLong).device(comm->device()));
    comm->irecv(meta, peer, tag(Dir::Shape, from_stage, 0, 1))->wait(timeout(), what);
    BoundarySpec spec = detail::decode_spec(meta);
    at::Tensor message = detail::empty_message(spec, comm->device());
    if (!spec.empty())
      comm->irecv(message, peer, tag(Dir::Shape, from_stage, 0, 0))->wait(timeout(), what);
    Values values = detail::unpack(message, spec);
    specs[from_stage] = std::move(spec);
    return values;
  }

  void probe_send(int stage, const Values& out) {
    const int peer = plan.meta.rank_of(stage + 1);
    const std::string what = me() + "sending the shapes of stage " + std::to_string(stage) +
                             "'s outputs to rank " + std::to_string(peer);
    std::vector<std::unique_ptr<PendingOp>> ops;
    ops.push_back(comm->isend(detail::encode_spec(*specs[stage], comm->device()), peer,
                              tag(Dir::Shape, stage, 0, 1)));
    if (!specs[stage]->empty())
      ops.push_back(
          comm->isend(pack(stage, out, *specs[stage]), peer, tag(Dir::Shape, stage, 0, 0)));
    for (auto& op : ops) op->wait(timeout(), what);
  }

  // Ranks visit their stages in ascending order and stage s only waits for
  // s-1, so this chain cannot deadlock under any transport.
  void discover_shapes() {
    std::map<int, Values> out_of;
    for (int s : local) {
      Values in;
      if (s > 0) in = on_me(s - 1) ? out_of.at(s - 1) : probe_receive(s - 1);
      if (s == last()) break;  // its outputs cross no boundary
      for (const Value& v : owned[local_index[s]][0]) in.push_back(v);
      Values out;
      {
        c10::NoGradGuard no_grad;
        out = modules[local_index[s]]->forward(in);
      }
      specs[s] = detail::spec_of(out, s);
      if (!on_me(s + 1)) probe_send(s, out);
      out_of[s] = std::move(out);
    }
    shapes_known = true;
  }

  at::Tensor pack(int stage, const Values& values, const BoundarySpec& spec) const {
    try {
      return detail::pack(values, spec, comm->device());
    } catch (const InputError& e) {
      throw InputError(me() + "stage " + std::to_string(stage) + ": " + e.what());
    }
  }

  // --- communication actions: one message per boundary and microbatch ---

  void post_recv(Dir dir, int stage, int mb) {
    const bool fwd = dir == Dir::Forward;
    const int from = fwd ? stage - 1 : stage + 1;
    const int peer = plan.meta.rank_of(from);
    const std::optional<BoundarySpec>& known = specs[fwd ? from : stage];
    if (!known)
      throw InternalError(me() + "no boundary shapes known for stage " + std::to_string(stage));
    PostedRecv r;
    r.spec = fwd ? *known : detail::gradient_spec(*known);
    r.what = me() + name(fwd ? ActionType::RecvF : ActionType::RecvB, stage, mb) +
             " from rank " + std::to_string(peer);
    r.message = detail::empty_message(r.spec, comm->device());
    if (!r.spec.empty()) r.op = comm->irecv(r.message, peer, tag(dir, from, mb, 0));
    recvs[{static_cast<int>(dir), stage, mb}] = std::move(r);
  }

  Values complete_recv(Dir dir, int stage, int mb) {
    auto it = recvs.find({static_cast<int>(dir), stage, mb});
    if (it == recvs.end())
      throw InternalError(me() + "no receive posted for stage " + std::to_string(stage) +
                          " microbatch " + std::to_string(mb) + " before its consumer");
    PostedRecv r = std::move(it->second);
    recvs.erase(it);
    if (r.op) r.op->wait(timeout(), r.what);
    return detail::unpack(r.message, r.spec);
  }

  void send_forward(int stage, int mb) {
    Slot& sl = slot(stage, mb);
    if (!sl.forward_done) throw InternalError(me() + "SEND_F before its F");
    BoundarySpec now = detail::spec_of(sl.outputs, stage);
    if (now != *specs[stage])
      throw InputError(me() + "stage " + std::to_string(stage) + " now returns [" +
                       to_string(now) + "] but its boundary was set up as [" +
                       to_string(*specs[stage]) +
                       "]; set ExecOptions::reexchange_shapes for shapes that change");
    if (now.empty()) return;
    const int peer = plan.meta.rank_of(stage + 1);
    fwd_sends[{stage, mb}].push_back(
        {comm->isend(pack(stage, sl.outputs, now), peer, tag(Dir::Forward, stage, mb, 0)),
         me() + name(ActionType::SendF, stage, mb) + " to rank " + std::to_string(peer)});
  }

  void send_backward(int stage, int mb) {
    Slot& sl = slot(stage, mb);
    if (!sl.in_grads_ready) throw InternalError(me() + "SEND_B before its B/I");
    const int peer = plan.meta.rank_of(stage - 1);
    Values grads(sl.in_grads.begin(), sl.in_grads.end());
    BoundarySpec spec = detail::spec_of(grads, stage);
    if (!spec.empty())
      other_sends.push_back(
          {comm->isend(pack(stage, grads, spec), peer, tag(Dir::Backward, stage, mb, 0)),
           me() + name(ActionType::SendB, stage, mb) + " to rank " + std::to_string(peer)});
    sl.in_grads.clear();
    sl.in_grads_ready = false;
  }

  // The gradient's arrival proves the peer consumed this microbatch's
  // activations, so those sends are complete and their buffers can go.
  void release_forward_sends(int stage, int mb) {
    auto it = fwd_sends.find({stage, mb});
    if (it == fwd_sends.end()) return;
    for (auto& s : it->second) s.op->wait(timeout(), s.what);
    fwd_sends.erase(it);
  }

  // --- compute actions ---

  void forward(int stage, int mb) {
    Slot& sl = slot(stage, mb);
    if (sl.forward_done) throw InternalError(me() + "second F of one microbatch");
    Values in;
    if (stage > 0) {
      Values boundary;
      if (on_me(stage - 1)) {
        Slot& prev = slot(stage - 1, mb);
        if (!prev.forward_done) throw InternalError(me() + "F before the previous stage's F");
        boundary = prev.outputs;
      } else {
        boundary = complete_recv(Dir::Forward, stage, mb);
      }
      // Each stage differentiates from its own leaves, so a boundary is the
      // same whether it crossed ranks or not.
      for (const Value& v : boundary) {
        if (detail::is_differentiable(v)) {
          at::Tensor leaf = std::get<at::Tensor>(v).detach().requires_grad_(true);
          sl.leaves.push_back(leaf);
          in.push_back(leaf);
        } else {
          in.push_back(v);
        }
      }
    }
    for (const Value& v : owned[local_index[stage]][mb]) in.push_back(v);
    Values out;
    {
      c10::AutoGradMode grad_on(true);
      out = modules[local_index[stage]]->forward(in);
      if (stage == last()) {
        at::Tensor loss = loss_fn(out, mb_targets[mb]);
        if (!loss.defined() || loss.numel() != 1 || !loss.is_floating_point())
          throw InputError("the loss function must return a one-element floating tensor");
        sl.loss = loss.reshape({});
        losses[mb] = sl.loss.detach();
        out.clear();
      }
    }
    sl.outputs = std::move(out);
    sl.forward_done = true;
  }

  std::vector<at::Tensor> differentiate(const Slot& sl, const std::vector<at::Tensor>& targets,
                                        bool keep_graph) {
    if (sl.roots.empty() || targets.empty()) return std::vector<at::Tensor>(targets.size());
    return torch::autograd::grad(sl.roots, targets, sl.seeds, keep_graph,
                                 /*create_graph=*/false, /*allow_unused=*/true);
  }

  void accumulate(int li, const std::vector<at::Tensor>& grads, std::size_t offset) {
    const auto& params = modules[li]->parameters;
    std::size_t k = offset;
    for (std::size_t p = 0; p < params.size(); ++p) {
      if (!params[p].requires_grad()) continue;
      const at::Tensor& g = grads[k++];
      if (!g.defined()) continue;
      at::Tensor& sum = grad_sums[li][p];
      sum = sum.defined() ? sum.add(g) : g.detach().clone();
    }
  }

  std::vector<at::Tensor> trainable(int li) const {
    std::vector<at::Tensor> out;
    for (const at::Tensor& p : modules[li]->parameters)
      if (p.requires_grad()) out.push_back(p);
    return out;
  }

  // B (full) or I (input gradient only, graph kept for the W).
  void backward(int stage, int mb, bool full) {
    Slot& sl = slot(stage, mb);
    if (!sl.forward_done || sl.input_grad_done)
      throw InternalError(me() + "B/I out of order for " + name(ActionType::B, stage, mb));
    if (stage == last()) {
      sl.roots = {sl.loss};
      sl.seeds = {at::ones_like(sl.loss)};
    } else {
      std::vector<at::Tensor> grads;
      if (on_me(stage + 1)) {
        Slot& next = slot(stage + 1, mb);
        if (!next.in_grads_ready) throw InternalError(me() + "B before the next stage's B");
        grads = std::move(next.in_grads);
        next.in_grads.clear();
        next.in_grads_ready = false;
      } else {
        for (Value& v : complete_recv(Dir::Backward, stage, mb))
          grads.push_back(std::get<at::Tensor>(v));
        release_forward_sends(stage, mb);
      }
      std::size_t k = 0;
      for (const Value& v : sl.outputs) {
        if (!detail::is_differentiable(v)) continue;
        const at::Tensor& out = std::get<at::Tensor>(v);
        const at::Tensor& g = grads.at(k++);
        if (out.requires_grad()) {
          sl.roots.push_back(out);
          sl.seeds.push_back(g);
        }
      }
    }
    const int li = local_index[stage];
    std::vector<at::Tensor> targets = sl.leaves;
    if (full)
      for (const at::Tensor& p : trainable(li)) targets.push_back(p);
    std::vector<at::Tensor> grads = differentiate(sl, targets, /*keep_graph=*/!full);
    sl.in_grads.clear();
    for (std::size_t i = 0; i < sl.leaves.size(); ++i)
      sl.in_grads.push_back(grads[i].defined() ? grads[i] : at::zeros_like(sl.leaves[i]));
    sl.in_grads_ready = stage > 0;
    sl.input_grad_done = true;
    sl.outputs.clear();
    sl.leaves.clear();
    if (full) {
      accumulate(li, grads, sl.in_grads.size());
      drop_graph(sl);
    }
  }

  void weight(int stage, int mb) {
    Slot& sl = slot(stage, mb);
    if (!sl.input_grad_done || sl.weight_grad_done)
      throw InternalError(me() + "W without its I for " + name(ActionType::W, stage, mb));
    const int li = local_index[stage];
    accumulate(li, differentiate(sl, trainable(li), /*keep_graph=*/false), 0);
    drop_graph(sl);
  }

  static void drop_graph(Slot& sl) {
    sl.roots.clear();
    sl.seeds.clear();
    sl.loss = at::Tensor();
    sl.weight_grad_done = true;
  }

  void run(const Action& a) {
    switch (a.type) {
      case ActionType::F: forward(a.stage, a.microbatch); break;
      case ActionType::B: backward(a.stage, a.microbatch, true); break;
      case ActionType::I: backward(a.stage, a.microbatch, false); break;
      case ActionType::W: weight(a.stage, a.microbatch); break;
      case ActionType::SendF: send_forward(a.stage, a.microbatch); break;
      case ActionType::RecvF: post_recv(Dir::Forward, a.stage, a.microbatch); break;
      case ActionType::SendB: send_backward(a.stage, a.microbatch); break;
      case ActionType::RecvB: post_recv(Dir::Backward, a.stage, a.microbatch); break;
      case ActionType::OverlapFB:
        // One thread: the pair runs back to back, forward first.
        forward(a.stage, a.microbatch);
        backward(a.sub_stage, a.sub_microbatch, true);
        break;
      default: break;  // UNSHARD/RESHARD/REDUCE_GRAD: nothing is sharded here
    }
  }

  std::optional<double> step(const Values& inputs, const Values& targets) {
    check_ready();
    split_batch(inputs, targets);
    broken = true;  // until the step completes: peers would be left mid-step
    if (!shapes_known || opt.reexchange_shapes) discover_shapes();
    slots.assign(local.size(), std::vector<Slot>(num_mb));
    grad_sums.assign(local.size(), {});
    for (std::size_t i = 0; i < local.size(); ++i)
      grad_sums[i].resize(modules[i]->parameters.size());
    losses.assign(num_mb, at::Tensor());
    for (const Action& a : plan.ranks[rank]) run(a);
    for (auto& [key, sends] : fwd_sends)
      for (auto& s : sends) s.op->wait(timeout(), s.what);
    fwd_sends.clear();
    for (auto& s : other_sends) s.op->wait(timeout(), s.what);
    other_sends.clear();
    if (!recvs.empty()) throw InternalError(me() + "a posted receive was never consumed");
    for (std::size_t li = 0; li < local.size(); ++li) {
      for (int m = 0; m < num_mb; ++m)
        if (!slots[li][m].weight_grad_done)
          throw InternalError(me() + "stage " + std::to_string(local[li]) + " microbatch " +
                              std::to_string(m) + " never finished its backward");
      const auto& params = modules[li]->parameters;
      for (std::size_t p = 0; p < params.size(); ++p) {
        if (!grad_sums[li][p].defined()) continue;
        at::Tensor mean = grad_sums[li][p].div(num_mb);
        at::Tensor& g = params[p].mutable_grad();
        if (g.defined())
          g.add_(mean);
        else
          g = mean;
      }
    }
    slots.clear();
    grad_sums.clear();
    owned.clear();
    mb_targets.clear();
    std::optional<double> loss;
    if (holds_last()) loss = at::stack(losses).mean().item<double>();
    losses.clear();
    ++step_index;
    broken = false;
    return loss;
  }
};

Executor::Executor(const Plan& plan, int rank, int world_size, ExecOptions options)
    : impl_(std::make_unique<Impl>(plan, rank, world_size, std::move(options))) {}
Executor::~Executor() = default;
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;

void Executor::set_stage(int stage, StageModule module) {
  if (stage < 0 || stage >= impl_->num_stages || impl_->local_index[stage] < 0)
    throw InputError("stage " + std::to_string(stage) + " is not owned by rank " +
                     std::to_string(impl_->rank) + " (it owns stages " +
                     detail::join(impl_->local) + ")");
  if (!module.forward) throw InputError("stage " + std::to_string(stage) + " has no forward");
  impl_->modules[impl_->local_index[stage]] = std::move(module);
}

void Executor::set_loss(LossFn loss) { impl_->loss_fn = std::move(loss); }
void Executor::connect(std::shared_ptr<Communicator> comm) { impl_->connect(std::move(comm)); }
std::optional<double> Executor::step(const Values& inputs, const Values& targets) {
  return impl_->step(inputs, targets);
}
const Plan& Executor::plan() const { return impl_->plan; }
int Executor::rank() const { return impl_->rank; }
const std::vector<int>& Executor::local_stages() const { return impl_->local; }
bool Executor::holds_last_stage() const { return impl_->holds_last(); }
BoundarySpec Executor::output_spec(int stage) const {
  if (stage < 0 || stage >= impl_->num_stages || !impl_->specs[stage]) return {};
  return *impl_->specs[stage];
}

}  // namespace pipeplan::exec
