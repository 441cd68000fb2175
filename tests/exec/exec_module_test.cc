// In-process tests of the trainer-facing API: stages from torch::nn modules,
// the Sequential split, input routing, loss options and forward-only steps.
// One rank runs every stage (pp=1, several stages), so all boundaries are
// same-rank handoffs and the results must equal unpipelined training.
#include <ATen/Parallel.h>
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include <set>
#include <thread>

#include "error_of.h"
#include "solo_group.h"

#include "pipeplan/error.h"
#include "pipeplan/exec/build.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/data_parallel.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/launch.h"
#include "pipeplan/exec/module.h"
#include "pipeplan/exec/profile.h"
#include "pipeplan/planner.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;

using pipeplan::test::error_of;
using pipeplan::test::solo_group;

// Embedding -> 3 x (Linear + GELU + LayerNorm) -> head, in float64.
torch::nn::Sequential make_model(std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Sequential m(torch::nn::Embedding(16, 8));
  for (int i = 0; i < 3; ++i) {
    m->push_back(torch::nn::Linear(8, 8));
    m->push_back(torch::nn::Functional(torch::gelu, "none"));
    m->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})));
  }
  m->push_back(torch::nn::Linear(8, 16));
  m->to(torch::kDouble);
  return m;
}

LossFn cross_entropy() {
  return [](const Values& out, const Values& targets) {
    at::Tensor logits = std::get<at::Tensor>(out.at(0));
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                std::get<at::Tensor>(targets.at(0)).reshape(-1));
  };
}

void sgd(torch::nn::Module& m, double lr) {
  torch::NoGradGuard g;
  for (at::Tensor& p : m.parameters()) {
    p.sub_(p.grad() * lr);
    p.mutable_grad().zero_();
  }
}

}  // namespace

TEST_CASE("exec modules: a split Sequential trains exactly like the whole model",
          "[exec][module]") {
  for (const Problem& pr : {Problem{"interleaved-1f1b", 1, 4, 4}, Problem{"zbv", 1, 4, 0}}) {
    INFO(pr.schedule);
    Plan p = plan(pr);
    const int stages = p.meta.num_stages();
    torch::nn::Sequential pipe = make_model(7), ref = make_model(7);
    std::vector<StageModule> split = split_sequential(pipe, stages);
    REQUIRE(static_cast<int>(split.size()) == stages);
    check_parameters_covered(*pipe, split);  // nothing left out
    Executor ex(p, solo_group());
    ex.set_stages(split);
    ex.set_loss(cross_entropy());
    for (int k = 0; k < 3; ++k) {
      at::Tensor tokens = torch::randint(16, {8, 5}, torch::kLong);
      at::Tensor labels = torch::randint(16, {8, 5}, torch::kLong);
      std::vector<at::Tensor> losses;
      std::optional<double> loss = ex.step({tokens}, {labels}, &losses);
      at::Tensor want = cross_entropy()({ref->forward(tokens)}, {labels});
      want.backward();
      REQUIRE(loss.has_value());
      CHECK(*loss == Approx(want.item<double>()).epsilon(1e-12));
      REQUIRE(losses.size() == 4);
      CHECK(at::stack(losses).mean().item<double>() == Approx(*loss).epsilon(1e-14));
      auto a = pipe->parameters(), b = ref->parameters();
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        REQUIRE(a[i].grad().defined());
        CHECK(at::allclose(a[i].grad(), b[i].grad(), 1e-10, 1e-12));
      }
      sgd(*pipe, 0.1);
      sgd(*ref, 0.1);
    }
  }
}

