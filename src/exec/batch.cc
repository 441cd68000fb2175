// User values in and out of a step: routing inputs to the local stages that
// consume them, slicing inputs and targets into microbatches, and merging the
// last stage's outputs of a forward-only step back into one batch.
#include <ATen/ATen.h>

#include "exec/replay.h"
#include "pipeplan/error.h"

namespace pipeplan::exec {

void Executor::Impl::split_batch(const Values& inputs, const Values& targets) {
  // Which user input each given value is: all inputs, or only this rank's.
  std::vector<int> index_of;
  const std::size_t total = routes.size();
  if (routes.empty()) {
    // No routes: every input goes to stage 0 (only its rank needs them).
    for (std::size_t i = 0; i < inputs.size(); ++i) index_of.push_back(static_cast<int>(i));
  } else if (inputs.size() == total) {
    for (std::size_t i = 0; i < total; ++i) index_of.push_back(static_cast<int>(i));
  } else if (inputs.size() == local_inputs.size()) {
    index_of = local_inputs;
  } else {
    throw InputError(me() + "step() got " + std::to_string(inputs.size()) +
                     " inputs; pass every input (" + std::to_string(total) +
                     ", as routed by ExecOptions::input_stages) or only those this rank's "
                     "stages consume (" +
                     std::to_string(local_inputs.size()) +
                     (local_inputs.empty() ? "" : ": input(s) " + detail::join(local_inputs)) +
                     ")");
  }
  const bool train = !fwd_step;
  have_targets = holds_last() && !targets.empty();
  // The batch size, from the values this rank actually uses.
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
  auto consumed_here = [&](int input) {
    if (routes.empty()) return stages.owns(0);
    for (int s : routes[input])
      if (stages.owns(s)) return true;
    return false;
  };
  auto whole = [&](int input) { return !replicated.empty() && replicated[input]; };
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (consumed_here(index_of[k]) && !whole(index_of[k]))
      visit(inputs[k], "input " + std::to_string(index_of[k]));
  if (have_targets)
    for (std::size_t i = 0; i < targets.size(); ++i)
      visit(targets[i], "target " + std::to_string(i));
  // Every input a local stage consumes must be here.
  if (!routes.empty())
    for (int i : local_inputs)
      if (std::find(index_of.begin(), index_of.end(), i) == index_of.end())
        throw InputError(me() + "input " + std::to_string(i) + " feeds stage(s) " +
                         detail::join(routes[i]) + " on this rank; pass it to step() here");
  if (train && holds_last() && !stages.loss())
    throw InputError(me() + "holds the last stage but no loss function was set (set_loss)");
  step_batch = batch;
  step_batch_what = first;
  std::int64_t rows = 0;
  if (batch >= 0) {
    if (batch % num_mb != 0)
      throw InputError("a batch of " + std::to_string(batch) + " samples does not divide into " +
                       std::to_string(num_mb) + " microbatches (remainder " +
                       std::to_string(batch % num_mb) + "); use a batch size that is a " +
                       "multiple of " + std::to_string(num_mb));
    rows = batch / num_mb;
  }
  owned.assign(stages.stages().size(), std::vector<Values>(num_mb));
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const int i = index_of[k];
    const std::vector<int> to = routes.empty() ? std::vector<int>{0} : routes[i];
    for (int s : to) {
      const int li = stages.index(s);
      if (li < 0) continue;
      for (int m = 0; m < num_mb; ++m)
        owned[li][m].push_back(whole(i) ? inputs[k] : detail::slice(inputs[k], m, rows));
    }
  }
  mb_targets.assign(num_mb, {});
  if (have_targets)
    for (int m = 0; m < num_mb; ++m)
      for (const Value& v : targets) mb_targets[m].push_back(detail::slice(v, m, rows));
}

Values Executor::Impl::merged_outputs() const {
  Values merged;
  if (final_outputs.empty() || final_outputs[0].empty()) return merged;
  const std::size_t n = final_outputs[0].size();
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<at::Tensor> parts;
    std::vector<std::int64_t> ints;
    for (const Values& mb : final_outputs) {
      if (mb.size() != n)
        throw InputError(me() + "the last stage returned " + std::to_string(mb.size()) +
                         " values for one microbatch and " + std::to_string(n) + " for another");
      if (const auto* t = std::get_if<at::Tensor>(&mb[i])) parts.push_back(*t);
      else ints.push_back(std::get<std::int64_t>(mb[i]));
    }
    if (!ints.empty() && !parts.empty())
      throw InputError(me() + "the last stage's output " + std::to_string(i) +
                       " is a tensor for some microbatches and an int for others");
    if (!ints.empty()) {
      if (std::all_of(ints.begin(), ints.end(), [&](std::int64_t x) { return x == ints[0]; }))
        merged.emplace_back(ints[0]);
      else merged.emplace_back(at::tensor(ints, at::TensorOptions().dtype(at::kLong)));
    } else if (parts[0].dim() == 0) {
      merged.emplace_back(at::stack(parts));
    } else {
      merged.emplace_back(at::cat(parts, 0));
    }
  }
  return merged;
}

}  // namespace pipeplan::exec
