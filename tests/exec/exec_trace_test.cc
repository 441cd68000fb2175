// Tracing on the executor: the tracer's bookkeeping against a fake
// communicator (waits attributed to the action that posted them, computes
// timed after the data they waited for, the stuck-wait warning for a
// stalled peer), and real traced runs of `pipeplan train` that satisfy
// check_trace and calibrate.
#include <ATen/ATen.h>
#undef CHECK
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "pipeplan/error.h"
#include "pipeplan/exec/comm.h"
#include "pipeplan/exec/executor.h"
#include "pipeplan/exec/trace.h"
#include "pipeplan/planner.h"
#include "pipeplan/trace.h"
#include "proc_util.h"

namespace {

using namespace pipeplan;
using namespace pipeplan::exec;
using Ms = std::chrono::milliseconds;

// An operation of a peer that answers after `delay` (a stalled one when long).
class FakeOp : public PendingOp {
 public:
  explicit FakeOp(Ms delay) : delay_(delay) {}
  void wait(Ms timeout, const std::string& what) override {
    if (delay_ > timeout) {
      std::this_thread::sleep_for(timeout);
      throw CommError(what + ": timed out");
    }
    std::this_thread::sleep_for(delay_);
  }

 private:
  Ms delay_;
};

// In-process stand-in for rank 0 of a two-rank group: every operation
// completes after the delay set for its peer (sends at once when
// `delay_sends` is off); a receive delivers zeros.
class FakeComm : public Communicator {
 public:
  std::map<int, Ms> delay;
  bool delay_sends = true;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Backend backend() const override { return Backend::Gloo; }
  at::Device device() const override { return at::kCPU; }
  std::unique_ptr<PendingOp> isend(const at::Tensor&, int peer, int) override {
    return delay_sends ? op(peer) : std::make_unique<FakeOp>(Ms(0));
  }
  std::unique_ptr<PendingOp> irecv(const at::Tensor& t, int peer, int) override {
    t.zero_();
    return op(peer);
  }
  void allreduce_max(at::Tensor&, Ms) override {}
  void barrier(Ms) override {}
  std::unique_ptr<PendingOp> iallreduce_sum(const at::Tensor&) override { return op(1); }
  std::shared_ptr<Communicator> subgroup(const std::vector<int>&, const std::string&, Ms) override {
    return nullptr;
  }

 private:
  std::unique_ptr<PendingOp> op(int peer) {
    auto it = delay.find(peer);
    return std::make_unique<FakeOp>(it == delay.end() ? Ms(0) : it->second);
  }
};

ActionEvent event(const Action& a, std::size_t index, Clock::time_point start,
                  Clock::time_point end) {
  ActionEvent e;
  e.action = a;
  e.index = index;
  e.start = start;
  e.end = end;
  return e;
}

// Runs rank 0's program of `plan` through the tracer's hooks as an executor
// would: a RECV posts, its consumer waits for it (stalled by `delay`), each
// compute takes `compute`.
std::vector<TraceRecord> drive(Tracer& tracer, const Plan& plan, Ms delay, Ms compute, int steps) {
  auto fake = std::make_shared<FakeComm>();
  fake->delay[1] = delay;
  tracer.set_up(plan, 0);
  std::shared_ptr<Communicator> comm = tracer.wrap(fake);
  const auto& list = plan.ranks[0];
  at::Tensor buf = at::zeros({1});
  for (int k = 0; k < steps; ++k) {
    tracer.on_step_begin(k, false);
    std::map<std::pair<int, int>, std::unique_ptr<PendingOp>> posted;  // (stage, mb) of RECV_B
    std::vector<std::unique_ptr<PendingOp>> sends;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const auto t0 = Clock::now();
      tracer.on_entry(event(a, i, t0, t0));
      if (a.type == ActionType::RecvB) posted[{a.stage, a.microbatch}] = comm->irecv(buf, 1, 0);
      if (a.type == ActionType::SendF) sends.push_back(comm->isend(buf, 1, 0));
      if (a.type == ActionType::B) {
        posted.at({a.stage, a.microbatch})->wait(Ms(10000), "rank 0: 0RECV_B from rank 1");
        std::this_thread::sleep_for(compute);
      }
      if (a.type == ActionType::F) std::this_thread::sleep_for(compute);
      ActionEvent e = event(a, i, t0, Clock::now());
      if (is_comm(a.type)) e.bytes = 4;
      tracer.on_exit(e);
    }
    for (auto& s : sends) s->wait(Ms(10000), "rank 0: send");
    tracer.on_step_end(k, false);
  }
  return tracer.records();
}

