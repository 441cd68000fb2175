// lower(): seed orders for gpipe/1f1b, FIFO complementarity, placement rules.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "pipeplan/error.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::actions;

namespace {

// The seed driver's action order for one stage (= rank), written from the
// seed's rules (Schedule1F1B.forward / ScheduleGPipe.forward), independently
// of lower(): recv before use, parity-staggered forward sends, the deferred
// activation shipped after the next gradient arrives.
struct SeedEmitter {
  int p, m, r;
  std::vector<Action> out;
  bool first() const { return r == 0; }
  bool last() const { return r == p - 1; }
  void recv_f(int mb) {
    if (!first()) out.push_back(make(ActionType::RecvF, r, mb));
  }
  void send_f(int mb) {
    if (!last()) out.push_back(make(ActionType::SendF, r, mb));
  }
  void recv_b(int mb) {
    if (!last()) out.push_back(make(ActionType::RecvB, r, mb));
  }
  void send_b(int mb) {
    if (!first()) out.push_back(make(ActionType::SendB, r, mb));
  }
  void f(int mb) { out.push_back(make(ActionType::F, r, mb)); }
  void b(int mb) { out.push_back(make(ActionType::B, r, mb)); }
};

std::vector<Action> seed_gpipe(int p, int m, int r) {
  SeedEmitter e{p, m, r, {}};
  for (int mb = 0; mb < m; ++mb) {
    e.recv_f(mb);
    e.f(mb);
    e.send_f(mb);
  }
  for (int mb = m - 1; mb >= 0; --mb) {
    e.recv_b(mb);
    e.b(mb);
    e.send_b(mb);
  }
  return e.out;
}

std::vector<Action> seed_1f1b(int p, int m, int r) {
  SeedEmitter e{p, m, r, {}};
  const bool even = r % 2 == 0;
  const int warmup = std::min(m, p - r);
  int fi = 0, bi = 0, pending = -1;
  for (int k = 0; k < warmup; ++k) {
    e.recv_f(fi);
    if (!even && k > 0) {
      e.send_f(pending);
      pending = -1;
    }
    e.f(fi++);
    if (even && k != warmup - 1) e.send_f(fi - 1);
    else pending = fi - 1;
  }
  auto backward = [&] {
    e.recv_b(bi);
    if (pending >= 0) {
      e.send_f(pending);
      pending = -1;
    }
    e.b(bi);
    e.send_b(bi++);
  };
  for (int k = 0; k < m - warmup; ++k) {
    backward();
    e.recv_f(fi);
    e.f(fi++);
    pending = fi - 1;
  }
  for (int k = 0; k < warmup; ++k) backward();
  return e.out;
}

Problem problem(const std::string& s, int p, int m, int v = 0) { return Problem{s, p, m, v}; }

}  // namespace

TEST_CASE("lower: gpipe reproduces the seed driver order for pp 1..8, m 1..16", "[lower]") {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m) {
      Plan plan = pipeplan::plan(problem("gpipe", p, m));
      for (int r = 0; r < p; ++r) {
        INFO("gpipe p=" << p << " m=" << m << " rank " << r);
        REQUIRE(to_string(plan.ranks[static_cast<std::size_t>(r)]) ==
                to_string(seed_gpipe(p, m, r)));
      }
    }
}

TEST_CASE("lower: 1f1b reproduces the seed's parity-staggered order for pp 1..8, m 1..16",
          "[lower]") {
  for (int p = 1; p <= 8; ++p)
    for (int m = p; m <= 16; ++m) {
      Plan plan = pipeplan::plan(problem("1f1b", p, m));
      for (int r = 0; r < p; ++r) {
        INFO("1f1b p=" << p << " m=" << m << " rank " << r);
        REQUIRE(to_string(plan.ranks[static_cast<std::size_t>(r)]) ==
                to_string(seed_1f1b(p, m, r)));
      }
    }
}

TEST_CASE("lower: 1f1b pp=4 m=8 rank orders spelled out", "[lower]") {
  Plan plan = pipeplan::plan(problem("1f1b", 4, 8));
  CHECK(
      to_string(plan.ranks[0]) ==
      "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0F3 0RECV_B0 0SEND_F3 0B0 0F4 0RECV_B1 0SEND_F4 0B1 "
      "0F5 0RECV_B2 0SEND_F5 0B2 0F6 0RECV_B3 0SEND_F6 0B3 0F7 0RECV_B4 0SEND_F7 0B4 0RECV_B5 0B5 "
      "0RECV_B6 0B6 0RECV_B7 0B7");
  CHECK(to_string(plan.ranks[1]) ==
        "1RECV_F0 1F0 1RECV_F1 1SEND_F0 1F1 1RECV_F2 1SEND_F1 1F2 1RECV_B0 1SEND_F2 1B0 1SEND_B0 "
        "1RECV_F3 1F3 1RECV_B1 1SEND_F3 1B1 1SEND_B1 1RECV_F4 1F4 1RECV_B2 1SEND_F4 1B2 1SEND_B2 "
        "1RECV_F5 1F5 1RECV_B3 1SEND_F5 1B3 1SEND_B3 1RECV_F6 1F6 1RECV_B4 1SEND_F6 1B4 1SEND_B4 "
        "1RECV_F7 1F7 1RECV_B5 1SEND_F7 1B5 1SEND_B5 1RECV_B6 1B6 1SEND_B6 1RECV_B7 1B7 1SEND_B7");
}

