// The latency-hiding lowering against the eager bound and against torch's
// lowering of the same compute order (docs/performance.md, "Transfer
// latency"), on a grid small enough for CI.
#include <catch2/catch.hpp>

#include "bench/reach.h"
#include "bench/torch_lowering.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;
using namespace pipeplan::test;

namespace {

struct Comm {
  double latency, bandwidth, bytes;
};

SimOptions sim_costs(const Comm& c) {
  SimOptions o;
  o.costs.comm_latency = c.latency;
  o.costs.comm_bandwidth = c.bandwidth;
  o.costs.transfer_bytes = c.bytes;
  return o;
}

double makespan(const Plan& p, const SimOptions& o) {
  const SimResult r = simulate(p, o);
  REQUIRE(r.ok());
  return r.makespan;
}

Plan without_comms(Plan p) {
  for (auto& list : p.ranks)
    list.erase(
        std::remove_if(list.begin(), list.end(), [](const Action& a) { return is_comm(a.type); }),
        list.end());
  return p;
}

// The shapes each schedule is checked on: every p and v, a spread of m.
template <typename F>
void for_each_shape(const ScheduleInfo& info, F&& f) {
  for (int p : {2, 3, 4, 5, 8})
    for (int v = 1; v <= 4; ++v)
      for (int m : {1, 2, 3, 4, 5, 7, 8, 12, 16, 23, 32}) {
        Plan compute;
        try {
          compute = plan_compute(Problem{info.name, p, m, v});
        } catch (const ShapeError&) {
          continue;
        }
        if (compute.meta.stages_per_rank != v) continue;
        f(compute);
      }
}

}  // namespace

TEST_CASE("latency: torch's lowering, re-stated, reproduces torch's own files", "[latency]") {
  // torch lowers the order after inserting UNSHARD/RESHARD/REDUCE_GRAD,
  // which take turns in its round robin like computes (so do idle cells):
  // feed the re-statement torch's own file without its SEND/RECV.
  for (const std::string base :
       {"torch_interleaved-1f1b_p2_m4_v2", "torch_interleaved-1f1b_p4_m8_v2",
        "torch_interleaved-zb_p2_m4_v2", "torch_interleaved-zb_p4_m8_v2",
        "torch_looped-bfs_p2_m4_v2", "torch_zbv_p2_m4_v2", "torch_zbv_p4_m8_v2",
        "torch_dualpipev_p2_m4_v2", "torch_dualpipev_p4_m8_v2"}) {
    INFO(base);
    const Plan theirs =
        parse_plan(read_source_file("tests/interop/" + base + ".compute_comms.csv"), base);
    const Plan ours = bench::torch_lowering(without_comms(theirs));
    REQUIRE(ours.ranks.size() == theirs.ranks.size());
    for (std::size_t r = 0; r < ours.ranks.size(); ++r)
      CHECK(to_string(ours.ranks[r]) == to_string(theirs.ranks[r]));
  }
}

TEST_CASE("latency: every schedule lowers deadlock-free, at the eager bound, never behind torch",
          "[latency]") {
  // Transfers up to a quarter of a forward, and a bandwidth term: the bound
  // is reached for every shape of every schedule but dualpipev and dualpipe (whose pairs
  // carry two streams of overlapped work, see docs/simulator.md); at
  // latency 1 (a whole forward) pair streams saturate. Everywhere the bound
  // is missed it is out of reach, and the plan is never behind torch's.
  const std::vector<Comm> comms = {{0.1, 0, 0}, {0.25, 0, 0}, {0.1, 100, 40}, {1.0, 0, 0}};
  for (const auto& info : schedules()) {
    int shapes = 0;
    for_each_shape(info, [&](const Plan& compute) {
      ++shapes;
      const Plan torch = bench::torch_lowering(compute);
      for (const Comm& c : comms) {
        const SimOptions o = sim_costs(c);
        LowerOptions lo = default_lowering(info.name);
        lo.mode = LowerMode::LatencyHiding;
        lo.serial_safe = false;  // per-pair orders, searched for these costs (as the planner's)
        lo.costs = o.costs;
        const Plan hidden = lower(compute, lo);
        INFO(info.name << " p=" << compute.meta.pp_degree << " m=" << compute.meta.num_microbatches
                       << " v=" << compute.meta.stages_per_rank << " latency " << c.latency
                       << " bytes " << c.bytes);
        for (Transport t : {Transport::Rendezvous, Transport::Eager}) {
          const VerifyResult r = verify(hidden, {t});
          INFO(to_string(t) << "\n" << format_diagnostics(r.diagnostics));
          REQUIRE(r.ok());
        }
        const double bound = makespan(compute, o);
        const double ours = makespan(hidden, o);
        CHECK(ours >= bound - 1e-9);
        if (c.latency <= 0.25 && info.name != "dualpipev" && info.name != "dualpipe")
          CHECK(ours == Approx(bound).epsilon(1e-12));
        CHECK(ours <= makespan(torch, o) + 1e-9);
        // At the bound wherever it is reachable: every miss comes with a
        // proof that no execution with one stream per rank pair reaches it
        // (and a shape at the bound never gets one: the proof is sound).
        const auto proof = bench::bound_out_of_reach(compute, o.costs);
        INFO((proof ? *proof : std::string("no proof")));
        CHECK((ours > bound * (1 + 1e-9)) == proof.has_value());
      }
    });
    INFO(info.name);
    CHECK(shapes > 0);
  }
}

