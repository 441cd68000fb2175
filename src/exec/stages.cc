// The stage adapters (stages.h): registered modules, their trainable
// parameters and the step's gradient sums.
#include "exec/stages.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <unordered_set>

#include "exec/boundary.h"
#include "pipeplan/error.h"

namespace pipeplan::exec::detail {

LocalStages::LocalStages(const PlanMeta& meta, int rank)
    : rank_(rank), local_(meta.stages_of(rank)) {
  local_index_.assign(meta.num_stages(), -1);
  for (std::size_t i = 0; i < local_.size(); ++i) local_index_[local_[i]] = static_cast<int>(i);
  modules_.resize(local_.size());
  trainable_.resize(local_.size());
  names_.resize(local_.size());
  may_be_unused_.resize(local_.size());
  held_.resize(local_.size());
  held_sums_.resize(local_.size());
  no_grad_.resize(local_.size());
  params_checked_.assign(local_.size(), false);
}

void LocalStages::set(int stage, StageModule module) {
  if (!owns(stage))
    throw InputError("stage " + std::to_string(stage) + " is not owned by rank " +
                     std::to_string(rank_) + " (it owns stages " + join(local_) + ")");
  if (!module.forward) throw InputError("stage " + std::to_string(stage) + " has no forward");
  if (!module.parameter_names.empty() && module.parameter_names.size() != module.parameters.size())
    throw InputError("stage " + std::to_string(stage) + " names " +
                     std::to_string(module.parameter_names.size()) + " parameters but lists " +
                     std::to_string(module.parameters.size()));
  const int li = index(stage);
  std::unordered_set<const void*> unused;
  for (const at::Tensor& p : module.unused_parameters) unused.insert(p.unsafeGetTensorImpl());
  trainable_[li].clear();
  names_[li].clear();
  may_be_unused_[li].clear();
  for (std::size_t i = 0; i < module.parameters.size(); ++i) {
    const at::Tensor& p = module.parameters[i];
    if (!p.requires_grad()) continue;
    trainable_[li].push_back(p);
    names_[li].push_back(module.parameter_names.empty() ? "#" + std::to_string(i)
                                                        : module.parameter_names[i]);
    may_be_unused_[li].push_back(unused.count(p.unsafeGetTensorImpl()) > 0);
  }
  no_grad_[li].clear();
  held_[li].assign(trainable_[li].size(), false);
  params_checked_[li] = false;
  modules_[li] = std::move(module);
}

std::optional<int> LocalStages::missing_module() const {
  for (std::size_t i = 0; i < local_.size(); ++i)
    if (!modules_[i]) return local_[i];
  return std::nullopt;
}

void LocalStages::train(bool on) {
  for (auto& m : modules_)
    if (m && m->module) m->module->train(on);
}

Values LocalStages::forward(int stage, const Values& in) const {
  return modules_[index(stage)]->forward(in);
}

std::vector<at::Tensor> LocalStages::resident(int stage) const {
  const StageModule& m = *modules_[index(stage)];
  std::vector<at::Tensor> out = m.parameters;
  if (m.module)
    for (const at::Tensor& b : m.module->buffers()) out.push_back(b);
  return out;
}

void LocalStages::check_parameters(int stage, const std::vector<at::Tensor>& roots,
                                   const std::vector<at::Tensor>& leaves) {
  const int li = index(stage);
  if (params_checked_[li]) return;
  params_checked_[li] = true;
  std::vector<at::Tensor> known = leaves;
  for (const at::Tensor& p : modules_[li]->parameters) known.push_back(p);
  at::Tensor stray = unlisted_trainable(roots, known);
  if (!stray.defined()) return;
  for (const at::Tensor& leaf : leaves)
    if (stray.is_alias_of(leaf))
      throw InputError(
          me() + "stage " + std::to_string(stage) +
          " runs on a detached copy of one of its boundary inputs (a detach().requires_grad_() "
          "of it, as a ported activation checkpoint makes): the "
          "gradient would stop there and never reach the previous stage; compute on the input "
          "itself");
  std::string shape;
  for (std::int64_t d : stray.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  throw InputError(me() + "stage " + std::to_string(stage) + " uses a tensor of shape [" + shape +
                   "] that requires grad but is not among the stage's parameters, so "
                   "it would never be trained; list it in StageModule::parameters, build the "
                   "stage with module_stage() so parameters are collected, or detach it "
                   "(requires_grad_(false)) if it is meant to stay fixed");
}

void LocalStages::begin_step(int num_microbatches) {
  const std::size_t n = local_.size();
  grad_sums_.assign(n, {});
  backward_left_.assign(n, num_microbatches);
  for (std::size_t i = 0; i < n; ++i) grad_sums_[i].resize(trainable_[i].size());
  held_sums_.assign(n, {});
  for (std::size_t i = 0; i < n; ++i) held_sums_[i].resize(trainable_[i].size());
}

void LocalStages::accumulate(int stage, const std::vector<at::Tensor>& grads, std::size_t offset) {
  std::vector<at::Tensor>& sums = grad_sums_[index(stage)];
  for (std::size_t p = 0; p < sums.size(); ++p) {
    const at::Tensor& g = grads[offset + p];
    if (!g.defined()) continue;
    if (sums[p].defined()) sums[p].add_(g);
    else sums[p] = g.detach().clone();
  }
}

// Every microbatch's weight gradient of a stage is in: add the step's
// gradient to .grad now, so observers (data-parallel averaging) can start
// while the rest of the backward runs.
bool LocalStages::weight_grads_done(int stage, double scale, bool check, int step) {
  const int li = index(stage);
  if (--backward_left_[li] != 0) return false;
  no_grad_[li].clear();
  for (std::size_t p = 0; p < trainable_[li].size(); ++p)
    if (!grad_sums_[li][p].defined() && !may_be_unused_[li][p])
      no_grad_[li].push_back(static_cast<int>(p));
  no_grad_step_ = step;
  if (check && !no_grad_[li].empty()) throw InputError(no_grad_message(li, step));
  for (std::size_t p = 0; p < trainable_[li].size(); ++p) {
    at::Tensor& sum = grad_sums_[li][p];
    if (!sum.defined()) continue;
    if (scale != 1.0) sum.mul_(scale);
    if (held_[li][p]) {
      held_sums_[li][p] = std::move(sum);
      sum = at::Tensor();
      continue;
    }
    at::Tensor& g = trainable_[li][p].mutable_grad();
    if (g.defined()) g.add_(sum);
    else g = std::move(sum);
    sum = at::Tensor();
  }
  return true;
}

namespace {
// A module's dotted name in quotes; an index name ("#2") as it is.
std::string quoted(const std::string& name) {
  return name.rfind('#', 0) == 0 ? name : "'" + name + "'";
}
}  // namespace

std::string LocalStages::no_grad_message(int li, int step) const {
  const std::vector<int>& missing = no_grad_[li];
  const at::Tensor& p = trainable_[li][missing.front()];
  std::string shape;
  for (std::int64_t d : p.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  std::string more;
  if (missing.size() > 1) more = " (and " + std::to_string(missing.size() - 1) + " more)";
  return me() + "stage " + std::to_string(local_[li]) + " parameter " +
         quoted(names_[li][missing.front()]) + " (shape [" + shape + "])" + more +
         " received no gradient from the stage's backward in training step " +
         std::to_string(step) +
         ": the stage's outputs do not depend on it (a detach(), a NoGradGuard or a recompute "
         "outside autograd cut the graph, or the forward never uses it); fix the forward, or "
         "if the parameter is really unused list it in StageModule::unused_parameters "
         "(allow_unused(stage, name) for a module stage)";
}

void LocalStages::hold(int stage, std::size_t p) { held_[index(stage)].at(p) = true; }

bool LocalStages::holds_any(int stage) const {
  const std::vector<bool>& h = held_[index(stage)];
  return std::find(h.begin(), h.end(), true) != h.end();
}

at::Tensor LocalStages::take_held(int stage, std::size_t p) {
  const int li = index(stage);
  if (held_sums_[li].empty()) return {};
  return std::move(held_sums_[li].at(p));
}

void LocalStages::check_gradients() const {
  for (std::size_t li = 0; li < local_.size(); ++li)
    if (!no_grad_[li].empty())
      throw InputError(no_grad_message(static_cast<int>(li), no_grad_step_));
}

bool LocalStages::input_may_be_unused(int stage, int position) const {
  const std::vector<int>& unused = modules_[index(stage)]->unused_inputs;
  return std::find(unused.begin(), unused.end(), position) != unused.end();
}

}  // namespace pipeplan::exec::detail