TEST_CASE("lower: keeps every pair FIFO complementary", "[lower]") {
  for (const char* s : {"gpipe", "1f1b"})
    for (int p = 2; p <= 6; ++p)
      for (int m = p; m <= 12; m += 3) {
        Plan plan = pipeplan::plan(problem(s, p, m));
        // Per ordered pair, the sequence of ops each end posts to the other.
        std::map<std::pair<int, int>, std::vector<Action>> ends;
        for (int r = 0; r < p; ++r)
          for (const Action& a : plan.ranks[static_cast<std::size_t>(r)]) {
            if (!is_comm(a.type)) continue;
            int peer = (a.type == ActionType::SendF || a.type == ActionType::RecvB) ? r + 1 : r - 1;
            ends[{r, peer}].push_back(a);
          }
        for (int r = 0; r + 1 < p; ++r) {
          const auto& x = ends[{r, r + 1}];
          const auto& y = ends[{r + 1, r}];
          INFO(s << " p=" << p << " m=" << m << " pair " << r << "-" << r + 1);
          REQUIRE(x.size() == y.size());
          for (std::size_t k = 0; k < x.size(); ++k) {
            // SEND_F(r,mb) pairs with RECV_F(r+1,mb); RECV_B(r,mb) with SEND_B(r+1,mb).
            if (x[k].type == ActionType::SendF)
              REQUIRE(y[k] == make(ActionType::RecvF, r + 1, x[k].microbatch));
            else
              REQUIRE((x[k].type == ActionType::RecvB &&
                       y[k] == make(ActionType::SendB, r + 1, x[k].microbatch)));
          }
        }
      }
}

TEST_CASE("lower: receives sit right before their consumer", "[lower]") {
  Plan plan = pipeplan::plan(problem("1f1b", 5, 11));
  for (const auto& list : plan.ranks)
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!is_recv(list[i].type)) continue;
      // Skip any other comm ops between the receive and the next compute.
      std::size_t j = i + 1;
      while (j < list.size() && is_comm(list[j].type)) ++j;
      REQUIRE(j < list.size());
      ActionType want = list[i].type == ActionType::RecvF ? ActionType::F : ActionType::B;
      INFO(to_string(list[i]) << " followed by " << to_string(list[j]));
      CHECK(list[j] == make(want, list[i].stage, list[i].microbatch));
    }
}

TEST_CASE("lower: output verifies under every transport model for gpipe and 1f1b", "[lower]") {
  for (const char* s : {"gpipe", "1f1b"})
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 16; ++m) {
        if (std::string(s) == "1f1b" && m < p) continue;
        Plan plan = pipeplan::plan(problem(s, p, m));
        for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
          VerifyResult r = verify(plan, {t});
          INFO(s << " p=" << p << " m=" << m << " " << to_string(t) << "\n"
                 << format_diagnostics(r.diagnostics));
          REQUIRE(r.ok());
        }
      }
}

TEST_CASE("lower: earliest placement ships forward outputs right after the forward", "[lower]") {
  Plan compute = plan_compute(problem("1f1b", 2, 2));
  LowerOptions seed;
  seed.mode = LowerMode::Seed;
  Plan lowered = lower(compute, seed);
  CHECK(to_string(lowered.ranks[1]) == "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1");
  CHECK(to_string(lowered.ranks[0]) == "0F0 0SEND_F0 0F1 0RECV_B0 0SEND_F1 0B0 0RECV_B1 0B1");
}

TEST_CASE("lower: refuses plans that are partial, already lowered, or cannot complete", "[lower]") {
  Plan whole = plan_compute(problem("gpipe", 2, 2));
  Plan partial = plan_compute_rank(problem("gpipe", 2, 2), 1);
  CHECK_THROWS_WITH(lower(partial), Catch::Contains("must hold every rank 0..1"));
  CHECK_THROWS_WITH(lower(lower(whole)), Catch::Contains("already has SEND/RECV"));
  // Rank 0 runs B0 before F1, but rank 1 runs F1 before B0 (needs F1 from
  // rank 0 first): a cyclic wait in the compute order itself.
  Plan cyclic = whole;
  cyclic.ranks[0] = actions("0F0 0B0 0F1 0B1");
  cyclic.ranks[1] = actions("1F0 1F1 1B0 1B1");
  CHECK_THROWS_WITH(lower(cyclic), Catch::Contains("rank 0 waits at 0B0 (index 1)"));
}

