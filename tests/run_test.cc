// The execution core (src/run/): the five passes that run a plan on it agree
// on makespans and verdicts over every library schedule and a grid of shapes,
// costs, transfer latencies and transports, and on orders that cannot run.
#include <catch2/catch.hpp>

#include <random>
#include <sstream>

#include "lower/timing.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "run/core.h"
#include "search/greedy.h"
#include "search/improve.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

// A policy of the core for its own tests: F(s, k) on any rank waits until
// rank s has passed k actions; every run is logged as (rank, index).
template <run::Order O>
class Gate : public run::Core<Gate<O>> {
 public:
  static constexpr run::Order kOrder = O;
  std::vector<std::pair<int, int>> log;
  bool force_honoured = true;
  int stalls = 0;

  explicit Gate(const std::vector<std::vector<Action>>& programs) : programs_(programs) {}
  void go() {
    this->start(programs_);
    this->run();
  }

 private:
  friend class run::Core<Gate<O>>;
  run::Step compute(int r, std::size_t i, const Action& a) {
    if (!forcing_ && this->pc(a.stage) < static_cast<std::size_t>(a.microbatch))
      return run::Step::Wait;
    if (forcing_ && !force_honoured) return run::Step::Wait;
    forcing_ = false;
    log.push_back({r, static_cast<int>(i)});
    for (int x = 0; x < this->num_ranks(); ++x) this->wake(x);
    return run::Step::Next;
  }
  int stalled() {
    for (int r = 0; r < this->num_ranks(); ++r)
      if (this->pc(r) < programs_[static_cast<std::size_t>(r)].size()) {
        ++stalls;
        forcing_ = true;
        return r;
      }
    return -1;
  }
  const std::vector<std::vector<Action>>& programs_;
  bool forcing_ = false;
};

std::vector<std::vector<Action>> gates(const std::vector<std::vector<std::pair<int, int>>>& spec) {
  std::vector<std::vector<Action>> out;
  for (const auto& rank : spec) {
    out.emplace_back();
    for (auto [s, k] : rank) out.back().push_back(make(ActionType::F, s, k));
  }
  return out;
}

// The core's transport with a toy op: a send or receive of one value.
struct ToyOp {
  std::int32_t index = -1;
  int value = 0;
  bool send = false;
};

class Wire : public run::Core<Wire, ToyOp> {
 public:
  static constexpr run::Order kOrder = run::Order::Queue;
  std::vector<std::string> log;

  Wire(const Plan& plan, Transport model) : plan_(plan) { connect(plan.meta, model); }
  void go() {
    start(plan_.ranks);
    run();
  }

 private:
  friend class run::Core<Wire, ToyOp>;
  // A SEND/RECV of (stage, mb) carries value mb across its boundary; a
  // RECV waits for nothing (the test reads the log).
  run::Step transfer(int r, std::size_t i, const Action& a) {
    const int boundary = std::min(a.stage, deps::peer_stage(a));
    const ToyOp op{static_cast<std::int32_t>(i), a.microbatch, is_send(a.type)};
    const int e = end_of(boundary, r);
    post(r, e, op, op.send);
    return run::Step::Next;
  }
  bool meet(int xe, const ToyOp& x, int ye, const ToyOp& y) {
    if (x.send == y.send) {
      log.push_back("stall " + std::to_string(end(xe).rank) + ":" + std::to_string(x.index) + " " +
                    std::to_string(end(ye).rank) + ":" + std::to_string(y.index));
      return false;
    }
    return true;
  }
  double complete(int xe, const ToyOp& x, int ye, const ToyOp& y, double busy) {
    log.push_back(std::to_string(end(xe).rank) + ":" + std::to_string(x.index) + "=" +
                  std::to_string(end(ye).rank) + ":" + std::to_string(y.index) +
                  (x.value == y.value ? "" : " corrupt") + " after " + std::to_string(busy));
    return busy + 1.0;
  }
  void on_sent(int e, const ToyOp& op) {
    log.push_back("sent " + std::to_string(end(e).rank) + ":" + std::to_string(op.index));
  }
  void on_delivered(int se, const ToyOp& s, int re, const ToyOp& r) {
    log.push_back("delivered " + std::to_string(end(re).rank) + ":" + std::to_string(r.index) +
                  " from " + std::to_string(end(se).rank) + ":" + std::to_string(s.index) +
                  (s.value == r.value ? "" : " corrupt"));
  }
  void on_waiting(int e, const ToyOp& op) {
    log.push_back("waiting " + std::to_string(end(e).rank) + ":" + std::to_string(op.index));
  }

