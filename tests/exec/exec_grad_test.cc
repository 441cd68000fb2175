// No silent wrong gradient (one process, several stages): a listed parameter
// that gets no gradient, a boundary input whose gradient is cut (the
// detached-recompute mistake of a ported activation checkpoint), the
// explicit opt-outs, when the check runs, and the context every error of a
// step carries.
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
#include "pipeplan/exec/module.h"
#include "pipeplan/planner.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;

using pipeplan::test::error_of;
using pipeplan::test::solo_group;

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Two blocks of Linear + tanh, as Sequentials (names "0.weight", ...).
torch::nn::Sequential block(int width) {
  return torch::nn::Sequential(torch::nn::Linear(width, width), torch::nn::Functional(torch::tanh));
}

LossFn square_mean() {
  return
      [](const Values& out, const Values&) { return std::get<at::Tensor>(out[0]).pow(2).mean(); };
}

StageModule hand_stage(StageForward forward, std::vector<at::Tensor> parameters) {
  StageModule s;
  s.forward = std::move(forward);
  s.parameters = std::move(parameters);
  return s;
}

const Plan& two_stage_plan() {  // one rank, two stages, two microbatches
  static const Plan p = plan(Problem{"interleaved-1f1b", 1, 2, 2});
  return p;
}

}  // namespace

TEST_CASE("exec grads: a detached recompute (checkpoint port) is caught with a clear error",
          "[exec][grad]") {
  torch::manual_seed(1);
  torch::nn::Sequential b0 = block(4), b1 = block(4);
  Executor ex(two_stage_plan(), solo_group());
  ex.set_stage(0, module_stage(b0));
  // Stage 1 "checkpoints" its block the way a naive port of Python's
  // activation checkpointing does: a forward without graph, then a
  // recompute from a detached copy of the input. Its parameters get
  // gradients, but stage 0 would silently get zeros.
  ex.set_stage(1, module_stage(b1.ptr(), [m = b1.ptr()](const Values& in) -> Values {
                 const at::Tensor& x = std::get<at::Tensor>(in[0]);
                 {
                   torch::NoGradGuard no_graph;
                   (void)m->forward(x);
                 }
                 return {m->forward(x.detach())};
               }));
  ex.set_loss(square_mean());
  const std::string err = error_of<InputError>([&] { ex.step({torch::randn({4, 4})}); });
  CHECK(err ==
        "rank 0: stage 1, microbatch 0, action 1B0: stage 1 microbatch 0: the backward produced "
        "no gradient for boundary input 0 (Float[2, 4]), which requires one: the stage's outputs "
        "do not depend on it (a detach(), a NoGradGuard or a recompute from a detached copy, as "
        "a ported activation checkpoint does, cut the graph), so stage 0 would get a zero "
        "gradient; fix the forward, or if the stage really does not differentiate this input "
        "list 0 in StageModule::unused_inputs");
}

TEST_CASE("exec grads: a recompute from a detach().requires_grad_() copy is caught at the forward",
          "[exec][grad]") {
  torch::manual_seed(2);
  torch::nn::Sequential b0 = block(4), b1 = block(4);
  Executor ex(two_stage_plan(), solo_group());
  ex.set_stage(0, module_stage(b0));
  ex.set_stage(1, module_stage(b1.ptr(), [m = b1.ptr()](const Values& in) -> Values {
                 return {m->forward(std::get<at::Tensor>(in[0]).detach().requires_grad_())};
               }));
  ex.set_loss(square_mean());
  CHECK(error_of<InputError>([&] {
          ex.step({torch::randn({4, 4})});
        }) ==
        "rank 0: stage 1, microbatch 0, action 1F0: stage 1 runs on a detached copy of one of "
        "its boundary inputs (a detach().requires_grad_() of it, as a ported activation "
        "checkpoint makes): the gradient would stop there and never reach the previous stage; "
        "compute on the input itself");
}

