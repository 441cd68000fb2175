// In-process executor tests: wire encoding, refusals that happen before any
// communication, and a one-rank group running every stage of a plan.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "pipeplan/exec/c10d.h"
// glog (through c10) defines CHECK; Catch2 needs its own.
#undef CHECK
#include <catch2/catch.hpp>

#include "error_of.h"
#include "solo_group.h"

#include "exec/boundary.h"
#include "pipeplan/error.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/demo.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/launch.h"
#include "pipeplan/planner.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;
namespace xd = pipeplan::exec::detail;

using pipeplan::test::error_of;
using pipeplan::test::solo_group;

}  // namespace

TEST_CASE("exec: boundary specs survive the wire encoding", "[exec]") {
  BoundarySpec spec = {{false, at::kFloat, {4, 16}},
                       {true, at::kLong, {}},
                       {false, at::kDouble, {}},
                       {false, at::kInt, {2, 3, 5}}};
  // Compared as a bool: glog makes vectors streamable in a way Catch2 trips over.
  const bool round_trip = xd::decode_spec(xd::encode_spec(spec, at::kCPU)) == spec;
  CHECK(round_trip);
  CHECK(to_string(spec) == "Float[4, 16], int, Double[], Int[2, 3, 5]");
  CHECK(to_string(xd::gradient_spec(spec)) == "Float[4, 16], Double[]");
  // Mixed values travel as one packed message and come back equal.
  Values values = {at::randn({4, 16}), std::int64_t{7}, at::full({}, 2.5, at::kDouble),
                   at::arange(30, at::kInt).reshape({2, 3, 5})};
  BoundarySpec actual = xd::spec_of(values, 0);
  CHECK(to_string(actual) == to_string(spec));
  at::Tensor message = xd::pack(values, actual, at::kCPU);
  at::Tensor received = xd::empty_message(actual, at::kCPU);
  CHECK(received.sizes() == message.sizes());
  received.copy_(message);
  Values back = xd::unpack(received, actual);
  REQUIRE(back.size() == 4);
  CHECK(at::equal(std::get<at::Tensor>(back[0]), std::get<at::Tensor>(values[0])));
  CHECK(std::get<std::int64_t>(back[1]) == 7);
  CHECK(std::get<at::Tensor>(back[2]).item<double>() == 2.5);
  CHECK(at::equal(std::get<at::Tensor>(back[3]), std::get<at::Tensor>(values[3])));
  // A lone contiguous tensor is sent as itself, without a copy.
  at::Tensor lone = at::randn({3, 2});
  CHECK(xd::pack({lone}, xd::spec_of({lone}, 0), at::kCPU).data_ptr() == lone.data_ptr());
  // Tags of distinct (step parity, direction, stage, microbatch, index) differ.
  std::set<int> tags;
  for (int step : {0, 1})
    for (auto dir : {xd::Dir::Forward, xd::Dir::Backward, xd::Dir::Shape})
      for (int s = 0; s < 3; ++s)
        for (int m = 0; m < 2; ++m)
          for (int i = 0; i < xd::kTagsPerBoundary; ++i)
            tags.insert(xd::make_tag(step, dir, s, m, i, 3, 2));
  CHECK(tags.size() == 2u * 3 * 3 * 2 * xd::kTagsPerBoundary);
  CHECK(*tags.begin() == 0);
}

TEST_CASE("exec: prepare_plan refuses without communicating", "[exec]") {
  Plan whole = plan(Problem{"1f1b", 2, 4, 0});
  CHECK(error_of([&] { prepare_plan(whole, 0, 3, Transport::Rendezvous); }) ==
        "the plan is for pp_degree=2 ranks but the process group has world size 3; start "
        "exactly 2 ranks");
  Plan one = plan_rank(Problem{"1f1b", 2, 4, 0}, 1);
  CHECK(error_of([&] { prepare_plan(one, 0, 2, Transport::Rendezvous); }) ==
        "rank 0 is not in the plan; the plan holds the program of rank(s) 1 only, and the "
        "executor needs every rank's program to prove the plan deadlock-free before running it");
  Plan broken = whole;
  std::swap(broken.ranks[0][0], broken.ranks[0][1]);  // 0SEND_F0 before 0F0
  CHECK_THROWS_AS(prepare_plan(broken, 0, 2, Transport::Rendezvous), PlanRejected);
  // A compute-only plan is lowered with its schedule's options.
  Plan lowered = prepare_plan(plan_compute(Problem{"1f1b", 2, 4, 0}), 1, 2, Transport::Rendezvous);
  CHECK(lowered == whole);
}

