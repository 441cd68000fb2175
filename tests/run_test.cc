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
#include "search/greedy.h"
#include "search/improve.h"

using namespace pipeplan;

namespace {

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
