// Executor hooks, in one process: observers see every action in plan order
// with timestamps, stage-gradients-ready fires after a stage's last backward
// with the gradients in place, and pass-through handlers run.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#undef CHECK
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "solo_group.h"

#include "pipeplan/error.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/demo.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/hooks.h"
#include "pipeplan/exec/launch.h"
#include "pipeplan/planner.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;

using pipeplan::test::solo_group;

struct Recorder : Observer {
  int set_up_calls = 0;
  std::vector<std::string> log;  // "begin", actions, "ready S", "end"
  std::vector<ActionEvent> exits;
  std::vector<std::vector<at::Tensor>> ready_grads;
  std::vector<std::pair<int, bool>> steps;
  void set_up(const Plan& /*plan*/, int rank) override {
    ++set_up_calls;
    CHECK(rank == 0);
  }
  void on_step_begin(int step, bool fwd) override {
    steps.emplace_back(step, fwd);
    log.push_back("begin");
  }
  void on_entry(const ActionEvent& e) override {
    CHECK(e.start == e.end);
    log.push_back(">" + to_string(e.action));
  }
  void on_exit(const ActionEvent& e) override {
    CHECK(e.end >= e.start);
    log.push_back("<" + to_string(e.action));
    exits.push_back(e);
  }
  void on_stage_grads_ready(int stage, const std::vector<at::Tensor>& params) override {
    log.push_back("ready " + std::to_string(stage));
    std::vector<at::Tensor> g;
    for (const at::Tensor& p : params) {
      REQUIRE(p.grad().defined());
      g.push_back(p.grad().clone());
    }
    ready_grads.push_back(g);
  }
  void on_step_end(int /*step*/, bool /*fwd*/) override { log.push_back("end"); }
};

}  // namespace

TEST_CASE("exec hooks: observers see every action in plan order", "[exec][hooks]") {
  Plan p = plan(Problem{"zbv", 1, 2, 0});  // two stages on one rank, I/W split
  DemoConfig c;
  c.num_stages = p.meta.num_stages();
  c.dtype = at::kDouble;
  ExecOptions opts;
  opts.input_stages = demo_input_stages(c);
  Executor ex(p, 0, 1, opts);
  auto params = demo_parameters(c);
  for (int s = 0; s < c.num_stages; ++s) ex.set_stage(s, demo_stage(c, s, params[s]));
  ex.set_loss(demo_loss(c));
  ex.connect(solo_group());
  auto rec = std::make_shared<Recorder>();
  ex.add_observer(rec);
  CHECK(rec->set_up_calls == 1);
  DemoBatch b = demo_batch(c, 4, 1);
  REQUIRE(ex.step(b.inputs, b.targets).has_value());

  // Entry and exit bracket each action, in the program's order.
  const auto& program = ex.plan().ranks[0];
  std::vector<std::string> actions;
  for (const std::string& s : rec->log)
    if (s[0] == '<') actions.push_back(s.substr(1));
  REQUIRE(actions.size() == program.size());
  for (std::size_t i = 0; i < program.size(); ++i) {
    CHECK(actions[i] == to_string(program[i]));
    CHECK(rec->exits[i].index == i);
    CHECK(rec->exits[i].step == 0);
    CHECK(rec->exits[i].rank == 0);
    if (i > 0) CHECK(rec->exits[i].start >= rec->exits[i - 1].end);
    CHECK(rec->exits[i].wait == Clock::duration::zero());  // one rank: no peer to wait for
    CHECK(rec->exits[i].compute() == rec->exits[i].end - rec->exits[i].start);
  }
  CHECK(rec->log.front() == "begin");
  CHECK(rec->log.back() == "end");
  // "ready S" comes right after the entry of the stage's last B/W, before its exit.
  for (int s = 0; s < c.num_stages; ++s) {
    auto ready = std::find(rec->log.begin(), rec->log.end(), "ready " + std::to_string(s));
    REQUIRE(ready != rec->log.end());
    std::size_t last_bw = 0;
    for (std::size_t i = 0; i < program.size(); ++i)
      if ((program[i].type == ActionType::W || program[i].type == ActionType::B) &&
          program[i].stage == s)
        last_bw = i;
    CHECK(*(ready - 1) == ">" + to_string(program[last_bw]));
    CHECK(*(ready + 1) == "<" + to_string(program[last_bw]));
  }
  // The gradients seen in the hook are the step's final gradients.
  REQUIRE(rec->ready_grads.size() == 2);
  // zbv: stage 0's backward finishes last, so it is the second "ready".
  for (std::size_t i = 0; i < 2; ++i) CHECK(at::equal(rec->ready_grads[1][i], params[0][i].grad()));

  // A forward-only step reports only F/SEND_F/RECV_F and no gradients.
  rec->log.clear();
  rec->ready_grads.clear();
  StepResult r = ex.forward_only(b.inputs, b.targets);
  CHECK(rec->steps.back() == std::make_pair(1, true));
  CHECK(rec->ready_grads.empty());
  for (const std::string& s : rec->log)
    if (s[0] == '<') CHECK(s.find('F') != std::string::npos);

  // Detached: no more events.
  ex.remove_observer(rec);
  rec->log.clear();
  ex.step(b.inputs, b.targets);
  CHECK(rec->log.empty());
}

