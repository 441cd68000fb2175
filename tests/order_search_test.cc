// The pair orders of the latency-hiding lowering where the eager bound is
// missed: the local search over adjacent swaps, the exact search
// (LowerMode::Exact, and the default on small plans) and what LowerReport
// says about them (docs/verification.md, "Where the bound is out of reach").
#include <catch2/catch.hpp>

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

using Orders = LowerReport::Orders;

CostModel comm_costs(double latency) {
  CostModel c;
  c.comm_latency = latency;
  return c;
}

double makespan(const Plan& p, const CostModel& costs) {
  SimOptions o;
  o.costs = costs;
  const SimResult r = simulate(p, o);
  REQUIRE(r.ok());
  return r.makespan;
}

// The schedule's own latency-hiding lowering planned for `costs` with
// per-pair orders (as the planner lowers for stated costs: a loop-mapped
// multi-stage schedule's own one order per rank is for the nominal costs),
// or the exact one.
Plan lowered(const Plan& compute, const CostModel& costs, LowerMode mode, LowerReport& report) {
  LowerOptions o = default_lowering(compute.meta.schedule);
  o.mode = mode;
  o.serial_safe = false;
  o.costs = costs;
  Plan p = lower(compute, o, report);
  for (Transport t : {Transport::Rendezvous, Transport::Eager}) {
    const VerifyResult r = verify(p, {t});
    INFO(to_string(t) << "\n" << format_diagnostics(r.diagnostics));
    REQUIRE(r.ok());
  }
  return p;
}

bool searched_to_the_end(Orders o) { return o == Orders::Bound || o == Orders::Optimal; }

// The optimum for interleaved-1f1b p=2 m=6 v=2 at latency 1: stage
// 3's gradient for microbatch 1 goes before stage 2's for microbatch 0.
constexpr const char* kOptimalM6V2 =
    "0F0,0SEND_F0,0F1,0SEND_F1,2RECV_F0,2RECV_F1,2F0,2SEND_F0,2F1,2SEND_F1,0F2,0SEND_F2,2RECV_B0,"
    "2RECV_B1,2B0,2SEND_B0,2RECV_F2,0F3,0SEND_F3,2B1,2SEND_B1,0RECV_B0,2F2,2SEND_F2,2RECV_F3,"
    "0RECV_B1,0B0,2F3,2SEND_F3,2RECV_B2,0B1,0F4,0SEND_F4,2RECV_B3,2B2,2SEND_B2,0F5,0SEND_F5,"
    "2RECV_F4,2B3,2SEND_B3,0RECV_B2,2F4,2SEND_F4,2RECV_F5,0RECV_B3,0B2,2F5,2SEND_F5,2RECV_B4,"
    "2RECV_B5,0B3,2B4,2SEND_B4,2B5,2SEND_B5,0RECV_B4,0RECV_B5,0B4,0B5\n"
    "1RECV_F0,1RECV_F1,1F0,1SEND_F0,1F1,1SEND_F1,3RECV_F0,3RECV_F1,1RECV_F2,3F0,3B0,3SEND_B0,3F1,"
    "3B1,3SEND_B1,1RECV_B0,1F2,1SEND_F2,1RECV_F3,1RECV_B1,1B0,1SEND_B0,3RECV_F2,1F3,1SEND_F3,1B1,"
    "1SEND_B1,3RECV_F3,3F2,3B2,3SEND_B2,1RECV_F4,3F3,3B3,3SEND_B3,1RECV_B2,1RECV_F5,1F4,1SEND_F4,"
    "1RECV_B3,1B2,1SEND_B2,3RECV_F4,1F5,1SEND_F5,1B3,1SEND_B3,3RECV_F5,3F4,3B4,3SEND_B4,3F5,3B5,"
    "3SEND_B5,1RECV_B4,1RECV_B5,1B4,1SEND_B4,1B5,1SEND_B5\n";

}  // namespace