  const Plan& plan_;
};

Plan wire_plan(int p, const std::vector<std::string>& ranks) {
  Plan plan;
  plan.meta = PlanMeta{"custom", p, 4, 1, StageMapping::Loop, {}};
  for (int r = 0; r < p; ++r) {
    plan.rank_ids.push_back(r);
    plan.ranks.push_back(test::actions(ranks[static_cast<std::size_t>(r)]));
  }
  return plan;
}

const Transport kModels[] = {Transport::Rendezvous, Transport::Eager, Transport::Serial};

// The cost models of the grid: unit and uneven compute costs (per type and per
// stage), each without and with a transfer cost.
std::vector<std::pair<std::string, CostModel>> cost_grid(int num_stages) {
  std::vector<std::pair<std::string, CostModel>> out;
  CostModel unit;
  out.push_back({"unit", unit});
  CostModel uneven;
  uneven.f = 1.5, uneven.b = 2.75, uneven.i = 1.25, uneven.w = 1.5;
  for (int s = 0; s < num_stages; s += 2) uneven.stage_scales[s] = StageScale{1.25, 0.75, 1.5, 0.5};
  out.push_back({"uneven", uneven});
  for (auto [name, c] : std::vector<std::pair<std::string, CostModel>>(out)) {
    c.comm_latency = 0.375;
    out.push_back({name + " + latency 0.375", c});
  }
  return out;
}

bool plain_compute(const Plan& plan) {
  for (const auto& list : plan.ranks)
    for (const Action& a : list)
      if (a.type == ActionType::OverlapFB || !is_compute(a.type)) return false;
  return true;
}

double timing_makespan(const detail::Timing& t) {
  double m = 0.0;
  for (const auto& rank : t.end)
    for (double e : rank) m = std::max(m, e);
  return m;
}

// The makespan write_timeline prints ("... makespan N"), and whether it had to
// start stuck actions anyway.
std::pair<int, bool> timeline_makespan(const Plan& plan) {
  std::ostringstream s;
  write_timeline(plan, s);
  const std::string text = s.str();
  const auto at = text.find("makespan ");
  REQUIRE(at != std::string::npos);
  return {std::stoi(text.substr(at + 9)), text.find("cannot run as written") != std::string::npos};
}

}  // namespace

TEST_CASE("run: the worklist disciplines visit ranks in their order", "[run]") {
  // Rank 0 waits at its second action for rank 1, which rank 2 waits for.
  const auto programs = gates({{{0, 0}, {1, 1}, {0, 0}}, {{0, 1}, {1, 0}}, {{1, 2}}});
  using Log = std::vector<std::pair<int, int>>;
  Gate<run::Order::Queue> queue(programs);
  queue.go();
  CHECK(queue.log == Log{{0, 0}, {1, 0}, {1, 1}, {2, 0}, {0, 1}, {0, 2}});
  Gate<run::Order::Stack> stack(programs);
  stack.go();
  CHECK(stack.log == Log{{0, 0}, {1, 0}, {1, 1}, {0, 1}, {0, 2}, {2, 0}});
  Gate<run::Order::Sweep> sweep(programs);
  sweep.go();
  CHECK(sweep.log == Log{{0, 0}, {1, 0}, {1, 1}, {2, 0}, {0, 1}, {0, 2}});
  for (int r = 0; r < 3; ++r) CHECK(sweep.pc(r) == programs[static_cast<std::size_t>(r)].size());
  CHECK(sweep.stalls == 0);
}

TEST_CASE("run: stalled() forces one action at a time, and a refused force ends the run", "[run]") {
  // Each rank waits for the other: a cycle only forcing breaks.
  const auto programs = gates({{{1, 1}, {1, 2}}, {{0, 1}, {0, 2}}});
  Gate<run::Order::Sweep> forced(programs);
  forced.go();
  CHECK(forced.log == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}, {1, 1}});
  CHECK(forced.stalls == 2);
  Gate<run::Order::Queue> refused(programs);
  refused.force_honoured = false;
  refused.go();  // returns: the policy would not run what it was asked to force
  CHECK(refused.log.empty());
  CHECK(refused.stalls == 1);
}