TEST_CASE("exec modules: named_parameters are the whole model's names, by stage",
          "[exec][module]") {
  Plan p = plan(Problem{"interleaved-1f1b", 1, 4, 4});
  torch::nn::Sequential model = make_model(7);
  Executor ex(p, solo_group());
  ex.set_stages(split_sequential(model, p.meta.num_stages()));
  const std::vector<NamedParameter> named = ex.named_parameters();
  const std::vector<at::Tensor> plain = ex.local_parameters();
  const auto whole = model->named_parameters();
  REQUIRE(named.size() == whole.size());
  REQUIRE(plain.size() == named.size());
  std::set<std::string> qualified;
  for (std::size_t i = 0; i < named.size(); ++i) {
    INFO(named[i].name);
    // Same order as local_parameters(), the whole model's names and tensors.
    CHECK(named[i].tensor.is_same(plain[i]));
    CHECK(named[i].name == whole[i].key());
    CHECK(named[i].tensor.is_same(whole[i].value()));
    CHECK(qualified.insert(named[i].qualified()).second);
  }
  CHECK(named.front().stage == 0);
  CHECK(named.front().qualified() == "0." + whole[0].key());  // "0.0.weight": the embedding
  CHECK(named.back().stage == 3);
  // A hand-written stage without names: positions, still unique by stage.
  Plan two = plan(Problem{"interleaved-1f1b", 1, 2, 2});
  Executor hand(two, solo_group());
  at::Tensor w = torch::ones({2}, torch::requires_grad());
  at::Tensor v = torch::ones({2}, torch::requires_grad());
  StageModule a, b;
  a.forward = b.forward = [](const Values& in) { return in; };
  a.parameters = {w};
  b.parameters = {v};
  hand.set_stages(std::vector<StageModule>{a, b});
  const std::vector<NamedParameter> nameless = hand.named_parameters();
  REQUIRE(nameless.size() == 2);
  CHECK(nameless[0].qualified() == "0.#0");
  CHECK(nameless[1].qualified() == "1.#0");
}

TEST_CASE("exec modules: global_loss sums the replicas' losses over the data group",
          "[exec][module][dp]") {
  // Two ranks in threads: the last-stage ranks of two replicas.
  const int port = free_loopback_port();
  double mean[2] = {0, 0}, sum[2] = {0, 0};
  auto rank = [&](int r) {
    DistEnv env;
    env.rank = r;
    env.world_size = 2;
    env.master_port = port;
    auto group = Communicator::connect(env, Backend::Gloo, std::chrono::seconds(30));
    const double mine = r == 0 ? 1.0 : 3.0;
    mean[r] = global_loss(*group, mine, std::chrono::seconds(30));
    sum[r] = global_loss(*group, mine, std::chrono::seconds(30), LossReduction::Sum);
    group->barrier(std::chrono::seconds(30));
  };
  std::thread peer(rank, 1);
  rank(0);
  peer.join();
  for (int r = 0; r < 2; ++r) {
    CHECK(mean[r] == 2.0);  // the global batch's mean: (1 + 3) / 2
    CHECK(sum[r] == 4.0);
  }
  CHECK(global_loss(*solo_group(), 2.5, std::chrono::seconds(30)) == 2.5);
}

TEST_CASE("exec modules: split points, balance and coverage", "[exec][module]") {
  torch::nn::Sequential m = make_model(1);  // 11 children
  auto sizes = [](const std::vector<StageModule>& st) {
    std::vector<std::size_t> n;
    for (const auto& s : st)
      n.push_back(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(s.module)->size());
    return n;
  };
  CHECK(sizes(split_sequential(m, 4)) == std::vector<std::size_t>{3, 3, 3, 2});
  // Balanced by count is balanced_partition's rule, for every stage count.
  for (int k = 1; k <= static_cast<int>(m->size()); ++k) {
    const std::vector<int> counts = balanced_partition(static_cast<int>(m->size()), k);
    CHECK(sizes(split_sequential(m, k)) == std::vector<std::size_t>(counts.begin(), counts.end()));
    CHECK(sizes(split_sequential(m, split_points(counts))) ==
          std::vector<std::size_t>(counts.begin(), counts.end()));
  }
  CHECK(sizes(split_sequential(m, std::vector<std::size_t>{1, 10})) ==
        std::vector<std::size_t>{1, 9, 1});
  CHECK(error_of([&] { split_sequential(m, 12); }) ==
        "split_sequential: cannot split 11 children into 12 non-empty stages");
  CHECK(error_of([&] {
          split_sequential(m, std::vector<std::size_t>{4, 4});
        }) ==
        "split_sequential: split points must be ascending and strictly between 0 and the "
        "model's 11 children; got 4 after 4");
  // The stages share the model's parameters (no copies).
  auto st = split_sequential(m, 2);
  CHECK(st[0].parameters[0].is_same(m->parameters()[0]));
  // A stage list that misses the LayerNorm weights is reported by name.
  st[1].parameters.erase(st[1].parameters.begin() + 2);
  CHECK(error_of([&] {
          check_parameters_covered(*m, st);
        }).rfind("parameter '7.weight' of the model is in no stage", 0) == 0);
  // A module holder and a module pointer both make single-tensor stages.
  torch::nn::Linear lin(3, 2);
  StageModule a = module_stage(lin), b = module_stage(lin.ptr());
  CHECK(a.parameters.size() == 2);
  CHECK(b.module.get() == lin.ptr().get());
  CHECK(error_of([&] {
          a.forward({at::ones({1, 3}), at::ones({1, 3})});
        }).rfind("a single-tensor module stage got 2 values", 0) == 0);
}