struct Exits : Observer {
  std::vector<ActionEvent> events;
  void on_exit(const ActionEvent& e) override { events.push_back(e); }
};

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// One training step of rank 0 of `plan` (two stages, one per rank) as the
// executor runs it over the fake group, traced, its peer answering every
// receive after 30 ms; stage 0 is one small matmul. Returns the events.
std::vector<ActionEvent> step_on_slow_peer(const Plan& plan,
                                           const std::shared_ptr<Tracer>& tracer) {
  auto fake = std::make_shared<FakeComm>();
  fake->delay[1] = Ms(30);
  fake->delay_sends = false;
  ExecOptions opts;
  opts.output_specs[0] = {ValueSpec{false, at::kFloat, {2, 4}}};  // no shape header
  Executor ex(plan, tracer->wrap(fake), opts);
  at::Tensor w = at::randn({4, 4}).requires_grad_(true);
  StageModule stage;
  stage.forward = [w](const Values& in) {
    return Values{at::matmul(std::get<at::Tensor>(in.at(0)), w)};
  };
  stage.parameters = {w};
  ex.set_stage(0, stage);
  ex.add_observer(tracer);
  auto exits = std::make_shared<Exits>();
  ex.add_observer(exits);
  ex.step({at::randn({4, 4})}, {});
  CHECK(w.grad().defined());
  return exits->events;
}

}  // namespace

TEST_CASE("exec observer: an action's wait on a slow peer is apart from its compute",
          "[exec][trace][hooks]") {
  const Plan plan = pipeplan::plan(Problem{"1f1b", 2, 2});
  // rank 0: 0F0 0SEND_F0 0F1 0RECV_B0 0SEND_F1 0B0 0RECV_B1 0B1
  TracerOptions o;
  o.warn_after = Ms(0);
  auto tracer = std::make_shared<Tracer>(o);
  const std::vector<ActionEvent> events = step_on_slow_peer(plan, tracer);
  const std::vector<TraceRecord> recs = tracer->records();
  REQUIRE(events.size() == plan.ranks[0].size());
  REQUIRE(recs.size() == events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const ActionEvent& e = events[i];
    INFO(to_string(e.action));
    CHECK(e.index == i);
    CHECK(e.compute() == e.end - e.start - e.wait);
    CHECK(e.wait <= e.end - e.start);
    const bool waits = e.action.type == ActionType::B;  // each B waits for its RECV_B
    if (waits) {
      CHECK(ms(e.wait) >= 25.0);
      CHECK(ms(e.compute()) < 20.0);
    } else {
      // No wait at all: the RECVs only post, the SENDs' peer takes them at once.
      CHECK(e.wait == Clock::duration::zero());
    }
    // The tracer's compute slice and post are the event's own work.
    const TraceRecord& r = recs[i];
    if (is_compute(e.action.type)) CHECK(r.end - r.start == Approx(ms(e.compute())).margin(2.0));
    else CHECK(r.post == Approx(ms(e.compute())).margin(2.0));
  }
  // The wait itself is the RECV_B's, which posted it.
  CHECK(recs[3].wait >= 25.0);
  CHECK(recs[6].wait >= 25.0);
}