TEST_CASE("lower: 64-rank plans keep sends and receives paired and verify under every model",
          "[lower]") {
  // Far more ranks than the sweep: many directions, the wrap-around link
  // of loop mappings, and the V mapping's two-input OVERLAP_F_B.
  for (auto [s, v] :
       {std::pair<const char*, int>{"interleaved-1f1b", 2}, {"zbv", 2}, {"dualpipev", 2}}) {
    LowerOptions safe = default_lowering(s);
    safe.serial_safe = true;  // the serial model needs one order per rank
    Plan plan = pipeplan::plan(problem(s, 64, 128, v), safe);
    const int stages = plan.meta.num_stages();
    std::size_t sends = 0, recvs = 0;
    for (const auto& list : plan.ranks)
      for (const Action& a : list) {
        sends += is_send(a.type);
        recvs += is_recv(a.type);
      }
    // Every boundary crosses ranks except the V's turn (stage p-1 -> p).
    const int cross = plan.meta.mapping == StageMapping::V ? stages - 2 : stages - 1;
    INFO(s);
    CHECK(sends == static_cast<std::size_t>(2 * cross * 128));
    CHECK(recvs == sends);
    for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
      VerifyResult r = verify(plan, {t});
      INFO(to_string(t) << "\n" << format_diagnostics(r.diagnostics));
      CHECK(r.ok());
    }
  }
}

TEST_CASE("lower: seed mode refuses non-positive unit costs", "[lower]") {
  Plan compute = plan_compute(problem("1f1b", 2, 2));
  LowerOptions zero;
  zero.mode = LowerMode::Seed;
  zero.costs.f = 0.0;
  CHECK_THROWS_WITH(lower(compute, zero),
                    Catch::StartsWith("lower: every unit cost must be positive and finite (F=0"));
  LowerOptions custom;
  custom.mode = LowerMode::Seed;
  custom.costs.f = 3.0;
  custom.costs.b = 0.5;
  CHECK(verify(lower(compute, custom)).ok());
}

TEST_CASE("lower: batch_p2p posts Megatron's batched pairs for 1f1b p=2 m=2", "[lower]") {
  LowerOptions batched;
  batched.batch_p2p = true;
  const Plan p = lower(plan_compute(problem("1f1b", 2, 2)), batched);
  // Megatron-LM's send_forward_recv_backward on rank 0 and
  // send_backward_recv_forward on rank 1, each one batch_isend_irecv; the
  // members in the order the ungrouped seed plan posts them.
  CHECK(to_string(p.ranks[0]) == "0F0 0SEND_F0 0F1 (0RECV_B0;0SEND_F1)BATCH_P2P 0B0 0RECV_B1 0B1");
  CHECK(to_string(p.ranks[1]) == "1RECV_F0 1F0 1B0 (1SEND_B0;1RECV_F1)BATCH_P2P 1F1 1B1 1SEND_B1");
  // Without the marks, the seed lowering with earliest sends, serial-safe.
  LowerOptions seed;
  seed.mode = LowerMode::Seed;
  seed.serial_safe = true;
  Plan unmarked = p;
  for (auto& list : unmarked.ranks)
    for (Action& a : list) a.batch_next = false;
  CHECK(unmarked == lower(plan_compute(problem("1f1b", 2, 2)), seed));
}

TEST_CASE("lower: batch_p2p groups 1f1b's steady state on every rank pair", "[lower]") {
  LowerOptions batched;
  batched.batch_p2p = true;
  const Plan p = lower(plan_compute(problem("1f1b", 4, 8)), batched);
  // A middle rank's steady state: after each F, the forward output goes
  // down with the gradient coming up; after each B, the gradient goes up
  // with the next input coming down.
  const std::string r1 = to_string(p.ranks[1]);
  INFO(r1);
  CHECK(r1.find("1F2 (1RECV_B0;1SEND_F2)BATCH_P2P 1B0 (1SEND_B0;1RECV_F3)BATCH_P2P 1F3") !=
        std::string::npos);
  for (Transport t : {Transport::Rendezvous, Transport::Serial, Transport::Eager})
    CHECK(verify(p, {t}).ok());
}

TEST_CASE("lower: batch_p2p refuses the latency-hiding lowering and a prefetch cap", "[lower]") {
  const Planner planner(problem("interleaved-1f1b", 2, 4));
  LoweringChoice c;
  c.batch_p2p = true;
  // A latency-hiding schedule lowers batched with the seed placement.
  const LowerOptions o = planner.lowering(c);
  CHECK(o.batch_p2p);
  CHECK(o.mode == LowerMode::Seed);
  c.mode = LowerMode::LatencyHiding;
  CHECK_THROWS_WITH(planner.lowering(c),
                    Catch::Contains("does not combine with the latency-hiding lowering"));
  c.mode.reset();
  c.max_prefetch = 2;
  CHECK_THROWS_AS(planner.lowering(c), InputError);
}
