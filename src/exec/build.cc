// Local-only construction (build.h): seeded parts, stage factories.
#include "pipeplan/exec/build.h"

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <mutex>
#include <string>

#include "pipeplan/error.h"
#include "pipeplan/exec/module.h"

namespace pipeplan::exec {

namespace {

// The default generators of the CPU and of every CUDA device.
std::vector<at::Generator> default_generators() {
  std::vector<at::Generator> gens{at::globalContext().defaultGenerator(at::kCPU)};
  if (at::hasCUDA()) {
    const int n = static_cast<int>(at::detail::getCUDAHooks().getNumGPUs());
    for (int d = 0; d < n; ++d)
      gens.push_back(at::globalContext().defaultGenerator(at::Device(at::kCUDA, d)));
  }
  return gens;
}

}  // namespace

std::uint64_t part_seed(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void with_seed(std::uint64_t seed, const std::function<void()>& body) {
  std::vector<at::Generator> gens = default_generators();
  std::vector<at::Tensor> saved;
  for (at::Generator& g : gens) {
    std::lock_guard<std::mutex> lock(g.mutex());
    saved.push_back(g.get_state());
  }
  auto restore = [&] {
    for (std::size_t i = 0; i < gens.size(); ++i) {
      std::lock_guard<std::mutex> lock(gens[i].mutex());
      gens[i].set_state(saved[i]);
    }
  };
  for (at::Generator& g : gens) {
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_current_seed(seed);
  }
  try {
    body();
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

StageModule build_stage(const StageFactory& factory, int stage, std::uint64_t seed) {
  if (!factory) throw InputError("build_stage: no stage factory given");
  StageModule built;
  with_seed(part_seed(seed, static_cast<std::uint64_t>(stage)), [&] { built = factory(stage); });
  return built;
}

std::vector<StageModule> build_stages(const StageFactory& factory, int num_stages,
                                      std::uint64_t seed) {
  std::vector<StageModule> all;
  for (int s = 0; s < num_stages; ++s) all.push_back(build_stage(factory, s, seed));
  return all;
}

namespace {

torch::nn::AnyModule build_layer(const LayerFactory& layer, int i, std::uint64_t seed) {
  torch::nn::AnyModule m;
  with_seed(part_seed(seed, static_cast<std::uint64_t>(i)), [&] { m = layer(i); });
  if (m.is_empty())
    throw InputError("the layer factory returned no module for layer " + std::to_string(i));
  return m;
}

}  // namespace

torch::nn::Sequential build_sequential(const LayerFactory& layer, int num_layers,
                                       std::uint64_t seed) {
  if (!layer) throw InputError("build_sequential: no layer factory given");
  torch::nn::Sequential model;
  for (int i = 0; i < num_layers; ++i)
    model->push_back(std::to_string(i), build_layer(layer, i, seed));
  return model;
}

StageFactory sequential_stages(LayerFactory layer, std::vector<int> layers_per_stage,
                               std::uint64_t seed) {
  if (!layer) throw InputError("sequential_stages: no layer factory given");
  std::vector<int> first{0};
  for (std::size_t k = 0; k < layers_per_stage.size(); ++k) {
    if (layers_per_stage[k] < 1)
      throw InputError("sequential_stages: stage " + std::to_string(k) + " gets " +
                       std::to_string(layers_per_stage[k]) +
                       " layers; every stage needs at least one");
    first.push_back(first.back() + layers_per_stage[k]);
  }
  return [layer = std::move(layer), first = std::move(first), seed](int stage) {
    if (stage < 0 || stage + 1 >= static_cast<int>(first.size()))
      throw InputError("sequential_stages: no stage " + std::to_string(stage) +
                       " in a split into " + std::to_string(first.size() - 1) + " stages");
    torch::nn::Sequential part;
    for (int i = first[stage]; i < first[stage + 1]; ++i)
      part->push_back(std::to_string(i), build_layer(layer, i, seed));
    return module_stage(part);
  };
}

StageFactory sequential_stages(LayerFactory layer, int num_layers, int num_stages,
                               std::uint64_t seed) {
  return sequential_stages(std::move(layer), balanced_partition(num_layers, num_stages), seed);
}

std::vector<int> balanced_partition(int num_layers, int num_stages) {
  if (num_stages < 1 || num_stages > num_layers)
    throw InputError("cannot split " + std::to_string(num_layers) + " layers into " +
                     std::to_string(num_stages) + " non-empty stages");
  std::vector<int> counts;
  for (int k = 0; k < num_stages; ++k)
    counts.push_back(num_layers / num_stages + (k < num_layers % num_stages ? 1 : 0));
  return counts;
}

}  // namespace pipeplan::exec
