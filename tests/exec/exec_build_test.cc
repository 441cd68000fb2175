// Local-only construction (build.h): a rank builds only its own stages, each
// stage (each layer) from its own seed, so its weights are the same whichever
// rank builds it, whatever else was built, and as in the whole model; it
// trains exactly like the whole model split; local_parameters() is what the
// optimizer takes.
#include <ATen/Parallel.h>
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include "error_of.h"
#include "solo_group.h"

#include "pipeplan/error.h"
#include "pipeplan/exec/build.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/launch.h"
#include "pipeplan/exec/module.h"
#include "pipeplan/planner.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;

using pipeplan::test::error_of;
using pipeplan::test::solo_group;

// Embedding, then (Linear, GELU, LayerNorm) x 3, then a Linear head: 11 layers.
constexpr int kLayers = 11;
torch::nn::AnyModule layer(int i) {
  if (i == 0) return torch::nn::AnyModule(torch::nn::Embedding(32, 16));
  if (i == kLayers - 1) return torch::nn::AnyModule(torch::nn::Linear(16, 32));
  switch ((i - 1) % 3) {
    case 0: return torch::nn::AnyModule(torch::nn::Linear(16, 16));
    case 1: return torch::nn::AnyModule(torch::nn::Functional(torch::gelu, "none"));
    default: return torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({16})));
  }
}

// Every parameter of `got` equals (bitwise) and is named as in `want`.
void check_same(const std::vector<StageModule>& got, const std::vector<StageModule>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t s = 0; s < got.size(); ++s) {
    INFO("stage " << s);
    REQUIRE(got[s].parameters.size() == want[s].parameters.size());
    CHECK(got[s].parameter_names == want[s].parameter_names);
    for (std::size_t i = 0; i < got[s].parameters.size(); ++i) {
      CHECK(!got[s].parameters[i].is_same(want[s].parameters[i]));
      CHECK(at::equal(got[s].parameters[i], want[s].parameters[i]));
    }
  }
}

LossFn cross_entropy() {
  return [](const Values& out, const Values& targets) {
    const at::Tensor& logits = std::get<at::Tensor>(out.at(0));
    return torch::nn::functional::cross_entropy(logits.reshape({-1, 32}),
                                                std::get<at::Tensor>(targets.at(0)).reshape(-1));
  };
}

}  // namespace

TEST_CASE("exec build: every split of the layers gives the whole model's weights",
          "[exec][build]") {
  torch::nn::Sequential whole = build_sequential(layer, kLayers, 7);
  for (const std::vector<int>& split :
       {std::vector<int>{11}, std::vector<int>{1, 10}, std::vector<int>{4, 4, 3},
        std::vector<int>{2, 3, 3, 3}, std::vector<int>{1, 1, 1, 8}}) {
    INFO("split of " << split.size());
    std::vector<std::size_t> points;
    std::size_t at = 0;
    for (std::size_t k = 0; k + 1 < split.size(); ++k) points.push_back(at += split[k]);
    const int n = static_cast<int>(split.size());
    // Each stage built alone, in any order, as a rank owning only it would.
    StageFactory factory = sequential_stages(layer, split, 7);
    std::vector<StageModule> alone(split.size());
    for (int s = n - 1; s >= 0; --s) {
      torch::randn({5});  // whatever the rank drew before does not matter
      alone[s] = build_stage(factory, s, 99);
    }
    check_same(alone, split_sequential(whole, points));
  }
  // The balanced split is split_sequential's.
  check_same(build_stages(sequential_stages(layer, kLayers, 4, 7), 4, 0),
             split_sequential(whole, 4));
  CHECK(balanced_partition(11, 4) == std::vector<int>{3, 3, 3, 2});
  // Another seed, other weights.
  torch::nn::Sequential other = build_sequential(layer, kLayers, 8);
  CHECK_FALSE(at::equal(other->parameters()[0], whole->parameters()[0]));
}

TEST_CASE("exec build: with_seed leaves the caller's generator where it was", "[exec][build]") {
  torch::manual_seed(3);
  const at::Tensor want = torch::randn({4});
  torch::manual_seed(3);
  at::Tensor inside;
  with_seed(part_seed(1, 2), [&] { inside = torch::randn({4}); });
  CHECK(at::equal(torch::randn({4}), want));
  at::Tensor again;
  with_seed(part_seed(1, 2), [&] { again = torch::randn({4}); });
  CHECK(at::equal(inside, again));
  CHECK(part_seed(1, 2) != part_seed(2, 1));
}

TEST_CASE("exec build: set_stages(factory) builds only this rank's stages", "[exec][build]") {
  // Rank 1 of a 2-rank interleaved plan owns stages 1 and 3; no communication
  // happens before connect().
  Plan p = plan(Problem{"interleaved-1f1b", 2, 4, 2});
  std::vector<int> built;
  StageFactory inner = sequential_stages(layer, {3, 3, 3, 2}, 5);
  StageFactory factory = [&](int s) {
    built.push_back(s);
    return inner(s);
  };
  Executor ex(p, 1, 2);
  ex.set_stages(factory, 11);
  CHECK(built == std::vector<int>{1, 3});
  const std::vector<StageModule> all = build_stages(inner, 4, 11);
  std::vector<at::Tensor> want;
  for (int s : {1, 3})
    for (const at::Tensor& t : all[s].parameters) want.push_back(t);
  const std::vector<at::Tensor> mine = ex.local_parameters();
  REQUIRE(mine.size() == want.size());
  for (std::size_t i = 0; i < mine.size(); ++i) CHECK(at::equal(mine[i], want[i]));
  CHECK(error_of<InputError>([&] {
          build_stage(sequential_stages(layer, {3, 0, 8}, 5), 0, 0);
        }) == "sequential_stages: stage 1 gets 0 layers; every stage needs at least one");
  CHECK(error_of<InputError>([&] { build_stage(inner, 4, 0); }) ==
        "sequential_stages: no stage 4 in a split into 4 stages");
}

TEST_CASE("exec build: local-only construction trains exactly like the whole model split",
          "[exec][build]") {
  Plan p = plan(Problem{"interleaved-1f1b", 1, 4, 3});  // 3 stages on one rank
  torch::nn::Sequential whole = build_sequential(layer, kLayers, 21);
  Executor by_whole(p, solo_group()), by_parts(p, solo_group());
  by_whole.set_stages(split_sequential(whole, 3));
  by_parts.set_stages(sequential_stages(layer, kLayers, 3, 21), 0);
  std::vector<at::Tensor> whole_params = whole->parameters(),
                          part_params = by_parts.local_parameters();
  REQUIRE(part_params.size() == whole_params.size());
  for (Executor* ex : {&by_whole, &by_parts}) ex->set_loss(cross_entropy());
  torch::optim::SGD opt_whole(whole_params, 0.3), opt_parts(part_params, 0.3);
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(100 + step);
    at::Tensor tokens = torch::randint(32, {8, 5});
    at::Tensor labels = (tokens * 5 + 1).remainder(32);
    opt_whole.zero_grad();
    opt_parts.zero_grad();
    std::optional<double> a = by_whole.step({tokens}, {labels});
    std::optional<double> b = by_parts.step({tokens}, {labels});
    REQUIRE(a.has_value());
    CHECK(*a == *b);  // bitwise: the same weights, the same arithmetic
    opt_whole.step();
    opt_parts.step();
  }
  for (std::size_t i = 0; i < whole_params.size(); ++i)
    CHECK(at::equal(whole_params[i], part_params[i]));
}