TEST_CASE("exec modules: a plan's partition splits the model; routes follow from it",
          "[exec][module][profile]") {
  torch::nn::Sequential m = make_model(1);  // 11 children
  auto sizes = [](const std::vector<StageModule>& st) {
    std::vector<std::size_t> n;
    for (const auto& s : st)
      n.push_back(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(s.module)->size());
    return n;
  };
  Plan p = plan(Problem{"interleaved-1f1b", 1, 4, 4});
  CHECK(sizes(split_sequential(m, p)) == std::vector<std::size_t>{3, 3, 3, 2});  // none recorded
  p.meta.partition = {1, 4, 5, 1};
  CHECK(sizes(split_sequential(m, p)) == std::vector<std::size_t>{1, 4, 5, 1});
  CHECK(split_points({1, 4, 5, 1}) == std::vector<std::size_t>{1, 5, 10});
  p.meta.partition = {1, 4, 5, 2};
  CHECK(error_of([&] { split_sequential(m, p); }) ==
        "the plan's partition [1,4,5,2] splits 12 layers into 4 stages, but the model has 11 "
        "children; search with a profile of this model (check_profile_matches)");
  // Input 0 feeds layer 0; input 1 (a mask) layers 2, 3 and 9.
  const std::vector<InputRoute> routes = input_routes({1, 4, 5, 1}, {{0}, {2, 3, 9}});
  REQUIRE(routes.size() == 2);
  CHECK(routes[0].stages == std::vector<int>{0});
  CHECK(routes[1].stages == std::vector<int>{1, 2});
  CHECK(error_of([&] {
          input_routes({1, 4, 5, 1}, {{11}});
        }) ==
        "input_routes: input 0 is read by layer 11, but the partition [1,4,5,1] holds layers "
        "0..10");
  CHECK(error_of([&] { input_routes({1, 4}, {{}}); }) == "input_routes: no layer reads input 0");
}

TEST_CASE("exec modules: the layer profiler", "[exec][module][profile]") {
  torch::nn::Sequential m = make_model(1);
  m->push_back(torch::nn::Dropout(0.5));  // 12 children
  const at::Tensor tokens = torch::randint(16, {4, 5}, torch::kLong);
  // The profiler leaves the generator as it found it (dropout draws too).
  torch::manual_seed(3);
  const at::Tensor before = torch::rand({4});
  torch::manual_seed(3);
  ProfileOptions o;
  o.warmup = 1;
  o.repeats = 3;
  const LayerProfile prof = profile_layers(m, tokens, o);
  CHECK(torch::rand({4}).equal(before));
  REQUIRE(prof.size() == 12);
  CHECK(prof.layers[1].name == "1.Linear");
  CHECK(prof.layers[11].name == "11.Dropout");
  // Activations: the Linear keeps its [4,5,8] float64 output (and its input
  // is the embedding's output); the embedding's input is the token ids.
  CHECK(prof.layers[0].input_size() == 4 * 5 * 8);
  CHECK(prof.layers[1].input_size() == 4 * 5 * 8 * 8);
  CHECK(prof.layers[1].activation >= 4 * 5 * 8 * 8);
  for (const Layer& l : prof.layers) {
    INFO(l.name);
    CHECK(l.f > 0);
    CHECK(l.w >= 0);
    CHECK(l.w <= l.b);
  }
  CHECK(prof.layers[0].w == prof.layers[0].b);                       // no input gradient: all W
  CHECK(prof.layers[2].w == 0);                                      // GELU: no parameters
  for (const auto& p : m->parameters()) CHECK(!p.grad().defined());  // .grad untouched
  // It writes the CSV `pipeplan search --layers` reads.
  std::ostringstream csv;
  write_layer_profile(prof, csv, profile_comment(o));
  CHECK(csv.str().rfind("# profiled by pipeplan::exec::profile_layers", 0) == 0);
  CHECK(parse_layer_profile(csv.str()) == prof);
  check_profile_matches(prof, m);
  CHECK(error_of([&] { check_profile_matches(prof, make_model(1)); }) ==
        "the layer profile has 12 layers but the model has 11 children; a profile of another "
        "model would split this one wrongly (profile this model with profile_layers)");
  o.repeats = 0;
  CHECK(error_of([&] { profile_layers(m, tokens, o); }) ==
        "profile_layers: repeats must be at least 1 and warmup at least 0 (got 0 and 1)");
}