TEST_CASE("exec observer: a BATCH_P2P group's wait is its last member's", "[exec][trace][hooks]") {
  LowerOptions batched;
  batched.batch_p2p = true;
  const Plan plan = pipeplan::plan(Problem{"1f1b", 2, 2}, batched);
  REQUIRE(to_string(plan.ranks[0]) ==
          "0F0 0SEND_F0 0F1 (0RECV_B0;0SEND_F1)BATCH_P2P 0B0 0RECV_B1 0B1");
  TracerOptions o;
  o.warn_after = Ms(0);
  auto tracer = std::make_shared<Tracer>(o);
  const std::vector<ActionEvent> events = step_on_slow_peer(plan, tracer);
  const std::vector<TraceRecord> recs = tracer->records();
  REQUIRE(events.size() == 8);
  REQUIRE(recs.size() == 8);
  // 0SEND_F1 closes the group: its on_exit comes once 0RECV_B0 is in.
  const ActionEvent& last = events[4];
  REQUIRE(to_string(last.action) == "0SEND_F1");
  CHECK(ms(last.wait) >= 25.0);
  CHECK(ms(last.end - last.start) >= 25.0);
  CHECK(ms(last.compute()) < 20.0);
  CHECK(events[3].wait == Clock::duration::zero());  // 0RECV_B0, the first member
  CHECK(ms(events[5].wait) < 20.0);                  // 0B0: its gradient is in already
  CHECK(ms(events[7].wait) >= 25.0);                 // 0B1 waits for 0RECV_B1
  // The tracer: the post is the member's own work, the wait the RECV's.
  CHECK(recs[4].post == Approx(ms(last.compute())).margin(2.0));
  CHECK(recs[4].wait < 20.0);  // its own send completed at once
  CHECK(recs[3].wait >= 25.0);
}

TEST_CASE("exec trace: waits go to the action that posted them, computes start after their data",
          "[exec][trace]") {
  const Plan plan = pipeplan::plan(Problem{"1f1b", 2, 2});
  // rank 0: 0F0 0SEND_F0 0F1 0RECV_B0 0SEND_F1 0B0 0RECV_B1 0B1
  TracerOptions o;
  o.warn_after = Ms(0);
  Tracer tracer(o);
  const std::vector<TraceRecord> recs = drive(tracer, plan, Ms(30), Ms(5), 2);
  REQUIRE(recs.size() == 2 * plan.ranks[0].size());
  for (std::size_t k = 0; k < recs.size(); ++k) {
    const TraceRecord& r = recs[k];
    const std::size_t i = k % plan.ranks[0].size();
    CHECK(r.step == static_cast<int>(k / plan.ranks[0].size()) + 1);
    CHECK(r.index == static_cast<int>(i));
    CHECK(r.action == plan.ranks[0][i]);
    CHECK(r.end >= r.start);
  }
  const TraceRecord& recv = recs[3];  // 0RECV_B0
  const TraceRecord& b0 = recs[5];    // 0B0 waited for it
  REQUIRE(to_string(recv.action) == "0RECV_B0");
  REQUIRE(to_string(b0.action) == "0B0");
  CHECK(recv.wait >= 25.0);
  // The compute starts when its data arrived: the wait is not compute time.
  CHECK(b0.start == Approx(recv.end).margin(1e-6));
  CHECK(b0.end - b0.start >= 4.0);
  CHECK(recv.bytes == 4);
  CHECK(tracer.clock_offset_ms() == 0.0);
}