TEST_CASE("latency: the prefetch cap bounds the receive buffers a rank holds", "[latency]") {
  for (const auto& info : schedules())
    for (int cap : {1, 2, 3}) {
      for_each_shape(info, [&](const Plan& compute) {
        LowerOptions lo = default_lowering(info.name);
        lo.mode = LowerMode::LatencyHiding;
        lo.max_prefetch = cap;
        const Plan p = lower(compute, lo);
        INFO(info.name << " p=" << compute.meta.pp_degree << " m=" << compute.meta.num_microbatches
                       << " v=" << compute.meta.stages_per_rank << " cap " << cap);
        REQUIRE(verify(p, {Transport::Rendezvous}).ok());
        const SimResult r = simulate(p, sim_costs({0.25, 0, 0}));
        REQUIRE(r.ok());
        // An OVERLAP_F_B consumes two received values at once: it needs two.
        const int floor = info.name == "dualpipev" || info.name == "dualpipe" ? 2 : 1;
        for (const RankStats& s : r.ranks) CHECK(s.peak_recv_buffers <= std::max(cap, floor));
      });
    }
}

TEST_CASE("latency: prefetched receives show in the simulator's buffer count", "[latency]") {
  // 1f1b p=2 m=4: rank 1's forward inputs are all posted up front when
  // uncapped; the seed lowering holds one at a time.
  const Plan compute = plan_compute(Problem{"1f1b", 2, 4, 1});
  LowerOptions lo;
  const SimResult hidden = simulate(lower(compute, lo), sim_costs({0.25, 0, 0}));
  lo.mode = LowerMode::Seed;
  const SimResult seed = simulate(lower(compute, lo), sim_costs({0.25, 0, 0}));
  REQUIRE(hidden.ok());
  REQUIRE(seed.ok());
  CHECK(seed.ranks[1].peak_recv_buffers == 1);
  CHECK(hidden.ranks[1].peak_recv_buffers > 1);
  CHECK(hidden.makespan < seed.makespan);
}

TEST_CASE("latency: the documented examples of a bound out of reach", "[latency]") {
  // docs/simulator.md, "Where the bound cannot be reached": F=1, B=2, I=W=1.
  struct Case {
    const char* schedule;
    int p, m, v;
    double latency, bound, ours;
    const char* proof;  // a part of the reason given
  };
  for (const Case& c : {
           Case{"dualpipev", 2, 4, 2, 0.5, 28.0, 29.0, "fit in neither order"},
           Case{"zb-h1", 2, 6, 1, 1.0, 24.0, 25.0,
                "0F3 -> 1F3 and 1I2 -> 0I2, fit in neither order"},
           Case{"zbv", 4, 4, 2, 1.0, 42.0, 43.0, "fit in neither order"},
           Case{"interleaved-zb", 2, 2, 2, 1.0, 17.0, 18.0, "fit in neither order"},
           Case{"interleaved-1f1b", 2, 4, 2, 1.0, 33.0, 34.0, "fit in neither order"},
           Case{"zb-h1", 2, 7, 1, 1.0, 28.0, 29.0, "cannot start before"},
       }) {
    INFO(c.schedule << " p=" << c.p << " m=" << c.m << " v=" << c.v << " latency " << c.latency);
    const Plan compute = plan_compute(Problem{c.schedule, c.p, c.m, c.v});
    const SimOptions o = sim_costs({c.latency, 0, 0});
    LowerOptions lo = default_lowering(c.schedule);
    lo.mode = LowerMode::LatencyHiding;
    lo.serial_safe = false;  // per-pair orders, searched for these costs (as the planner's)
    lo.costs = o.costs;
    CHECK(makespan(compute, o) == c.bound);
    CHECK(makespan(lower(compute, lo), o) == c.ours);
    CHECK(makespan(bench::torch_lowering(compute), o) >= c.ours);
    const auto proof = bench::bound_out_of_reach(compute, o.costs);
    REQUIRE(proof);
    CHECK_THAT(*proof, Catch::Contains(c.proof));
  }
  // The same orders with cheaper transfers reach the bound, and no proof
  // says otherwise.
  const Plan compute = plan_compute(Problem{"zb-h1", 2, 6, 1});
  CHECK_FALSE(bench::bound_out_of_reach(compute, sim_costs({0.25, 0, 0}).costs));
}
