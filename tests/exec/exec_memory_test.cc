// In-process tests of the memory actions (RECOMPUTE, OFFLOAD, RELOAD): a
// plan with them trains exactly like the same plan without, dropout on, in
// float64 and float32, for 1f1b, interleaved-1f1b and zbv (split backward).
// One rank runs every stage (pp=1), so boundaries are same-rank handoffs;
// exec_process_test runs the same comparison over Gloo.
#include <ATen/Parallel.h>
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include "solo_group.h"

#include "memory_util.h"
#include "pipeplan/error.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/launch.h"
#include "pipeplan/exec/module.h"
#include "pipeplan/exec/trace.h"
#include "pipeplan/planner.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;

using pipeplan::test::solo_group;

// 4 blocks of Linear + dropout + GELU + LayerNorm, then a head.
torch::nn::Sequential make_model(at::ScalarType dtype) {
  torch::manual_seed(11);
  torch::nn::Sequential m;
  for (int i = 0; i < 4; ++i) {
    m->push_back(torch::nn::Linear(12, 12));
    m->push_back(torch::nn::Dropout(0.3));
    m->push_back(torch::nn::Functional(torch::gelu, "none"));
    m->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({12})));
  }
  m->push_back(torch::nn::Linear(12, 3));
  m->to(dtype);
  return m;
}

LossFn mse() {
  return [](const Values& out, const Values& y) {
    return torch::mse_loss(std::get<at::Tensor>(out.at(0)), std::get<at::Tensor>(y.at(0)));
  };
}

// Bytes each OFFLOAD / RELOAD reported, and the largest RECV/F seen.
struct MoveCounter : Observer {
  std::int64_t offloaded = 0, reloaded = 0;
  int offloads = 0, reloads = 0, recomputes = 0;
  void on_exit(const ActionEvent& e) override {
    if (e.action.type == ActionType::Offload) offloaded += e.bytes, ++offloads;
    if (e.action.type == ActionType::Reload) reloaded += e.bytes, ++reloads;
    if (e.action.type == ActionType::Recompute) ++recomputes;
  }
};

struct Run {
  std::vector<double> losses;
  std::vector<std::vector<at::Tensor>> grads;  // per step, every parameter
};

Run train(const Plan& plan, at::ScalarType dtype, const std::shared_ptr<Observer>& obs = nullptr,
          ExecOptions opt = {}) {
  torch::nn::Sequential model = make_model(dtype);
  Executor ex(plan, solo_group(), opt);
  ex.set_stages(split_sequential(model, plan.meta.num_stages()));
  ex.set_loss(mse());
  if (obs) ex.add_observer(obs);
  Run r;
  for (int k = 0; k < 3; ++k) {
    torch::manual_seed(100 + k);
    at::Tensor x = torch::randn({8, 12}, at::TensorOptions().dtype(dtype));
    at::Tensor y = torch::randn({8, 3}, at::TensorOptions().dtype(dtype));
    std::optional<double> loss = ex.step({x}, {y});
    REQUIRE(loss.has_value());
    r.losses.push_back(*loss);
    r.grads.emplace_back();
    torch::NoGradGuard g;
    for (at::Tensor& p : model->parameters()) {
      REQUIRE(p.grad().defined());
      r.grads.back().push_back(p.grad().clone());
      p.sub_(p.grad() * 0.05);
      p.mutable_grad().zero_();
    }
  }
  return r;
}

double max_diff(const Run& a, const Run& b) {
  double d = 0;
  for (std::size_t k = 0; k < a.losses.size(); ++k) {
    d = std::max(d, std::abs(a.losses[k] - b.losses[k]));
    for (std::size_t i = 0; i < a.grads[k].size(); ++i)
      d = std::max(d, (a.grads[k][i] - b.grads[k][i]).abs().max().item<double>());
  }
  return d;
}

const std::vector<Problem>& problems() {
  static const std::vector<Problem> p = {
      Problem{"1f1b", 1, 4, 0}, Problem{"interleaved-1f1b", 1, 4, 4}, Problem{"zbv", 1, 4, 0}};
  return p;
}

}  // namespace

TEST_CASE("exec memory: recompute and offload train exactly like the plan without, dropout on",
          "[exec][memory]") {
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    const double tol = dtype == at::kDouble ? 1e-10 : 1e-6;
    for (const Problem& pr : problems()) {
      const Plan base = plan(pr);
      const Run want = train(base, dtype);
      for (const std::string mode : {"recompute", "offload", "both"}) {
        INFO(pr.schedule << " " << mode << " " << (dtype == at::kDouble ? "float64" : "float32"));
        const Plan mem = test::with_memory_actions(base, mode);
        REQUIRE(mem.has_memory_actions());
        auto moves = std::make_shared<MoveCounter>();
        const Run got = train(mem, dtype, moves);
        CHECK(max_diff(got, want) <= tol);
        const int pairs = 3 * pr.num_microbatches * base.meta.num_stages();
        CHECK(moves->recomputes == (mode == "offload" ? 0 : pairs));
        CHECK(moves->offloads == (mode == "recompute" ? 0 : pairs));
        CHECK(moves->reloaded == moves->offloaded);
        if (mode != "recompute") CHECK(moves->offloaded > 0);
      }
    }
  }
}