TEST_CASE("order search: interleaved-1f1b p=2 at latency 1 gets the optimum of every lowering",
          "[order_search]") {
  // F=1, B=2, one transfer costs a forward: the eager bound is out of reach
  // and the deadline order alone was 1-4 units behind. The exact search
  // proves each of these optimal; the default lowering finds the same. The
  // issue's exhaustive search gave 137, 158 and 188 at (v, m) = (3, 12),
  // (4, 10), (4, 12): these orders are faster still.
  struct Case {
    int v, m;
    double optimum;
  };
  const CostModel costs = comm_costs(1.0);
  for (const Case& c : {Case{2, 6, 47}, Case{3, 6, 73}, Case{4, 6, 99}, Case{2, 8, 60},
                        Case{2, 10, 73}, Case{2, 12, 86}, Case{3, 8, 94}, Case{3, 10, 115},
                        Case{3, 12, 136}, Case{4, 8, 128}, Case{4, 10, 157}, Case{4, 12, 186}}) {
    INFO("v=" << c.v << " m=" << c.m);
    const Plan compute = plan_compute(Problem{"interleaved-1f1b", 2, c.m, c.v});
    LowerReport exact, fast;
    const double best = makespan(lowered(compute, costs, LowerMode::Exact, exact), costs);
    const double ours = makespan(lowered(compute, costs, LowerMode::LatencyHiding, fast), costs);
    CHECK(exact.orders == Orders::Optimal);
    CHECK(exact.makespan == best);
    CHECK(best == c.optimum);
    CHECK(ours == c.optimum);
    CHECK(fast.makespan == ours);
    CHECK(fast.bound < ours);  // out of reach: the search, not the bound, decided
    CHECK(fast.orders != Orders::Bound);
  }
}

TEST_CASE("order search: the issue's optimal plan for m=6 v=2 simulates to ours",
          "[order_search]") {
  CsvReadOptions ro;
  ro.mapping = StageMapping::Loop;
  ro.num_microbatches = 6;
  ro.schedule = "interleaved-1f1b";
  const Plan theirs = parse_csv_plan(kOptimalM6V2, "issue", ro);
  REQUIRE(verify(theirs, {Transport::Rendezvous}).ok());
  const CostModel costs = comm_costs(1.0);
  const Plan compute = plan_compute(Problem{"interleaved-1f1b", 2, 6, 2});
  LowerReport report;
  const Plan ours = lowered(compute, costs, LowerMode::LatencyHiding, report);
  CHECK(makespan(theirs, costs) == 47);
  CHECK(makespan(ours, costs) == 47);
  // Same compute order.
  for (std::size_t r = 0; r < ours.ranks.size(); ++r) {
    std::vector<Action> a, b;
    for (const Action& x : ours.ranks[r])
      if (is_compute(x.type)) a.push_back(x);
    for (const Action& x : theirs.ranks[r])
      if (is_compute(x.type)) b.push_back(x);
    CHECK(a == b);
  }
}

TEST_CASE("order search: zb-h1 p=2 reaches bounds the deadline order missed", "[order_search]") {
  // The default costs (F=1, B=2, I=W=1): m=4 at latency 0.75 has bound 16
  // (the deadline order alone: 16.5), m=5 at latency 1.5 bound 24 (25).
  struct Case {
    int m;
    double latency, bound;
  };
  for (const Case& c : {Case{4, 0.75, 16}, Case{5, 1.5, 24}}) {
    INFO("m=" << c.m << " latency " << c.latency);
    const CostModel costs = comm_costs(c.latency);
    const Plan compute = plan_compute(Problem{"zb-h1", 2, c.m, 1});
    CHECK(makespan(compute, costs) == c.bound);
    for (LowerMode mode : {LowerMode::LatencyHiding, LowerMode::Exact}) {
      LowerReport report;
      CHECK(makespan(lowered(compute, costs, mode, report), costs) == c.bound);
      CHECK(report.orders == Orders::Bound);
      CHECK(report.bound == c.bound);
      CHECK(report.makespan == c.bound);
    }
  }
}