TEST_CASE("run: the transport matches pair positions in order under each model", "[run]") {
  // Rank 0 sends values 0 and 1; rank 1 receives them the other way round.
  const Plan swapped = wire_plan(2, {"0SEND_F0 0SEND_F1", "1RECV_F1 1RECV_F0"});
  Wire rv(swapped, Transport::Rendezvous);
  rv.go();
  CHECK(rv.log == std::vector<std::string>{"0:0=1:0 corrupt after 0.000000",
                                           "0:1=1:1 corrupt after 1.000000"});
  CHECK(rv.end(0).done == 2);
  CHECK(rv.end(1).last_done == 1);
  // Eager matches by order too: the sends complete at once (waiting for
  // their receives), each receive when the send of its place was posted.
  Wire eager(swapped, Transport::Eager);
  eager.go();
  CHECK(eager.log == std::vector<std::string>{"sent 0:0", "waiting 0:0", "sent 0:1", "waiting 0:1",
                                              "delivered 1:0 from 0:0 corrupt",
                                              "delivered 1:1 from 0:1 corrupt"});
  // Two sends meet: the pair stalls for good, under rendezvous (seen from
  // the pair, lower rank first) and serial (from the stream that posted last).
  const Plan both_send = wire_plan(2, {"0SEND_F0", "1SEND_B1"});
  for (Transport t : {Transport::Rendezvous, Transport::Serial}) {
    Wire w(both_send, t);
    w.go();
    CHECK(w.log ==
          std::vector<std::string>{t == Transport::Serial ? "stall 1:0 0:0" : "stall 0:0 1:0"});
    CHECK(w.pairs()[0].broken);
  }
  // Rank 1 sends to rank 2, then receives from rank 0. Under rendezvous each
  // pair completes once both ends posted (0-1 first, as rank 2 posts last);
  // under serial rank 1's one stream takes its send first, and the receive
  // waits for the stream to be free.
  const Plan chain = wire_plan(3, {"0SEND_F0", "1SEND_F1 1RECV_F0", "2RECV_F1"});
  Wire pairs(chain, Transport::Rendezvous), one_stream(chain, Transport::Serial);
  pairs.go();
  one_stream.go();
  CHECK(pairs.log == std::vector<std::string>{"0:0=1:1 after 0.000000", "1:0=2:0 after 0.000000"});
  CHECK(one_stream.log ==
        std::vector<std::string>{"2:0=1:0 after 0.000000", "1:1=0:0 after 1.000000"});
}

