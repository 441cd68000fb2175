// Stages from torch::nn modules: parameters (with submodules) are collected
// from the module, so none can be forgotten, and Executor::train()/eval()
// reach the module. A helper splits a torch::nn::Sequential into stages.
//
// Identical initialisation, whichever rank owns a stage: build the whole
// model on every rank after seeding the generator the same way, split it,
// and register only the local stages:
// @code
//   torch::manual_seed(0);                       // same weights on every rank
//   torch::nn::Sequential model(...);            // the whole model, everywhere
//   auto stages = pipeplan::exec::split_sequential(model, plan.meta.num_stages());
//   executor.set_stages(stages);                 // keeps this rank's stages only
// @endcode
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "pipeplan/exec/executor.h"

namespace pipeplan::exec {

namespace detail {
/// The one tensor a single-tensor module stage takes; InputError otherwise.
const at::Tensor& single_tensor(const Values& inputs);
}  // namespace detail

/// A stage running `forward` over `module`: its parameters are all of
/// module->parameters() (submodules included, in registration order).
StageModule module_stage(std::shared_ptr<torch::nn::Module> module, StageForward forward);

/// A stage from a module whose forward maps one tensor to one tensor
/// (torch::nn::Linear, a Sequential of such modules, your own Impl).
template <class M, std::enable_if_t<std::is_base_of_v<torch::nn::Module, M>, int> = 0>
StageModule module_stage(std::shared_ptr<M> module) {
  std::shared_ptr<torch::nn::Module> base = module;
  return module_stage(std::move(base), [module](const Values& in) -> Values {
    return {module->forward(detail::single_tensor(in))};
  });
}
/// The same for a module holder (`torch::nn::Linear lin(8, 8); module_stage(lin)`).
template <class M>
StageModule module_stage(const torch::nn::ModuleHolder<M>& holder) {
  return module_stage(holder.ptr());
}

/// Splits `model` into stages of consecutive children: stage k holds children
/// [split_points[k-1], split_points[k]) (split_points ascending, strictly
/// inside (0, model->size())). The stages share the children with `model`.
std::vector<StageModule> split_sequential(const torch::nn::Sequential& model,
                                          const std::vector<std::size_t>& split_points);
/// Balanced by count: `num_stages` runs of children whose lengths differ by at
/// most one (the longer ones first): split_points(balanced_partition(size,
/// num_stages)) (pipeplan/exec/build.h, the one home of the rule).
/// InputError when there are fewer children.
std::vector<StageModule> split_sequential(const torch::nn::Sequential& model, int num_stages);

/// Splits `model` as `plan` says: by the layer counts of its recorded
/// partition (plan.meta.partition, as `pipeplan search` writes it: stage s
/// holds the next partition[s] children), else balanced by count as above.
/// InputError when the partition does not cover exactly the model's children
/// (a plan searched on another model's profile).
std::vector<StageModule> split_sequential(const torch::nn::Sequential& model, const Plan& plan);

/// The split points (cut before these children) of a partition's layer counts.
std::vector<std::size_t> split_points(const std::vector<int>& partition);

/// The input routes of a partition: `consumers[k]` lists the layers (children,
/// from 0) that read user input k; its route is the stages holding them, in
/// order without repeats (ExecOptions::input_stages). InputError for a layer
/// outside the partition or an input no layer reads.
std::vector<InputRoute> input_routes(const std::vector<int>& partition,
                                     const std::vector<std::vector<int>>& consumers);

/// Opts the parameter named `parameter_name` (a dotted name of the stage's
/// module, as module_stage() records them) out of the no-gradient check: it
/// may receive no gradient in a step. InputError for an unknown name.
void allow_unused(StageModule& stage, const std::string& parameter_name);

/// Throws InputError naming the first trainable parameter of `model` (by its
/// dotted name) that no stage lists: it would silently stay untrained.
void check_parameters_covered(const torch::nn::Module& model,
                              const std::vector<StageModule>& stages);

}  // namespace pipeplan::exec