TEST_CASE("exec hooks: UNSHARD / RESHARD / REDUCE_GRAD run their handlers", "[exec][hooks]") {
  Plan p = plan(Problem{"1f1b", 1, 2, 0});
  // FSDP-style: gather before the first forward, free after, reduce at the end.
  auto& prog = p.ranks[0];
  prog.insert(prog.begin(), Action{ActionType::Unshard, 0, -1, -1, -1});
  prog.insert(prog.begin() + 2, Action{ActionType::Reshard, 0, -1, -1, -1});
  prog.push_back(Action{ActionType::ReduceGrad, 0, -1, -1, -1});
  DemoConfig c;
  c.num_stages = 1;
  ExecOptions opts;
  opts.input_stages = demo_input_stages(c);
  Executor ex(p, 0, 1, opts);
  auto params = demo_parameters(c);
  ex.set_stage(0, demo_stage(c, 0, params[0]));
  ex.set_loss(demo_loss(c));
  ex.connect(solo_group());
  std::vector<std::string> calls;
  auto handler = [&calls, &params](const PassThrough& ctx) {
    calls.push_back(std::string(to_string(ctx.action.type)) + " " +
                    std::to_string(ctx.action.stage) + " step " + std::to_string(ctx.step));
    REQUIRE(ctx.parameters.size() == 2);
    CHECK(ctx.parameters[0].is_same(params[0][0]));
    if (ctx.action.type == ActionType::ReduceGrad) CHECK(ctx.parameters[0].grad().defined());
  };
  ex.set_handler(ActionType::Unshard, handler);
  ex.set_handler(ActionType::Reshard, handler);
  ex.set_handler(ActionType::ReduceGrad, handler);
  CHECK_THROWS_AS(ex.set_handler(ActionType::F, handler), InputError);
  DemoBatch b = demo_batch(c, 4, 1);
  ex.step(b.inputs, b.targets);
  CHECK(calls ==
        std::vector<std::string>{"UNSHARD 0 step 0", "RESHARD 0 step 0", "REDUCE_GRAD 0 step 0"});
  // Without handlers they are skipped, as before.
  ex.set_handler(ActionType::Unshard, nullptr);
  ex.set_handler(ActionType::Reshard, nullptr);
  ex.set_handler(ActionType::ReduceGrad, nullptr);
  calls.clear();
  ex.step(b.inputs, b.targets);
  CHECK(calls.empty());
}

namespace {

// Rank `rank` of a two-rank 1f1b step over Gloo, in a thread of this
// process: stage 0 a matmul, stage 1 a matmul whose forward also sleeps
// `slow` (the slow peer). Returns the on_exit events, or the error.
struct RankRun {
  std::vector<ActionEvent> events;
  std::string error;
};

// Keeps the on_exit events (no Catch assertions: it runs on a rank's thread).
struct Exits : Observer {
  std::vector<ActionEvent> events;
  void on_exit(const ActionEvent& e) override { events.push_back(e); }
};

RankRun run_rank(const Plan& p, int rank, int port, std::chrono::milliseconds slow) {
  RankRun out;
  try {
    DistEnv env;
    env.rank = rank;
    env.world_size = 2;
    env.master_port = port;
    Executor ex(p, Communicator::connect(env, Backend::Gloo, std::chrono::seconds(30)));
    at::Tensor w = at::full({4, 4}, 0.1, at::kFloat).requires_grad_(true);
    StageModule stage;
    stage.parameters = {w};
    stage.forward = [w, rank, slow](const Values& in) {
      if (rank == 1) std::this_thread::sleep_for(slow);
      return Values{at::matmul(std::get<at::Tensor>(in.at(0)), w)};
    };
    ex.set_stage(rank, stage);
    ex.set_loss([](const Values& o, const Values&) { return std::get<at::Tensor>(o[0]).sum(); });
    auto exits = std::make_shared<Exits>();
    ex.add_observer(exits);
    ex.step(rank == 0 ? Values{at::ones({4, 4})} : Values{}, {});
    ex.shutdown();
    out.events = exits->events;
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

TEST_CASE("exec hooks: over Gloo, the rank waiting for a slow peer sees the wait in its events",
          "[exec][hooks]") {
  const Plan p = plan(Problem{"1f1b", 2, 2});
  // rank 0: 0F0 0SEND_F0 0F1 0RECV_B0 0SEND_F1 0B0 0RECV_B1 0B1
  // rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1
  // Slow enough that rank 0's own work between 0SEND_F0 and 0B0 (a few
  // matmuls and posts, preempted at worst on a loaded machine) stays far
  // below it.
  const std::chrono::milliseconds slow(100);
  const int port = free_loopback_port();
  RankRun r1;
  std::thread peer([&] { r1 = run_rank(p, 1, port, slow); });
  RankRun r0 = run_rank(p, 0, port, slow);
  peer.join();
  INFO(r0.error << r1.error);
  REQUIRE(r0.error.empty());
  REQUIRE(r1.error.empty());
  REQUIRE(r0.events.size() == p.ranks[0].size());
  REQUIRE(r1.events.size() == p.ranks[1].size());
  for (const RankRun* r : {&r0, &r1})
    for (const ActionEvent& e : r->events) {
      CHECK(e.wait >= Clock::duration::zero());
      CHECK(e.wait <= e.end - e.start);
    }
  // Rank 0's 0B0 waits for the gradient of rank 1's slow forward: waiting,
  // not compute. Its 0F0 and 0F1 wait for nothing.
  const ActionEvent& b0 = r0.events[5];
  REQUIRE(to_string(b0.action) == "0B0");
  CHECK(ms(b0.wait) >= 0.5 * static_cast<double>(slow.count()));
  CHECK(b0.compute() < b0.wait);
  CHECK(r0.events[0].wait == Clock::duration::zero());
  CHECK(r0.events[2].wait == Clock::duration::zero());
  // Rank 1's slow forwards are compute, not waiting.
  for (std::size_t i : {1, 5}) {
    const ActionEvent& f = r1.events[i];
    INFO(to_string(f.action));
    REQUIRE(f.action.type == ActionType::F);
    CHECK(ms(f.compute()) >= static_cast<double>(slow.count()));
    CHECK(f.wait < f.compute());
  }
}