TEST_CASE("run: the five interpreters agree on makespans and verdicts over the schedule grid",
          "[run]") {
  int shapes = 0, lowered_runs = 0;
  for (const auto& info : schedules()) {
    for (int p : {1, 2, 3, 4, 5})
      for (int m : {1, 2, 3, 4, 5, 8, 12})
        for (int v : {1, 2, 3, 4}) {
          const Problem pr{info.name, p, m, v};
          Plan compute;
          try {
            compute = plan_compute(pr);
          } catch (const ShapeError&) {
            continue;
          }
          ++shapes;
          INFO(info.name << " p=" << p << " m=" << m << " v=" << v);
          const int S = compute.meta.num_stages();
          // The text timeline: unit costs, comms free; the simulator's
          // default cost model is the same unit costs.
          const SimResult unit = simulate(compute);
          REQUIRE(unit.ok());
          const auto [drawn, forced] = timeline_makespan(compute);
          CHECK_FALSE(forced);
          CHECK(drawn == unit.makespan);
          for (const auto& [name, costs] : cost_grid(S)) {
            INFO(name);
            SimOptions so;
            so.costs = costs;
            // Compute-only: the simulator, lowering's timing and the search's.
            const SimResult sim = simulate(compute, so);
            REQUIRE(sim.ok());
            const detail::Timing timing = detail::time_compute(compute, costs);
            REQUIRE(timing.complete);
            CHECK(timing_makespan(timing) == sim.makespan);
            for (std::size_t r = 0; r < compute.ranks.size(); ++r)
              for (std::size_t i = 0; i < compute.ranks[r].size(); ++i) {
                CHECK(timing.start[r][i] == sim.times[r][i].start);
                CHECK(timing.end[r][i] == sim.times[r][i].end);
              }
            if (plain_compute(compute)) {
              const auto orders = detail::time_orders(compute, detail::stage_table(costs, S));
              REQUIRE(orders);
              REQUIRE(orders->ok);
              CHECK(orders->makespan == sim.makespan);
              double peak = 0.0;
              for (const auto& s : sim.ranks) peak = std::max(peak, s.peak_memory);
              CHECK(orders->peak == peak);
            }
            // Lowered for these costs (serial-safe for the serial model): the
            // proof and the timed run agree on every transport; eager runs
            // reach the compute-only bound, the pair streams never beat it.
            for (bool serial_safe : {false, true}) {
              LowerOptions lo = info.lowering;
              lo.costs = costs;
              if (lo.costs.comm_latency == 0.0 && lo.mode == LowerMode::LatencyHiding)
                lo.costs.comm_latency = kNominalLatency;
              lo.serial_safe = serial_safe;
              const Plan lowered = lower(compute, lo);
              const auto [lowered_drawn, lowered_forced] = timeline_makespan(lowered);
              CHECK_FALSE(lowered_forced);
              CHECK(lowered_drawn == unit.makespan);
              for (Transport t : kModels) {
                INFO(to_string(t) << (serial_safe ? " serial-safe" : ""));
                so.transport = t;
                const bool proven = verify(lowered, {t}).ok();
                const SimResult run = simulate(lowered, so);
                ++lowered_runs;
                CHECK(run.ok() == proven);
                if (t != Transport::Serial || serial_safe) CHECK(proven);
                if (!proven) continue;
                if (t == Transport::Eager) CHECK(run.makespan == sim.makespan);
                else CHECK(run.makespan >= sim.makespan);
              }
            }
          }
        }
  }
  INFO("shapes " << shapes << ", lowered runs " << lowered_runs);
  CHECK(shapes > 600);
  CHECK(lowered_runs > 14000);
}

TEST_CASE("run: the interpreters agree on orders that cannot run", "[run]") {
  // Swap neighbouring computes of library orders (a backward before its own
  // forward, or a cycle of waits across ranks): the simulator, lowering's
  // timing, the search's timing and the timeline ("forced") agree on whether
  // the order can run, and lowered plans that still run agree with the proof.
  std::mt19937 rng(20);
  int cannot = 0, can = 0;
  for (const auto& info : schedules()) {
    for (int p : {2, 3, 4})
      for (int m : {p, 2 * p + 1}) {
        Plan base;
        try {
          base = plan_compute(Problem{info.name, p, m, 0});
        } catch (const ShapeError&) {
          continue;
        }
        for (int trial = 0; trial < 12; ++trial) {
          Plan q = base;
          for (int k = 0; k <= trial % 3; ++k) {
            auto& list = q.ranks[rng() % q.ranks.size()];
            if (list.size() < 2) continue;
            const std::size_t i = rng() % (list.size() - 1);
            std::swap(list[i], list[i + 1]);
          }
          INFO(info.name << " p=" << p << " m=" << m << " trial " << trial);
          const SimResult sim = simulate(q);
          const detail::Timing timing = detail::time_compute(q, CostModel{});
          CHECK(timing.complete == sim.ok());
          if (plain_compute(q)) {
            const auto orders =
                detail::time_orders(q, detail::stage_table(CostModel{}, q.meta.num_stages()));
            REQUIRE(orders);
            CHECK(orders->ok == sim.ok());
          }
          const auto [drawn, forced] = timeline_makespan(q);
          CHECK(forced == !sim.ok());
          if (sim.ok()) {
            ++can;
            CHECK(drawn == sim.makespan);
            const Plan lowered = lower(q, info.lowering);
            for (Transport t : kModels) {
              SimOptions so;
              so.transport = t;
              CHECK(simulate(lowered, so).ok() == verify(lowered, {t}).ok());
            }
          } else {
            ++cannot;
            CHECK_THROWS_AS(lower(q, info.lowering), PlanRejected);
          }
        }
      }
  }
  CHECK(cannot > 50);
  CHECK(can > 50);
}
