// The layer profiler: what one microbatch costs in each module of a
// torch::nn::Sequential, as the layer profile `pipeplan search --layers`
// reads. Profile -> search -> stages:
// @code
//   torch::nn::Sequential model(...);
//   at::Tensor sample = ...;                       // one microbatch of input
//   pipeplan::LayerProfile profile = pipeplan::exec::profile_layers(model, sample);
//   std::ofstream csv("layers.csv");
//   pipeplan::write_layer_profile(profile, csv, pipeplan::exec::profile_comment({}));
//   // $ pipeplan search -p 4 -m 8 --layers layers.csv -o plan.json
//   pipeplan::Plan plan = ...;                     // read plan.json
//   executor.set_stages(pipeplan::exec::split_sequential(model, plan));  // its partition
// @endcode
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/sequential.h>

#include <string>
#include <vector>

#include "pipeplan/profile.h"

namespace pipeplan::exec {

struct ProfileOptions {
  int warmup = 2;   ///< untimed repetitions of every measurement first
  int repeats = 5;  ///< timed repetitions; each time is their median
};

/// Profiles every child of `model` (in order) on one microbatch `input`: the
/// child's forward F (with autograd recording), its whole backward B (one
/// autograd::grad for its input and parameters, the output gradient all
/// ones), and the split backward I then W as the executor runs it (input
/// gradient keeping the graph, then the parameter gradient); times in
/// milliseconds (wall clock, synchronised on CUDA), medians of `repeats`
/// runs after `warmup`. W is recorded as its share of B in the measured
/// ratio W / (I + W), since a profile's I is B - W: 0 for a child without
/// trainable parameters, B when the child's input is not differentiable
/// (token ids). `activation` is the bytes the forward allocated that are
/// still alive once it returned (the output and what autograd saved for the
/// backward), `input` the bytes of the child's input tensor. Layer names
/// are "<child name>.<module type>". Each child's input is the previous
/// child's output on `input`; parameter gradients (.grad) are untouched,
/// and the default CPU generator is restored afterwards (dropout draws as
/// if the profiler had not run). Modules run in their current mode (train
/// or eval; BatchNorm statistics do move in train mode). Throws InputError
/// for an empty model, repeats < 1 or warmup < 0.
LayerProfile profile_layers(const torch::nn::Sequential& model, const at::Tensor& input,
                            const ProfileOptions& options = {});

/// The comment lines for write_layer_profile that say what the numbers of
/// profile_layers are (units, repetitions).
std::vector<std::string> profile_comment(const ProfileOptions& options);

/// Throws InputError unless `profile` has one layer per child of `model`
/// (a profile of another model, or of this one before a module was added,
/// would partition it wrongly).
void check_profile_matches(const LayerProfile& profile, const torch::nn::Sequential& model);

}  // namespace pipeplan::exec