TEST_CASE("exec: one rank running every stage matches the unpipelined reference", "[exec]") {
  // pp=1: every boundary is a same-rank handoff; I/W splits and V placement
  // run without any communication.
  for (const Problem& pr :
       {Problem{"interleaved-1f1b", 1, 2, 3}, Problem{"interleaved-zb", 1, 3, 3},
        Problem{"zbv", 1, 2, 2}, Problem{"gpipe", 1, 3, 1}}) {
    INFO(pr.schedule);
    Plan p = plan(pr);
    DemoConfig c;
    c.num_stages = p.meta.num_stages();
    c.dtype = at::kDouble;
    ExecOptions opts;
    opts.input_stages = demo_input_stages(c);
    Executor ex(p, 0, 1, opts);
    auto mine = demo_parameters(c), ref = demo_parameters(c);
    std::vector<StageModule> ref_stages;
    REQUIRE(ex.local_stages().size() == static_cast<std::size_t>(c.num_stages));
    for (int s = 0; s < c.num_stages; ++s) {
      ex.set_stage(s, demo_stage(c, s, mine[s]));
      ref_stages.push_back(demo_stage(c, s, ref[s]));
    }
    ex.set_loss(demo_loss(c));
    ex.connect(solo_group());
    for (int k = 1; k <= 2; ++k) {
      DemoBatch b = demo_batch(c, 2 * p.meta.num_microbatches, k);
      std::optional<double> loss = ex.step(b.inputs, b.targets);
      double want =
          run_unpipelined(ref_stages, demo_loss(c), opts.input_stages, b.inputs, b.targets);
      REQUIRE(loss.has_value());
      CHECK(*loss == Approx(want).epsilon(1e-12));
      for (int s = 0; s < c.num_stages; ++s)
        for (std::size_t i = 0; i < 2; ++i) {
          REQUIRE(mine[s][i].grad().defined());
          CHECK(at::allclose(mine[s][i].grad(), ref[s][i].grad(), 1e-10, 1e-12));
          sgd_step({mine[s][i]}, 0.1);
          sgd_step({ref[s][i]}, 0.1);
        }
    }
  }
}

TEST_CASE("exec: step() checks its inputs before communicating", "[exec]") {
  Plan p = plan(Problem{"gpipe", 1, 4, 1});
  DemoConfig c;
  ExecOptions opts;
  opts.input_stages = demo_input_stages(c);
  Executor ex(p, 0, 1, opts);
  DemoBatch b = demo_batch(c, 10, 1);
  CHECK(error_of([&] { ex.step(b.inputs, b.targets); }) ==
        "rank 0: connect() the executor to a process group first");
  ex.connect(solo_group());
  CHECK(error_of([&] { ex.step(b.inputs, b.targets); }) ==
        "rank 0: owns stage 0 but no module was registered for it (set_stage)");
  CHECK(error_of([&] { ex.set_stage(1, demo_stage(c, 0, demo_parameters(c)[0])); }) ==
        "stage 1 is not owned by rank 0 (it owns stages 0)");
  ex.set_stage(0, demo_stage(c, 0, demo_parameters(c)[0]));
  CHECK(error_of([&] { ex.step(b.inputs, b.targets); }) ==
        "rank 0: holds the last stage but no loss function was set (set_loss)");
  ex.set_loss(demo_loss(c));
  CHECK(error_of([&] { ex.step(b.inputs, b.targets); }) ==
        "a batch of 10 samples does not divide into 4 microbatches (remainder 2); use a batch "
        "size that is a multiple of 4");
  Values short_scale = {b.inputs[0], at::ones({8, 1})};
  DemoBatch ok = demo_batch(c, 8, 1);
  CHECK(error_of([&] { ex.step(short_scale, ok.targets); }) ==
        "input 1 has 8 rows but input 0 has 10; every tensor input and target must share the "
        "batch dimension");
  CHECK(error_of([&] { ex.step({ok.inputs[0]}, ok.targets); }) ==
        "rank 0: step() got 1 inputs; pass every input (2, as routed by "
        "ExecOptions::input_stages) or only those this rank's stages consume (2: input(s) 0, 1)");
  // Nothing was left half-done: a correct step still runs.
  CHECK(ex.step(ok.inputs, ok.targets).has_value());
}