TEST_CASE("order search: no shape of the grid is above the exact optimum", "[order_search]") {
  // Every schedule, p 2..4, v 1..2, small m, the bench's latencies and two
  // cost sets: wherever the exact search completes, the default lowering is
  // at its optimum (and the exact lowering never behind the default).
  std::vector<CostModel> sets;
  for (double latency : {0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0})
    for (bool cheap_backward : {false, true}) {
      CostModel c = comm_costs(latency);
      if (cheap_backward) {
        c.b = 1.0;
        c.i = c.w = 0.5;
      }
      sets.push_back(c);
    }
  int compared = 0, proved = 0;
  for (const auto& info : schedules())
    for (int p = 2; p <= 4; ++p)
      for (int v = 1; v <= 2; ++v)
        for (int m : {1, 2, 3, 4, 6}) {
          Plan compute;
          try {
            compute = plan_compute(Problem{info.name, p, m, v});
          } catch (const ShapeError&) {
            continue;
          }
          if (compute.meta.stages_per_rank != v) continue;
          for (const CostModel& costs : sets) {
            INFO(info.name << " p=" << p << " m=" << m << " v=" << v << " latency "
                           << costs.comm_latency << " B=" << costs.b);
            LowerReport exact, fast;
            const double best = makespan(lowered(compute, costs, LowerMode::Exact, exact), costs);
            const double ours =
                makespan(lowered(compute, costs, LowerMode::LatencyHiding, fast), costs);
            ++compared;
            CHECK(best <= ours + 1e-9);
            CHECK(exact.makespan == Approx(best).epsilon(1e-12));
            CHECK(fast.makespan == Approx(ours).epsilon(1e-12));
            CHECK(best >= exact.bound - 1e-9);
            if (!searched_to_the_end(exact.orders)) continue;
            ++proved;
            CHECK(ours == Approx(best).epsilon(1e-12));
          }
        }
  CHECK(compared > 0);
  CHECK(proved == compared);  // on this grid the exact search always completes
}

TEST_CASE("order search: the exact lowering takes no prefetch cap or serial-safe order",
          "[order_search]") {
  const Plan compute = plan_compute(Problem{"interleaved-1f1b", 2, 4, 2});
  LowerOptions o;
  o.mode = LowerMode::Exact;
  o.max_prefetch = 2;
  CHECK_THROWS_WITH(lower(compute, o), Catch::Contains("it takes no prefetch cap"));
  o.max_prefetch = 0;
  o.serial_safe = true;
  CHECK_THROWS_WITH(lower(compute, o), Catch::Contains("it takes no serial-safe order"));
  CHECK(parse_lower_mode("exact") == LowerMode::Exact);
  CHECK(to_string(LowerMode::Exact) == "exact");

  auto r = run_cli({"plan", "-s", "interleaved-1f1b", "-p", "2", "-m", "6", "-v", "2", "--comm",
                    "1", "--lowering", "exact", "--prefetch", "2", "-o", "/dev/null"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("takes no prefetch cap"));
  r = run_cli({"plan", "-s", "1f1b", "--lowering", "fastest"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown lowering 'fastest' (expected latency-hiding, seed "
                                    "or exact)"));
}

TEST_CASE("order search: the seed lowering and a prefetch cap are not searched", "[order_search]") {
  const CostModel costs = comm_costs(1.0);
  const Plan compute = plan_compute(Problem{"interleaved-1f1b", 2, 6, 2});
  LowerOptions o = default_lowering("interleaved-1f1b");
  o.costs = costs;
  o.max_prefetch = 2;
  LowerReport report;
  lower(compute, o, report);
  CHECK(report.orders == Orders::Unsearched);
  o.max_prefetch = 0;
  o.mode = LowerMode::Seed;
  lower(compute, o, report);
  CHECK(report.orders == Orders::Unsearched);
  CHECK(report.makespan == 0);
}
