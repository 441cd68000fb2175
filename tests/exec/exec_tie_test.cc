// Shared (tied) parameters in one process: an LM head tied to the token
// embedding, each of the two stages holding its own copy, trains exactly
// like the tied unpipelined model (one tensor used twice); the checks on
// declarations and on identical initialisation; local_parameters().
#include <ATen/Parallel.h>
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include "error_of.h"
#include "solo_group.h"

#include "pipeplan/error.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/launch.h"
#include "pipeplan/planner.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;

using pipeplan::test::error_of;
using pipeplan::test::solo_group;

at::Tensor leaf(const at::Tensor& t) { return t.detach().clone().requires_grad_(true); }

// tokens -> embedding E -> tanh(linear W0) | tanh(linear W1) -> logits h E^T.
struct TiedModel {
  at::Tensor embed, w0, w1;
  explicit TiedModel(std::uint64_t seed) {
    torch::manual_seed(seed);
    auto o = torch::dtype(torch::kDouble);
    embed = leaf(torch::randn({16, 8}, o));
    w0 = leaf(torch::randn({8, 8}, o) / 3);
    w1 = leaf(torch::randn({8, 8}, o) / 3);
  }
  TiedModel(const TiedModel& other)
      : embed(leaf(other.embed)), w0(leaf(other.w0)), w1(leaf(other.w1)) {}
  StageModule stage0(const at::Tensor& e) const {
    StageModule s;
    s.forward = [e, w = w0](const Values& in) -> Values {
      return {at::tanh(at::matmul(at::embedding(e, std::get<at::Tensor>(in[0])), w))};
    };
    s.parameters = {e, w0};
    s.tied["embed"] = e;
    return s;
  }
  StageModule stage1(const at::Tensor& e) const {
    StageModule s;
    s.forward = [e, w = w1](const Values& in) -> Values {
      return {at::matmul(at::tanh(at::matmul(std::get<at::Tensor>(in[0]), w)), e.t())};
    };
    s.parameters = {w1, e};
    s.tied["embed"] = e;
    return s;
  }
};

LossFn cross_entropy() {
  return [](const Values& out, const Values& targets) {
    at::Tensor logits = std::get<at::Tensor>(out.at(0));
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                std::get<at::Tensor>(targets.at(0)).reshape(-1));
  };
}

void sgd(const std::vector<at::Tensor>& params, double lr) {
  torch::NoGradGuard g;
  for (const at::Tensor& p : params) {
    if (!p.grad().defined()) continue;
    p.sub_(p.grad() * lr);
    const_cast<at::Tensor&>(p).mutable_grad() = at::Tensor();
  }
}

ExecOptions tied_options() {
  ExecOptions o;
  o.ties = {Tie{"embed", {0, 1}}};
  return o;
}

}  // namespace

TEST_CASE("exec ties: two copies of a tied embedding train exactly like one shared tensor",
          "[exec][tie]") {
  for (const Problem& pr : {Problem{"interleaved-1f1b", 1, 4, 2}, Problem{"zbv", 1, 4, 0}}) {
    INFO(pr.schedule);
    Plan p = plan(pr);
    REQUIRE(p.meta.num_stages() == 2);
    TiedModel ref(5), pipe(ref);
    const at::Tensor copy0 = pipe.embed, copy1 = leaf(pipe.embed);  // stage 1's own copy
    Executor ex(p, solo_group(), tied_options());
    ex.set_stage(0, pipe.stage0(copy0));
    ex.set_stage(1, pipe.stage1(copy1));
    ex.set_loss(cross_entropy());
    const std::vector<at::Tensor> mine = ex.local_parameters();
    CHECK(mine.size() == 4);  // both copies, w0, w1
    const std::vector<StageModule> ref_stages{ref.stage0(ref.embed), ref.stage1(ref.embed)};
    for (int k = 0; k < 3; ++k) {
      at::Tensor tokens = torch::randint(16, {8, 3}, torch::kLong);
      at::Tensor labels = torch::randint(16, {8, 3}, torch::kLong);
      std::optional<double> loss = ex.step({tokens}, {labels});
      const double want = run_unpipelined(ref_stages, cross_entropy(), {}, {tokens}, {labels});
      REQUIRE(loss.has_value());
      CHECK(*loss == Approx(want).epsilon(1e-12));
      // Each copy's gradient is the shared tensor's: both uses summed.
      CHECK(at::allclose(copy0.grad(), ref.embed.grad(), 1e-12, 1e-12));
      CHECK(at::allclose(copy1.grad(), ref.embed.grad(), 1e-12, 1e-12));
      CHECK(at::allclose(pipe.w0.grad(), ref.w0.grad(), 1e-12, 1e-12));
      CHECK(at::allclose(pipe.w1.grad(), ref.w1.grad(), 1e-12, 1e-12));
      sgd(mine, 0.1);
      sgd({ref.embed, ref.w0, ref.w1}, 0.1);
      CHECK(at::equal(copy0, copy1));  // the copies stay identical
    }
  }
}