TEST_CASE("exec modules: a trainable tensor missing from a stage is an error", "[exec][module]") {
  Plan p = plan(Problem{"interleaved-1f1b", 1, 2, 2});
  at::Tensor w0 = torch::randn({4, 4}, torch::requires_grad());
  at::Tensor w1 = torch::randn({4, 4}, torch::requires_grad());
  at::Tensor hidden = torch::randn({4}, torch::requires_grad());  // forgotten
  Executor ex(p, solo_group());
  ex.set_stage(0, {[w0](const Values& in) -> Values {
                     return {at::matmul(std::get<at::Tensor>(in[0]), w0)};
                   },
                   {w0}});
  ex.set_stage(1, {[w1, hidden](const Values& in) -> Values {
                     return {at::matmul(std::get<at::Tensor>(in[0]), w1) * hidden};
                   },
                   {w1}});
  ex.set_loss(
      [](const Values& out, const Values&) { return std::get<at::Tensor>(out[0]).pow(2).mean(); });
  CHECK(error_of([&] {
          ex.step({torch::randn({4, 4})});
        }) ==
        "rank 0: stage 1, microbatch 0, action 1F0: stage 1 uses a tensor of shape [4] that "
        "requires grad but is not among the "
        "stage's parameters, so it would never be trained; list it in StageModule::parameters, "
        "build the stage with module_stage() so parameters are collected, or detach it "
        "(requires_grad_(false)) if it is meant to stay fixed");
}

TEST_CASE("exec modules: inputs feed several stages; loss sum; forward-only", "[exec][module]") {
  Plan p = plan(Problem{"interleaved-1f1b", 1, 2, 3});
  // x feeds stage 0; a mask feeds stages 1 and 2; stage 2 also takes a scale.
  std::vector<at::Tensor> ws;
  for (int s = 0; s < 3; ++s)
    ws.push_back(torch::randn({6, 6}, torch::dtype(torch::kDouble)).requires_grad_());
  auto stage = [&](int s) {
    return StageModule{[s, w = ws[s]](const Values& in) -> Values {
                         at::Tensor h = at::tanh(at::matmul(std::get<at::Tensor>(in[0]), w));
                         if (s > 0) h = h * std::get<at::Tensor>(in[1]);   // mask
                         if (s == 2) h = h * std::get<at::Tensor>(in[2]);  // scale
                         return {h};
                       },
                       {ws[s]}};
  };
  auto loss_sum = [](const Values& out, const Values& t) {
    return (std::get<at::Tensor>(out[0]) - std::get<at::Tensor>(t[0])).pow(2).sum();
  };
  ExecOptions o;
  o.input_stages = {0, {1, 2}, 2};
  o.loss_reduction = LossReduction::Sum;
  Executor ex(p, solo_group(), o);
  std::vector<StageModule> all{stage(0), stage(1), stage(2)};
  ex.set_stages(all);
  ex.set_loss(loss_sum);
  auto opts = torch::dtype(torch::kDouble);
  at::Tensor x = torch::randn({4, 6}, opts),
             mask = (torch::rand({4, 6}, opts) > 0.3).to(torch::kDouble);
  at::Tensor scale = torch::rand({4, 1}, opts) + 0.5, y = torch::randn({4, 6}, opts);
  // The unpipelined reference, summed over the batch.
  double want = run_unpipelined(all, loss_sum, o.input_stages, {x, mask, scale}, {y});
  std::vector<at::Tensor> ref_grads;
  for (at::Tensor& w : ws) {
    ref_grads.push_back(w.grad().clone());
    w.mutable_grad() = at::Tensor();
  }
  std::optional<double> got = ex.step({x, mask, scale}, {y});
  REQUIRE(got.has_value());
  CHECK(*got == Approx(want).epsilon(1e-12));
  for (int s = 0; s < 3; ++s) CHECK(at::allclose(ws[s].grad(), ref_grads[s], 1e-10, 1e-12));

  // Forward-only: gradients untouched, no graph, outputs merged in batch order.
  std::vector<at::Tensor> before;
  for (at::Tensor& w : ws) before.push_back(w.grad().clone());
  StepResult r = ex.forward_only({x, mask, scale}, {y});
  REQUIRE(r.loss.has_value());
  CHECK(*r.loss == Approx(want).epsilon(1e-12));  // weights unchanged: same loss
  REQUIRE(r.outputs.size() == 1);
  at::Tensor out = std::get<at::Tensor>(r.outputs[0]);
  CHECK(out.sizes() == x.sizes());
  CHECK_FALSE(out.requires_grad());
  at::Tensor direct = at::tanh(at::matmul(x, ws[0]));
  direct = at::tanh(at::matmul(direct, ws[1])) * mask;
  direct = at::tanh(at::matmul(direct, ws[2])) * mask * scale;
  CHECK(at::allclose(out, direct.detach(), 1e-12, 1e-12));
  for (int s = 0; s < 3; ++s) CHECK(at::equal(ws[s].grad(), before[s]));
  // Without targets a forward-only step returns outputs and no loss.
  StepResult r2 = ex.forward_only({x, mask, scale});
  CHECK_FALSE(r2.loss.has_value());
  CHECK(at::allclose(std::get<at::Tensor>(r2.outputs[0]), out));
}