TEST_CASE("exec grads: a listed parameter without a gradient names the stage and parameter",
          "[exec][grad]") {
  torch::manual_seed(3);
  // Stage 1 holds a second block its forward never calls.
  torch::nn::Sequential b0 = block(4), b1 = block(4), spare = block(4);
  auto stage1_module = std::make_shared<torch::nn::Module>();
  stage1_module->register_module("used", b1.ptr());
  stage1_module->register_module("spare", spare.ptr());
  auto stage1 = [&] {
    return module_stage(stage1_module, [m = b1.ptr()](const Values& in) -> Values {
      return {m->forward(std::get<at::Tensor>(in[0]))};
    });
  };
  auto run = [&](const StageModule& s1, ExecOptions o, int steps) {
    Executor ex(two_stage_plan(), solo_group(), o);
    ex.set_stage(0, module_stage(b0));
    ex.set_stage(1, s1);
    ex.set_loss(square_mean());
    for (int k = 0; k < steps; ++k) ex.step({torch::randn({4, 4})});
    return ex;
  };
  const std::string want =
      "rank 0: stage 1, microbatch 1, action 1B1: stage 1 parameter 'spare.0.weight' (shape "
      "[4, 4]) (and 1 more) received no gradient from the stage's backward in training step 0: "
      "the stage's outputs do not depend on it (a detach(), a NoGradGuard or a recompute outside "
      "autograd cut the graph, or the forward never uses it); fix the forward, or if the "
      "parameter is really unused list it in StageModule::unused_parameters "
      "(allow_unused(stage, name) for a module stage)";
  CHECK(error_of<InputError>([&] { run(stage1(), {}, 1); }) == want);
  // .grad is untouched by the refused step's stage.
  CHECK_FALSE(b1[0]->as<torch::nn::Linear>()->weight.grad().defined());

  // Opted out by name: the step runs; an unknown name is refused.
  StageModule opted = stage1();
  allow_unused(opted, "spare.0.weight");
  allow_unused(opted, "spare.0.bias");
  CHECK_NOTHROW(run(opted, {}, 2));
  CHECK(starts_with(error_of<InputError>([&] { allow_unused(opted, "spare.9.bias"); }),
                    "allow_unused: the stage has no parameter named 'spare.9.bias' (it has: "
                    "used.0.weight, used.0.bias, spare.0.weight, spare.0.bias)"));

  // Checked on the first step only, or only on demand.
  ExecOptions never;
  never.gradient_check = GradientCheck::Never;
  Executor quiet = run(stage1(), never, 2);
  CHECK(error_of<InputError>([&] { quiet.check_gradients(); }) ==
        "rank 0: stage 1 parameter 'spare.0.weight' (shape [4, 4]) (and 1 more) received no "
        "gradient from the stage's backward in training step 1: the stage's outputs do not "
        "depend on it (a detach(), a NoGradGuard or a recompute outside autograd cut the graph, "
        "or the forward never uses it); fix the forward, or if the parameter is really unused "
        "list it in StageModule::unused_parameters (allow_unused(stage, name) for a module "
        "stage)");
  ExecOptions first;
  first.gradient_check = GradientCheck::FirstStep;
  CHECK(error_of<InputError>([&] { run(stage1(), first, 1); }) == want);

  // Hand-written stages name parameters by position.
  at::Tensor w = torch::randn({4, 4}, torch::requires_grad());
  at::Tensor unused = torch::randn({3}, torch::requires_grad());
  StageModule hand = hand_stage(
      [w](const Values& in) -> Values { return {at::matmul(std::get<at::Tensor>(in[0]), w)}; },
      {w, unused});
  CHECK(error_of<InputError>([&] {
          run(hand, {}, 1);
        }).find("stage 1 parameter #1 (shape [3]) received no gradient") != std::string::npos);
  hand.unused_parameters = {unused};
  CHECK_NOTHROW(run(hand, {}, 1));
}

TEST_CASE("exec grads: a boundary input a stage only reads can be opted out", "[exec][grad]") {
  // Stage 0 hands on its activation and a float mask; stage 1 reads the mask
  // as a condition only, so the mask gets no gradient.
  at::Tensor w0 = torch::randn({4, 4}, torch::requires_grad());
  at::Tensor w1 = torch::randn({4, 4}, torch::requires_grad());
  StageModule s0 = hand_stage(
      [w0](const Values& in) -> Values {
        const at::Tensor& x = std::get<at::Tensor>(in[0]);
        return {at::matmul(x, w0), (x > 0).to(at::kFloat)};
      },
      {w0});
  StageModule s1 = hand_stage(
      [w1](const Values& in) -> Values {
        const at::Tensor& h = std::get<at::Tensor>(in[0]);
        return {at::where(std::get<at::Tensor>(in[1]) > 0, at::matmul(h, w1), h)};
      },
      {w1});
  auto run = [&](const StageModule& second) {
    Executor ex(two_stage_plan(), solo_group());
    ex.set_stage(0, s0);
    ex.set_stage(1, second);
    ex.set_loss(square_mean());
    ex.step({torch::randn({4, 4})});
  };
  CHECK(error_of<InputError>([&] {
          run(s1);
        }).find("the backward produced no gradient for boundary input 1 (Float[2, 4])") !=
        std::string::npos);
  s1.unused_inputs = {1};
  CHECK_NOTHROW(run(s1));
}

TEST_CASE(
    "exec grads: an error in a stage, the loss or a shape names rank, stage, microbatch "
    "and action",
    "[exec][grad]") {
  torch::manual_seed(4);
  torch::nn::Sequential b0 = block(4), b1 = block(4);
  auto run = [&](StageForward second, LossFn loss) {
    Executor ex(two_stage_plan(), solo_group());
    ex.set_stage(0, module_stage(b0));
    ex.set_stage(1, module_stage(b1.ptr(), std::move(second)));
    ex.set_loss(std::move(loss));
    ex.step({torch::randn({4, 4})});
  };
  auto plain = [m = b1.ptr()](const Values& in) -> Values {
    return {m->forward(std::get<at::Tensor>(in[0]))};
  };
  // A stage throwing a plain exception on its second microbatch.
  int calls = 0;
  CHECK(error_of<InputError>([&] {
          run(
              [&calls, plain](const Values& in) -> Values {
                if (++calls == 2) throw std::runtime_error("bad row");
                return plain(in);
              },
              square_mean());
        }) == "rank 0: stage 1, microbatch 1, action 1F1: bad row");
  // A torch shape error: its message, without the C++ backtrace.
  const std::string shape = error_of<InputError>([&] {
    run(
        [](const Values& in) -> Values {
          return {at::matmul(std::get<at::Tensor>(in[0]), at::ones({3, 3}))};
        },
        square_mean());
  });
  // torch's own text after the place (LibTorch 2.15 prefixes it "mm: ").
  INFO(shape);
  CHECK(starts_with(shape, "rank 0: stage 1, microbatch 0, action 1F0: "));
  CHECK(shape.find("mat1 and mat2 shapes cannot be multiplied (2x4 and 3x3)") != std::string::npos);
  CHECK(shape.find("frame #") == std::string::npos);
  // The loss runs in the last stage's forward.
  CHECK(error_of<InputError>([&] {
          run(plain, [](const Values&, const Values&) -> at::Tensor {
            throw InputError("no targets here");
          });
        }) == "rank 0: stage 1, microbatch 0, action 1F0: no targets here");
}