TEST_CASE("exec ties: a tie whose local stages share one tensor sums into it once", "[exec][tie]") {
  Plan p = plan(Problem{"interleaved-1f1b", 1, 4, 2});
  TiedModel ref(8), pipe(ref);
  Executor ex(p, solo_group(), tied_options());
  ex.set_stage(0, pipe.stage0(pipe.embed));
  ex.set_stage(1, pipe.stage1(pipe.embed));
  ex.set_loss(cross_entropy());
  CHECK(ex.local_parameters().size() == 3);
  const std::vector<StageModule> ref_stages{ref.stage0(ref.embed), ref.stage1(ref.embed)};
  at::Tensor tokens = torch::randint(16, {8, 3}, torch::kLong);
  at::Tensor labels = torch::randint(16, {8, 3}, torch::kLong);
  ex.step({tokens}, {labels});
  run_unpipelined(ref_stages, cross_entropy(), {}, {tokens}, {labels});
  CHECK(at::allclose(pipe.embed.grad(), ref.embed.grad(), 1e-12, 1e-12));
}

TEST_CASE("exec ties: declarations and identical initialisation are checked", "[exec][tie]") {
  Plan p = plan(Problem{"interleaved-1f1b", 1, 2, 2});
  TiedModel m(6);
  auto bad = [&](std::vector<Tie> ties) {
    ExecOptions o;
    o.ties = std::move(ties);
    return error_of<InputError>([&] { Executor ex(p, solo_group(), o); });
  };
  CHECK(bad({Tie{"embed", {0}}}) ==
        "ExecOptions::ties: tie 'embed' needs at least two distinct stages");
  CHECK(bad({Tie{"embed", {0, 2}}}) ==
        "ExecOptions::ties: tie 'embed' names stage 2 but the plan has stages 0..1");
  CHECK(bad({Tie{"a", {0, 1}}, Tie{"a", {0, 1}}}) ==
        "ExecOptions::ties: tie 'a' is declared twice");
  {
    Executor ex(p, solo_group(), tied_options());
    StageModule s0 = m.stage0(m.embed);
    s0.tied.clear();
    CHECK(error_of<InputError>([&] { ex.set_stage(0, s0); }) ==
          "stage 0 is in tie 'embed' but its StageModule::tied has no entry 'embed' (the "
          "stage's copy of the shared parameter)");
    s0.tied["embed"] = leaf(m.embed);  // not among the stage's parameters
    CHECK(error_of<InputError>([&] { ex.set_stage(0, s0); }) ==
          "stage 0: the copy of tied parameter 'embed' is not among the stage's trainable "
          "parameters; list it in StageModule::parameters (with requires_grad)");
  }
  // Copies that were not initialised identically: refused before any action.
  Executor ex(p, solo_group(), tied_options());
  at::Tensor other = leaf(m.embed + 1e-9);
  ex.set_stage(0, m.stage0(m.embed));
  ex.set_stage(1, m.stage1(other));
  ex.set_loss(cross_entropy());
  CHECK(error_of<InputError>([&] {
          ex.step({torch::randint(16, {4, 3}, torch::kLong)},
                  {torch::randint(16, {4, 3}, torch::kLong)});
        }) ==
        "rank 0: the copies of tied parameter 'embed' on stages 0 and 1 differ; initialise "
        "every copy identically before the first step");
  CHECK_FALSE(m.embed.grad().defined());
}

TEST_CASE("exec ties: local_parameters lists a tensor two local stages share once", "[exec][tie]") {
  Plan p = plan(Problem{"interleaved-1f1b", 1, 2, 2});
  TiedModel m(7);
  Executor ex(p, solo_group());  // no tie: the same tensor in both stages
  ex.set_stage(0, m.stage0(m.embed));
  ex.set_stage(1, m.stage1(m.embed));
  const std::vector<at::Tensor> mine = ex.local_parameters();
  REQUIRE(mine.size() == 3);
  CHECK(mine[0].is_same(m.embed));
  CHECK(mine[1].is_same(m.w0));
  CHECK(mine[2].is_same(m.w1));
}