TEST_CASE("exec modules: train()/eval() reach module stages", "[exec][module]") {
  Plan p = plan(Problem{"interleaved-1f1b", 1, 2, 2});
  torch::nn::Sequential m(torch::nn::Linear(4, 4), torch::nn::Dropout(0.5),
                          torch::nn::Linear(4, 2));
  Executor ex(p, solo_group());
  ex.set_stages(split_sequential(m, 2));
  ex.eval();
  for (const auto& c : m->children()) CHECK_FALSE(c->is_training());
  // In eval mode dropout is the identity: forward-only equals the plain model
  // (up to float32 rounding: two microbatches of 2 rows against one matmul of
  // 4 moves an output near 0 by ~1e-8; dropout on would move it by O(1)).
  torch::manual_seed(7);
  at::Tensor x = torch::randn({4, 4});
  StepResult r = ex.forward_only({x});
  CHECK(at::allclose(std::get<at::Tensor>(r.outputs[0]), m->forward(x), 1e-5, 1e-6));
  ex.train();
  for (const auto& c : m->children()) CHECK(c->is_training());
}

TEST_CASE("exec modules: a forward-only plan runs forward-only steps", "[exec][module]") {
  Problem pr{"zbv", 1, 4, 0};
  pr.forward_only = true;
  Plan p = plan(pr);
  REQUIRE(p.meta.forward_only);
  torch::nn::Sequential model = make_model(3);
  Executor ex(p, solo_group());
  CHECK(ex.forward_only_plan());
  ex.set_stages(split_sequential(model, p.meta.num_stages()));
  ex.set_loss(cross_entropy());
  at::Tensor tokens = torch::randint(16, {8, 5}, torch::kLong);
  at::Tensor labels = torch::randint(16, {8, 5}, torch::kLong);
  // step() on a forward-only plan evaluates: loss, no gradients.
  std::vector<at::Tensor> losses;
  std::optional<double> loss = ex.step({tokens}, {labels}, &losses);
  REQUIRE(loss.has_value());
  CHECK(losses.size() == 4);
  at::Tensor want;
  {
    torch::NoGradGuard g;
    want = cross_entropy()({model->forward(tokens)}, {labels});
  }
  CHECK(*loss == Approx(want.item<double>()).epsilon(1e-12));
  for (const at::Tensor& w : model->parameters()) CHECK_FALSE(w.grad().defined());
  StepResult r = ex.forward_only({tokens});
  CHECK(at::allclose(std::get<at::Tensor>(r.outputs[0]), model->forward(tokens).detach()));
}
