// Executor hooks, in one process: observers see every action in plan order
// with timestamps, stage-gradients-ready fires after a stage's last backward
// with the gradients in place, and pass-through handlers run.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#undef CHECK
#include <catch2/catch.hpp>

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
