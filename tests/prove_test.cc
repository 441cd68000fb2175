// prove(): the one "lower if compute-only, then verify" of every front end.
#include <catch2/catch.hpp>

#include "pipeplan/error.h"
#include "pipeplan/planner.h"
#include "pipeplan/prove.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::actions;

namespace {

const std::vector<Transport> kAll = {Transport::Rendezvous, Transport::Eager, Transport::Serial};

// Rank 0 needs 1B0 before 0F1; rank 1 needs 0F1 first.
Plan cycle() {
  Plan p;
  p.meta = PlanMeta{"custom", 2, 2, 1, StageMapping::Loop, false, {}};
  p.rank_ids = {0, 1};
  p.ranks = {actions("0F0 0B0 0F1 0B1"), actions("1F1 1B1 1F0 1B0")};
  return p;
}

}  // namespace

TEST_CASE("prove: a compute-only plan is proved through its schedule's lowering", "[prove]") {
  for (const ScheduleInfo& s : schedules()) {
    INFO(s.name);
    const Problem pr{s.name, 4, 8, 0};
    const Plan compute = plan_compute(pr);
    const Proof proof = prove(compute, kAll);
    REQUIRE(proof.lowered);
    CHECK(*proof.lowered == plan(pr));
    REQUIRE(proof.results.size() == 3);
    CHECK(proof.results[0].ok());
    CHECK(proof.results[1].ok());
    // Serial: the library's latency-hiding lowerings are serial-safe; the
    // seed ones (gpipe, 1f1b) are proved as they are.
    CHECK(proof.results[2].diagnostics == verify(plan(pr), {Transport::Serial}).diagnostics);
    CHECK(proof.ok() == proof.results[2].ok());
  }
}

TEST_CASE("prove: a plan with comms is verified as written, without a copy", "[prove]") {
  const Plan lowered = plan(Problem{"interleaved-1f1b", 4, 8, 0});
  const Proof proof = prove(lowered, kAll);
  CHECK_FALSE(proof.lowered);
  for (std::size_t i = 0; i < kAll.size(); ++i)
    CHECK(proof.results[i].diagnostics == verify(lowered, {kAll[i]}).diagnostics);
  CHECK(prove(lowered, Transport::Eager).ok());
  const Lowered untouched = lower_if_compute_only(lowered);
  CHECK_FALSE(untouched.plan);
  CHECK(untouched.defects.empty());
  // A partial plan is verify()'s to refuse ("partial-plan").
  const Plan one = plan_rank(Problem{"1f1b", 4, 8, 0}, 1);
  CHECK(prove(one, Transport::Rendezvous).diagnostics ==
        verify(one, {Transport::Rendezvous}).diagnostics);
  CHECK_FALSE(lower_if_compute_only(plan_compute_rank(Problem{"1f1b", 4, 8, 0}, 1)).plan);
}

TEST_CASE("prove: a compute order's defects are every transport's verdict", "[prove]") {
  Plan broken = plan_compute(Problem{"1f1b", 2, 2, 0});
  broken.ranks[1].pop_back();  // a backward missing
  const std::vector<Diagnostic> defects = check_structure(broken);
  REQUIRE_FALSE(defects.empty());
  const Proof proof = prove(broken, kAll);
  CHECK_FALSE(proof.lowered);
  for (const VerifyResult& r : proof.results) CHECK(r.diagnostics == defects);
  CHECK(lower_if_compute_only(broken).defects == defects);
}

TEST_CASE("prove: ranks that wait on each other are a compute-cycle, not an exception", "[prove]") {
  const Proof proof = prove(cycle(), kAll);
  CHECK_FALSE(proof.ok());
  for (const VerifyResult& r : proof.results) {
    REQUIRE(r.diagnostics.size() == 1);
    CHECK(r.diagnostics[0].code == "compute-cycle");
    CHECK(r.diagnostics[0].message ==
          "the compute order cannot complete (cyclic wait across ranks): rank 0 waits at 0B0 "
          "(index 1) for the backward of stage 1 microbatch 0; rank 1 waits at 1F1 (index 0) "
          "for 0F1");
  }
  // lower() itself refuses it with the same diagnostic.
  try {
    lower(cycle(), schedule_lowering(cycle().meta));
    FAIL("lower() accepted a cycle");
  } catch (const PlanRejected& e) {
    CHECK(e.diagnostics() == proof.results[0].diagnostics);
  }
}

TEST_CASE("prove: a compute-only plan lowers with the lowering given", "[prove]") {
  const Problem pr{"zbv", 4, 8, 0};
  LowerOptions seed = default_lowering("zbv");
  seed.mode = LowerMode::Seed;
  const Proof proof = prove(plan_compute(pr), {Transport::Rendezvous}, seed);
  REQUIRE(proof.lowered);
  CHECK(*proof.lowered == plan(pr, seed));
  CHECK(proof.ok());
  LowerOptions bad = default_lowering("zbv");
  bad.costs.f = -1;
  CHECK_THROWS_AS(prove(plan_compute(pr), {Transport::Rendezvous}, bad), InputError);
}
