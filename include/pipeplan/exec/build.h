// Local-only construction: each rank builds only the stages it owns, and a
// stage gets the same weights whichever rank builds it, and the same as in
// the whole model built in one process.
//
// The rule: a part of the model (a stage, a layer) is built with torch's
// default generator seeded from (the model's seed, the part's index) alone,
// so its initial weights do not depend on what was built before it or on
// which rank builds it.
// @code
//   // Layer i of a sequential model, built from scratch.
//   pipeplan::exec::LayerFactory layer = [](int i) -> torch::nn::AnyModule { ... };
//   // Only this rank's stages are built (layer by layer, each from its own seed).
//   executor.set_stages(pipeplan::exec::sequential_stages(layer, 14, plan.meta.num_stages(), 0));
//   torch::optim::SGD optimizer(executor.local_parameters(), lr);
// @endcode
// The same layers built whole (build_sequential(layer, 14, 0)) and split with
// split_sequential() at the same points give bit-identical stages.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "pipeplan/exec/executor.h"

namespace pipeplan::exec {

/// Layer `layer` (0-based) of a sequential model, built from scratch.
using LayerFactory = std::function<torch::nn::AnyModule(int layer)>;

/// The seed of part `index` (a stage, a layer) of a model seeded `seed`: a
/// fixed mix of the two (splitmix64), the same on every rank.
std::uint64_t part_seed(std::uint64_t seed, std::uint64_t index);

/// Runs `body` with torch's default CPU generator (and CUDA's, when there is
/// one) seeded with `seed`, and restores their states afterwards, so what
/// the caller draws next is not disturbed.
void with_seed(std::uint64_t seed, const std::function<void()>& body);

/// Builds stage `stage` as Executor::set_stages(factory, seed) does: under
/// with_seed(part_seed(seed, stage)).
StageModule build_stage(const StageFactory& factory, int stage, std::uint64_t seed);
/// Every stage, index = stage (the whole model in one process, e.g. for an
/// unpipelined reference): the same stages a pipeline's ranks build.
std::vector<StageModule> build_stages(const StageFactory& factory, int num_stages,
                                      std::uint64_t seed);

/// The whole model: layers 0..num_layers-1, layer i built under
/// with_seed(part_seed(seed, i)) and named "i" as a Sequential's children are.
torch::nn::Sequential build_sequential(const LayerFactory& layer, int num_layers,
                                       std::uint64_t seed);

/// A stage factory over the same layers: stage k is a Sequential of the next
/// `layers_per_stage[k]` layers (a plan's partition), each built as in
/// build_sequential() and keeping its whole-model name, so any split of the
/// layers gives the same weights and parameter names as split_sequential()
/// of the whole model. InputError for an empty stage.
StageFactory sequential_stages(LayerFactory layer, std::vector<int> layers_per_stage,
                               std::uint64_t seed);
/// Balanced by count, as split_sequential(model, num_stages) splits:
/// num_stages runs whose lengths differ by at most one, the longer first.
StageFactory sequential_stages(LayerFactory layer, int num_layers, int num_stages,
                               std::uint64_t seed);

/// Layers per stage of the balanced split of `num_layers` into `num_stages`
/// (split_sequential's rule). InputError when a stage would be empty.
std::vector<int> balanced_partition(int num_layers, int num_stages);

}  // namespace pipeplan::exec