TEST_CASE("exec: runs on a wrapped c10d process group and on a subgroup of it", "[exec]") {
  // A group formed by the trainer itself, as torch.distributed would.
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(free_loopback_port());
  so.isServer = true;
  so.numWorkers = 1;
  so.timeout = std::chrono::seconds(30);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(30));
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  // c10d >= 2.0: a ProcessGroup dispatching CPU tensors to its Gloo backend,
  // as torch.distributed.new_group(backend="gloo") builds it.
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(store, 0, 1);
  pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO,
                 c10::make_intrusive<c10d::ProcessGroupGloo>(store, 0, 1, opts));
  pg->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  auto world = wrap_process_group(pg, Backend::Gloo, at::kCPU, store);
  CHECK(world->rank() == 0);
  CHECK(world->size() == 1);
  CHECK(error_of([&] { world->subgroup({1}, "x", std::chrono::seconds(5)); }) ==
        "subgroup 'x': ranks must be distinct, ascending and below 1");
  auto sub = world->subgroup({0}, "pipeline", std::chrono::seconds(30));
  REQUIRE(sub != nullptr);
  at::Tensor t = at::ones({3});
  sub->allreduce_sum(t, std::chrono::seconds(5));
  CHECK(t.sum().item<double>() == 3.0);
  // Without the store a wrapped group cannot form subgroups, and says why.
  auto bare = wrap_process_group(pg, Backend::Gloo, at::kCPU);
  CHECK(error_of([&] {
          bare->subgroup({0}, "y", std::chrono::seconds(5));
        }).rfind("this communicator wraps a process group without its store", 0) == 0);
  // The executor runs on either.
  for (const auto& group : {world, sub}) {
    Plan p = plan(Problem{"interleaved-1f1b", 1, 2, 2});
    DemoConfig c;
    c.num_stages = 2;
    ExecOptions eo;
    eo.input_stages = demo_input_stages(c);
    Executor ex(p, group, eo);
    auto params = demo_parameters(c);
    for (int s = 0; s < 2; ++s) ex.set_stage(s, demo_stage(c, s, params[s]));
    ex.set_loss(demo_loss(c));
    DemoBatch b = demo_batch(c, 4, 1);
    CHECK(ex.step(b.inputs, b.targets).has_value());
    ex.shutdown();
    CHECK(error_of([&] { ex.step(b.inputs, b.targets); }) == "rank 0: the executor was shut down");
  }
}

// A replicated input: one [T, T] causal mask, not sliced, handed whole to
// both stages of every microbatch (routed as replicated_input({0, 1})),
// against the unpipelined model on the whole batch.
TEST_CASE("exec: a replicated [T, T] mask reaches every stage of every microbatch", "[exec]") {
  Plan p = plan(Problem{"interleaved-1f1b", 1, 4, 2});  // 2 stages on one rank
  constexpr std::int64_t kB = 8, kT = 6, kH = 4;
  auto o = at::TensorOptions().dtype(at::kDouble);
  at::manual_seed(3);
  std::vector<at::Tensor> pipe_w, ref_w;
  for (int s = 0; s < 2; ++s) {
    pipe_w.push_back((at::randn({kH, kH}, o) / 2).requires_grad_());
    ref_w.push_back(pipe_w.back().detach().clone().requires_grad_());
  }
  // Causal averaging over earlier positions: rows of the mask sum to one.
  at::Tensor mask = at::tril(at::ones({kT, kT}, o));
  mask = mask / mask.sum(1, true);
  auto stages_of = [](const std::vector<at::Tensor>& w) {
    std::vector<StageModule> st;
    for (int s = 0; s < 2; ++s) {
      StageModule m;
      m.forward = [w = w[s]](const Values& in) -> Values {
        const at::Tensor& x = std::get<at::Tensor>(in[0]);   // [b, T, H]
        const at::Tensor& mk = std::get<at::Tensor>(in[1]);  // after the boundary value (or x)
        if (mk.sizes() != at::IntArrayRef{kT, kT}) throw std::runtime_error("mask sliced");
        return {at::tanh(at::matmul(mk, at::matmul(x, w)))};
      };
      m.parameters = {w[s]};
      st.push_back(m);
    }
    return st;
  };
  LossFn loss = [](const Values& out, const Values& t) {
    return (std::get<at::Tensor>(out[0]) - std::get<at::Tensor>(t[0])).pow(2).mean();
  };
  ExecOptions opts;
  opts.input_stages = {0, replicated_input({0, 1})};
  Executor ex(p, solo_group(), opts);
  ex.set_stages(stages_of(pipe_w));
  ex.set_loss(loss);
  const at::Tensor x = at::randn({kB, kT, kH}, o), y = at::randn({kB, kT, kH}, o);
  std::optional<double> got = ex.step({x, mask}, {y});
  const double want = run_unpipelined(stages_of(ref_w), loss, opts.input_stages, {x, mask}, {y});
  REQUIRE(got.has_value());
  CHECK(*got == Approx(want).epsilon(1e-12));
  for (int s = 0; s < 2; ++s) CHECK(at::allclose(pipe_w[s].grad(), ref_w[s].grad(), 1e-12, 1e-12));
  // Routed as a sliced input, the [T, T] mask would be cut into microbatches:
  // its 6 rows are refused as a batch dimension against x's 8.
  ExecOptions sliced;
  sliced.input_stages = {0, {0, 1}};
  Executor wrong(p, solo_group(), sliced);
  wrong.set_stages(stages_of(pipe_w));
  wrong.set_loss(loss);
  CHECK(error_of([&] {
          wrong.step({x, mask}, {y});
        }) ==
        "input 1 has 6 rows but input 0 has 8; every tensor input and target must share the "
        "batch dimension");
}