TEST_CASE("exec trace: a stalled peer is named in a warning well before the timeout",
          "[exec][trace]") {
  const Plan plan = pipeplan::plan(Problem{"1f1b", 2, 2});
  std::mutex mu;
  std::vector<std::string> warnings;
  TracerOptions o;
  o.record = false;
  o.warn_after = Ms(60);
  o.warn = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mu);
    warnings.push_back(m);
  };
  Tracer tracer(o);
  const auto t0 = std::chrono::steady_clock::now();
  drive(tracer, plan, Ms(200), Ms(1), 1);
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(!warnings.empty());
  CHECK(warnings.front().rfind("rank 0 waiting 0.", 0) == 0);
  CHECK(warnings.front().find(" s at 0RECV_B0 for rank 1") != std::string::npos);
  // One warning per threshold a wait lasted, not a flood (a loaded machine
  // may stretch the 200 ms stall, so the bound comes from the time taken).
  int at_recv = 0;
  for (const auto& w : warnings) at_recv += w.find("at 0RECV_B0 for rank 1") != std::string::npos;
  CHECK(at_recv >= 1);
  CHECK(static_cast<double>(warnings.size()) <= elapsed_ms / 60.0 + 1.0);
  CHECK(tracer.records().empty());  // record = false
}

TEST_CASE("exec trace: pipeplan train --trace records every action of every step",
          "[exec][trace]") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-s", "1f1b", "-p", "2", "-m", "4"},
           {"-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", "2"},
           {"-s", "zbv", "-p", "2", "-m", "4"}}) {
    const std::string dir = test::make_temp_dir("pipeplan-trace");
    const std::string chrome = dir + "/trace.json", table = dir + "/records.json";
    std::vector<std::string> cmd = {PIPEPLAN_BINARY, "train"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    for (const char* x : {"--steps", "3", "--width", "64", "--timeout", "60"}) cmd.push_back(x);
    cmd.insert(cmd.end(), {"--trace", chrome, "--trace-records", table});
    const auto r = test::run(cmd);
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    const Plan lowered = pipeplan::plan(Problem{args[1], 2, 4, args.size() > 6 ? 2 : 0});
    for (const std::string& file : {chrome, table}) {
      const Trace t = parse_trace_json(test::slurp(file), file);
      CHECK(t.plan == lowered);
      CHECK(t.num_steps() == 3);
      CHECK(t.records.size() == 3 * lowered.num_actions());
      // Plan order per rank, no overlap, dependencies across ranks in time.
      const auto problems = check_trace(t);
      std::string list;
      for (const auto& p : problems) list += p + "\n";
      INFO(list);
      CHECK(problems.empty());
      const Calibration c = calibrate(t);
      CHECK(c.steps_used == 2);
      CHECK(static_cast<int>(c.stage_ms.size()) == lowered.meta.num_stages());
      for (const auto& [stage, d] : c.stage_ms) CHECK(d.f > 0);
    }
  }
}

TEST_CASE("exec trace: compute times come from the device clock when one is given",
          "[exec][trace]") {
  // A device whose work runs 100 ms after the host launched it, 2 ms each.
  struct FakeDevice : DeviceClock {
    std::vector<double> marks;
    double t = 0;
    int steps = 0;
    void begin_step(double host_ms) override {
      marks.clear();
      t = host_ms + 100.0;
      ++steps;
    }
    void mark(std::size_t, bool end) override {
      if (!end) t += 1.0;
      marks.push_back(end ? t += 2.0 : t);
    }
    std::vector<double> resolve() override { return marks; }
  };
  auto device = std::make_shared<FakeDevice>();
  const Plan plan = pipeplan::plan(Problem{"1f1b", 2, 2});
  TracerOptions o;
  o.warn_after = Ms(0);
  o.device_clock = device;
  Tracer tracer(o);
  const std::vector<TraceRecord> recs = drive(tracer, plan, Ms(0), Ms(0), 1);
  CHECK(device->steps == 1);
  double last_end = 0;
  int computes = 0;
  for (const TraceRecord& r : recs) {
    if (!is_compute(r.action.type)) continue;
    ++computes;
    CHECK(r.end - r.start == Approx(2.0));
    CHECK(r.start >= last_end + 1.0 - 1e-9);
    last_end = r.end;
  }
  CHECK(computes == 4);
  CHECK(device->marks.size() == 8);
}
