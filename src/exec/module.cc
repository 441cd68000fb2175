// Module stages and the Sequential split.
#include "pipeplan/exec/module.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "exec/boundary.h"
#include "pipeplan/error.h"
#include "pipeplan/exec/build.h"

namespace pipeplan::exec {

namespace detail {

const at::Tensor& single_tensor(const Values& inputs) {
  if (inputs.size() != 1 || !std::holds_alternative<at::Tensor>(inputs[0]))
    throw InputError("a single-tensor module stage got " + std::to_string(inputs.size()) +
                     " values" + (inputs.size() == 1 ? " (an int)" : "") +
                     "; give module_stage() a forward function for stages that take or return "
                     "several values");
  return std::get<at::Tensor>(inputs[0]);
}

}  // namespace detail

StageModule module_stage(std::shared_ptr<torch::nn::Module> module, StageForward forward) {
  if (!module) throw InputError("module_stage: no module given");
  if (!forward) throw InputError("module_stage: no forward given");
  StageModule s;
  for (const auto& item : module->named_parameters(/*recurse=*/true)) {
    s.parameters.push_back(item.value());
    s.parameter_names.push_back(item.key());
  }
  s.forward = std::move(forward);
  s.module = std::move(module);
  return s;
}

std::vector<StageModule> split_sequential(const torch::nn::Sequential& model,
                                          const std::vector<std::size_t>& split_points) {
  const std::size_t n = model->size();
  std::vector<std::size_t> bounds{0};
  for (std::size_t p : split_points) {
    if (p <= bounds.back() || p >= n)
      throw InputError(
          "split_sequential: split points must be ascending and strictly between 0 "
          "and the model's " +
          std::to_string(n) + " children; got " + std::to_string(p) + " after " +
          std::to_string(bounds.back()));
    bounds.push_back(p);
  }
  bounds.push_back(n);
  auto children = model->named_children();
  std::vector<StageModule> stages;
  for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
    torch::nn::Sequential part;
    for (std::size_t i = bounds[k]; i < bounds[k + 1]; ++i)
      part->push_back(children[i].key(), *(model->begin() + static_cast<std::ptrdiff_t>(i)));
    stages.push_back(module_stage(part));
  }
  return stages;
}

std::vector<StageModule> split_sequential(const torch::nn::Sequential& model, int num_stages) {
  const auto n = static_cast<int>(model->size());
  if (num_stages < 1 || num_stages > n)
    throw InputError("split_sequential: cannot split " + std::to_string(n) + " children into " +
                     std::to_string(num_stages) + " non-empty stages");
  return split_sequential(model, split_points(balanced_partition(n, num_stages)));
}

std::vector<std::size_t> split_points(const std::vector<int>& partition) {
  std::vector<std::size_t> points;
  std::size_t at = 0;
  for (std::size_t s = 0; s + 1 < partition.size(); ++s) {
    if (partition[s] < 1)
      throw InputError("the partition gives stage " + std::to_string(s) + " " +
                       std::to_string(partition[s]) + " layers (every stage needs at least one)");
    at += static_cast<std::size_t>(partition[s]);
    points.push_back(at);
  }
  return points;
}

namespace {
long long layers_of(const std::vector<int>& partition) {
  long long total = 0;
  for (int n : partition) total += n;
  return total;
}
std::string partition_text(const std::vector<int>& partition) {
  std::string s = "[";
  for (std::size_t k = 0; k < partition.size(); ++k)
    s += (k ? "," : "") + std::to_string(partition[k]);
  return s + "]";
}
}  // namespace

std::vector<StageModule> split_sequential(const torch::nn::Sequential& model, const Plan& plan) {
  const std::vector<int>& partition = plan.meta.partition;
  if (partition.empty()) return split_sequential(model, plan.meta.num_stages());
  if (partition.size() != static_cast<std::size_t>(plan.meta.num_stages()) ||
      layers_of(partition) != static_cast<long long>(model->size()))
    throw InputError("the plan's partition " + partition_text(partition) + " splits " +
                     std::to_string(layers_of(partition)) + " layers into " +
                     std::to_string(partition.size()) + " stages, but the model has " +
                     std::to_string(model->size()) + " children" +
                     (partition.size() != static_cast<std::size_t>(plan.meta.num_stages())
                          ? " and the plan " + std::to_string(plan.meta.num_stages()) + " stages"
                          : std::string()) +
                     "; search with a profile of this model (check_profile_matches)");
  return split_sequential(model, split_points(partition));
}

std::vector<InputRoute> input_routes(const std::vector<int>& partition,
                                     const std::vector<std::vector<int>>& consumers) {
  std::vector<int> stage_of;
  for (std::size_t s = 0; s < partition.size(); ++s)
    for (int k = 0; k < partition[s]; ++k) stage_of.push_back(static_cast<int>(s));
  std::vector<InputRoute> routes;
  for (std::size_t input = 0; input < consumers.size(); ++input) {
    if (consumers[input].empty())
      throw InputError("input_routes: no layer reads input " + std::to_string(input));
    std::vector<int> stages;
    for (int layer : consumers[input]) {
      if (layer < 0 || static_cast<std::size_t>(layer) >= stage_of.size())
        throw InputError("input_routes: input " + std::to_string(input) + " is read by layer " +
                         std::to_string(layer) + ", but the partition " +
                         partition_text(partition) + " holds layers 0.." +
                         std::to_string(static_cast<long long>(stage_of.size()) - 1));
      stages.push_back(stage_of[static_cast<std::size_t>(layer)]);
    }
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
    routes.emplace_back(std::move(stages));
  }
  return routes;
}

void allow_unused(StageModule& stage, const std::string& parameter_name) {
  for (std::size_t i = 0; i < stage.parameter_names.size(); ++i)
    if (stage.parameter_names[i] == parameter_name) {
      stage.unused_parameters.push_back(stage.parameters.at(i));
      return;
    }
  std::string names;
  for (const std::string& n : stage.parameter_names) names += (names.empty() ? "" : ", ") + n;
  throw InputError("allow_unused: the stage has no parameter named '" + parameter_name +
                   "' (it has: " + (names.empty() ? "no named parameters" : names) + ")");
}

void check_parameters_covered(const torch::nn::Module& model,
                              const std::vector<StageModule>& stages) {
  std::unordered_set<const void*> listed;
  for (const StageModule& s : stages)
    for (const at::Tensor& p : s.parameters) listed.insert(p.unsafeGetTensorImpl());
  for (const auto& item : model.named_parameters(/*recurse=*/true))
    if (item.value().requires_grad() && listed.count(item.value().unsafeGetTensorImpl()) == 0)
      throw InputError("parameter '" + item.key() +
                       "' of the model is in no stage, so it would "
                       "never be trained; add it to the stage that uses it (or build the stages "
                       "with module_stage() / split_sequential())");
}

}  // namespace pipeplan::exec