TEST_CASE("exec memory: OFFLOAD moves the tensors autograd saved, not only the boundary",
          "[exec][memory]") {
  const Plan base = plan(Problem{"interleaved-1f1b", 1, 4, 4});
  const Plan mem = test::with_memory_actions(base, "offload");
  auto moves = std::make_shared<MoveCounter>();
  train(mem, at::kDouble, moves);
  // Stage inputs are 2 x 12 doubles per microbatch (192 bytes, 0 on stage
  // 0); a block's saved activations are several times that.
  const std::int64_t inputs_only = 3 * 4 * 3 * 2 * 12 * 8;
  CHECK(moves->offloaded > 3 * inputs_only);
}

TEST_CASE("exec memory: forward-only outputs on host, and kept outputs", "[exec][memory]") {
  const Plan base = plan(problems()[1]);
  for (const bool on_host : {false, true}) {
    for (const bool free_sent : {false, true}) {
      ExecOptions opt;
      opt.outputs_on_host = on_host;
      opt.free_sent_outputs = free_sent;
      torch::nn::Sequential model = make_model(at::kDouble);
      Executor ex(base, solo_group(), opt);
      ex.set_stages(split_sequential(model, base.meta.num_stages()));
      ex.set_loss(mse());
      ex.eval();
      at::Tensor x = torch::randn({8, 12}, at::TensorOptions().dtype(at::kDouble));
      StepResult r = ex.forward_only({x});
      model->eval();
      torch::NoGradGuard g;
      // Microbatch by microbatch, as the plan runs it: LibTorch 2.x's matmul
      // kernels depend on the row count (the whole batch differs by 1e-15).
      std::vector<at::Tensor> parts;
      for (const at::Tensor& mb : x.chunk(base.meta.num_microbatches)) parts.push_back(model->forward(mb));
      at::Tensor want = at::cat(parts);
      REQUIRE(r.outputs.size() == 1);
      const at::Tensor& got = std::get<at::Tensor>(r.outputs[0]);
      CHECK(got.is_cpu());
      CHECK(at::equal(got, want));
    }
  }
}

namespace {

// The most bytes the rank held during a traced step, and the held bytes
// after each F of that step.
struct Held {
  std::int64_t peak = 0, end = 0;
  std::vector<std::int64_t> after_f;
};

Held trace_held(const Plan& plan) {
  torch::manual_seed(5);
  torch::nn::Sequential model;
  for (int i = 0; i < 3; ++i) {
    model->push_back(torch::nn::Linear(64, 64));
    model->push_back(torch::nn::Dropout(0.2));
    model->push_back(torch::nn::Functional(torch::gelu, "none"));
  }
  model->to(torch::kDouble);
  auto tracer = std::make_shared<Tracer>();
  Executor ex(plan, tracer->wrap(solo_group()));
  ex.set_stages(split_sequential(model, plan.meta.num_stages()));
  ex.set_loss(mse());
  ex.add_observer(tracer);
  at::Tensor x = torch::randn({64, 64}, at::TensorOptions().dtype(at::kDouble));
  at::Tensor y = torch::randn({64, 64}, at::TensorOptions().dtype(at::kDouble));
  for (int k = 0; k < 2; ++k) ex.step({x}, {y});
  Held h;
  for (const TraceRecord& r : tracer->records()) {
    if (r.step != 2) continue;
    REQUIRE(r.held >= 0);
    REQUIRE(r.peak >= r.held);
    h.peak = std::max(h.peak, r.peak);
    h.end = r.held;
    if (r.action.type == ActionType::F) h.after_f.push_back(r.held);
  }
  return h;
}

}  // namespace

TEST_CASE("exec memory: the tracer's bytes held drop with recompute and with offload",
          "[exec][memory][trace]") {
  // GPipe at pp=1: all 8 forwards, then all backwards; without memory
  // actions the rank holds 8 microbatches' activations at the turn.
  const Plan base = plan(Problem{"gpipe", 1, 8, 0});
  const Held keep = trace_held(base);
  const Held rec = trace_held(test::with_memory_actions(base, "recompute"));
  const Held off = trace_held(test::with_memory_actions(base, "offload"));
  INFO("peak kept " << keep.peak << ", recomputed " << rec.peak << ", offloaded " << off.peak
                    << "; after the last F " << keep.after_f.back() << ", " << rec.after_f.back()
                    << ", " << off.after_f.back());
  // Each forward adds one microbatch's activations: the held bytes grow F by F.
  REQUIRE(keep.after_f.size() == 8);
  for (std::size_t i = 1; i < keep.after_f.size(); ++i)
    CHECK(keep.after_f[i] > keep.after_f[i - 1]);
  const std::int64_t one = keep.after_f[1] - keep.after_f[0];  // one microbatch's activations
  CHECK(keep.peak >= 8 * one);
  // Recompute keeps inputs only (8 x 8 rows x 64 doubles = 32 KiB), plus one
  // microbatch re-run at a time.
  CHECK(rec.peak <= keep.peak - 5 * one);
  CHECK(rec.after_f.back() < 8 * one / 4);
  // Offload moves each microbatch out right after its forward.
  CHECK(off.peak <= keep.peak - 5 * one);
  CHECK(off.after_f.back() < 8 * one / 4);
  // What the step leaves behind is about the same: less than one microbatch's
  // activations apart (frees on the profiler's and autograd's threads move the
  // end by up to ~24 KiB from run to run, so the bound is not tighter).
  CHECK(std::abs(rec.end - keep.end) < one);
  CHECK(std::abs(off.end - keep.end) < one);
}
