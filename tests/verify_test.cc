// verify(): structural diagnostics with pinned text, FIFO checks, progress
// under each transport model, waiting chains.
#include <catch2/catch.hpp>

#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::actions;

namespace {

// A 1F1B whose every send immediately follows its producer and every
// receive immediately precedes its consumer: no parity stagger.
Plan unstaggered_1f1b(int p, int m) {
  Plan c = plan_compute(Problem{"1f1b", p, m, 0});
  for (int r = 0; r < p; ++r) {
    std::vector<Action> out;
    for (const Action& a : c.ranks[static_cast<std::size_t>(r)]) {
      if (a.type == ActionType::F && r > 0) out.push_back(make(ActionType::RecvF, r, a.microbatch));
      if (a.type == ActionType::B && r < p - 1)
        out.push_back(make(ActionType::RecvB, r, a.microbatch));
      out.push_back(a);
      if (a.type == ActionType::F && r < p - 1)
        out.push_back(make(ActionType::SendF, r, a.microbatch));
      if (a.type == ActionType::B && r > 0) out.push_back(make(ActionType::SendB, r, a.microbatch));
    }
    c.ranks[static_cast<std::size_t>(r)] = out;
  }
  return c;
}

// A hand-made plan (compute-only or with comms) with the given rank lines.
Plan custom(int p, int m, const std::vector<std::string>& lines, int v = 1,
            StageMapping mapping = StageMapping::Loop) {
  Plan plan;
  plan.meta = PlanMeta{"custom", p, m, v, mapping};
  for (int r = 0; r < p; ++r) {
    plan.rank_ids.push_back(r);
    plan.ranks.push_back(actions(lines[static_cast<std::size_t>(r)]));
  }
  return plan;
}

std::vector<Diagnostic> structure(const Plan& p) { return check_structure(p); }

}  // namespace

TEST_CASE("verify: planned gpipe and 1f1b are deadlock-free", "[verify]") {
  for (const char* s : {"gpipe", "1f1b"}) {
    Plan plan = pipeplan::plan(Problem{s, 4, 8, 0});
    for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial})
      CHECK(verify(plan, {t}).ok());
  }
}

TEST_CASE("verify: an unstaggered 1f1b hangs under rendezvous, names pair and position",
          "[verify]") {
  Plan plan = unstaggered_1f1b(4, 8);
  VerifyResult r = verify(plan, {Transport::Rendezvous});
  REQUIRE_FALSE(r.ok());
  const Diagnostic& d = r.diagnostics.front();
  CHECK(d.code == "fifo-both-send");
  CHECK(d.rank == 0);
  CHECK(d.index == 7);
  CHECK(d.action == "0SEND_F3");
  CHECK(d.message ==
        "pair 0-1 position 3: rank 0 posts 0SEND_F3 while rank 1 posts 1SEND_B0 (both send; NCCL "
        "pair stream hangs)");
  const Diagnostic& last = r.diagnostics.back();
  CHECK(last.code == "deadlock");
  CHECK(
      last.message ==
      "deadlock under rendezvous transport: 4 of 4 ranks cannot finish (0, 1, 2, 3); waiting "
      "chain: "
      "rank 0 (at 0B0) -> rank 1 (at 1B0) -> rank 2 (at 2B0): it queues behind 2SEND_F1 (pair 2-3 "
      "position 1 on rank 2), and pair 2-3 position 1 is non-complementary: rank 2 posts 2SEND_F1 "
      "while rank 3 posts 3SEND_B0 (both send)");
  bool rank3 = false;
  for (const auto& x : r.diagnostics)
    if (x.code == "stuck" && x.rank == 3) {
      rank3 = true;
      CHECK(x.message ==
            "rank 3 is stuck at index 5 (3F1): it needs 3RECV_F1, but it queues behind 3SEND_B0 "
            "(pair "
            "2-3 position 1 on rank 3), and pair 2-3 position 1 is non-complementary: rank 3 posts "
            "3SEND_B0 while rank 2 posts 2SEND_F1 (both send)");
    }
  CHECK(rank3);
}

TEST_CASE("verify: an unstaggered 1f1b is fine under eager, hangs under serial", "[verify]") {
  Plan plan = unstaggered_1f1b(4, 8);
  CHECK(verify(plan, {Transport::Eager}).ok());
  VerifyResult serial = verify(plan, {Transport::Serial});
  REQUIRE_FALSE(serial.ok());
  CHECK(serial.diagnostics.back().code == "deadlock");
}

TEST_CASE("verify: a microbatch swapped on one end is reported as corruption", "[verify]") {
  Plan plan = pipeplan::plan(Problem{"1f1b", 4, 8, 0});
  auto& r0 = plan.ranks[0];
  // 0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 -> ship F2 before F1.
  REQUIRE(to_string(std::vector<Action>(r0.begin(), r0.begin() + 6)) ==
          "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2");
  std::vector<Action> head = actions("0F0 0SEND_F0 0F1 0F2 0SEND_F2 0SEND_F1");
  std::copy(head.begin(), head.end(), r0.begin());
  VerifyResult r = verify(plan);
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(r.diagnostics[0].code == "fifo-corruption");
  CHECK(r.diagnostics[0].rank == 1);
  CHECK(r.diagnostics[0].action == "1RECV_F1");
  CHECK(r.diagnostics[0].message ==
        "send 1 from rank 0 to rank 1: rank 0 sends 0SEND_F2 (Forward(0, 2)) and rank 1 receives "
        "it as 1RECV_F1 (expects Forward(0, 1)); sends and receives meet in order, so the data "
        "would be silently corrupted");
  // Every model matches by order (NCCL, and Gloo on one tag): eager too.
  for (Transport t : {Transport::Eager, Transport::Serial}) {
    const VerifyResult e = verify(plan, {t});
    REQUIRE(e.diagnostics.size() == 1);
    CHECK(e.diagnostics[0].message == r.diagnostics[0].message);
  }
}

TEST_CASE("verify: a missing forward is named with its expected rank", "[verify]") {
  auto d = structure(custom(2, 2, {"0F0 0F1 0B1 0B0", "1F0 1B0 1B1"}));
  REQUIRE(d.size() >= 1);
  CHECK(d[0].code == "missing-forward");
  CHECK(d[0].message == "stage 1 microbatch 1 has no forward (expected 1F1 on rank 1)");
}

TEST_CASE("verify: a duplicate action names both places", "[verify]") {
  auto d = structure(custom(1, 2, {"0F0 0F1 0F1 0B0 0B1"}));
  REQUIRE(d.size() == 1);
  CHECK(d[0].code == "duplicate-action");
  CHECK(d[0].message == "0F1 appears twice: rank 0 index 1 and rank 0 index 2");
  // A second SEND (or RECV) also names the copy left without its partner.
  d = structure(custom(2, 1, {"0F0 0SEND_F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"}));
  REQUIRE(d.size() == 2);
  CHECK(d[0].code == "duplicate-action");
  CHECK(d[1].code == "unmatched-send");
  CHECK(d[1].rank == 0);
  CHECK(d[1].index == 2);
  CHECK(d[1].message ==
        "the second 0SEND_F0 (rank 0 index 2) is left without a partner: 1RECV_F0 on rank 1 meets "
        "only one send of that value");
  d = structure(custom(2, 1, {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0 1SEND_B0"}));
  REQUIRE(d.size() == 2);
  CHECK(d[1].message ==
        "the second 1SEND_B0 (rank 1 index 4) is left without a partner: 0RECV_B0 on rank 0 meets "
        "only one send of that value");
  d = structure(custom(2, 1, {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1RECV_F0 1F0 1B0 1SEND_B0"}));
  REQUIRE(d.size() == 2);
  CHECK(d[1].code == "unmatched-recv");
  CHECK(d[1].message ==
        "the second 1RECV_F0 (rank 1 index 1) is left without a partner: 0SEND_F0 on rank 0 meets "
        "only one receive of that value");
}

TEST_CASE("verify: W before its I is rejected", "[verify]") {
  auto d = structure(custom(1, 1, {"0F0 0W0 0I0"}));
  REQUIRE(d.size() == 1);
  CHECK(d[0].code == "w-before-i");
  CHECK(d[0].message == "rank 0 index 1: 0W0 needs 0I0 earlier on rank 0 (it is at index 2)");
}

TEST_CASE("verify: split and full backward counts", "[verify]") {
  auto mixed = structure(custom(1, 1, {"0F0 0I0 0B0 0W0"}));
  REQUIRE(mixed.size() == 1);
  CHECK(mixed[0].message ==
        "stage 0 microbatch 0 has both a full backward 0B0 and a split one (I/W)");
  auto no_w = structure(custom(1, 1, {"0F0 0I0"}));
  REQUIRE(no_w.size() == 1);
  CHECK(no_w[0].message == "stage 0 microbatch 0 has 0I0 but no 0W0");
  auto none = structure(custom(1, 1, {"0F0"}));
  REQUIRE(none.size() == 1);
  CHECK(none[0].message ==
        "stage 0 microbatch 0 has no backward (expected 0B0, or 0I0 and 0W0, on rank 0)");
}

TEST_CASE("verify: out-of-range microbatch and stage, wrong rank", "[verify]") {
  auto mb = structure(custom(1, 2, {"0F0 0F1 0F2 0B0 0B1"}));
  REQUIRE(mb.size() == 1);
  CHECK(mb[0].code == "microbatch-out-of-range");
  CHECK(mb[0].message ==
        "rank 0 index 2: 0F2 names microbatch 2, but the plan has 2 microbatches (0..1)");
  auto st = structure(custom(2, 1, {"0F0 0B0", "1F0 1B0 2F0"}));
  REQUIRE(st.size() == 1);
  CHECK(st[0].message == "rank 1 index 2: 2F0 names stage 2, but the plan has 2 stages (0..1)");
  auto wr = structure(custom(2, 1, {"0F0 1F0 1B0 0B0", ""}));
  REQUIRE(wr.size() == 2);
  CHECK(wr[0].code == "wrong-rank");
  CHECK(wr[0].message ==
        "rank 0 index 1: 1F0 runs on rank 0, but stage 1 belongs to rank 1 (loop mapping)");
}

TEST_CASE("verify: a receive without a send and a send without a receive", "[verify]") {
  Plan plan = pipeplan::plan(Problem{"gpipe", 2, 2, 0});
  REQUIRE(to_string(plan.ranks[0]) == "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B1 0B1 0RECV_B0 0B0");
  Plan no_send = plan;
  no_send.ranks[0] = actions("0F0 0SEND_F0 0F1 0RECV_B1 0B1 0RECV_B0 0B0");
  auto d = structure(no_send);
  REQUIRE(d.size() == 1);
  CHECK(d[0].code == "unmatched-recv");
  CHECK(d[0].message == "1RECV_F1 on rank 1 has no matching 0SEND_F1 on rank 0");
  Plan no_recv = plan;
  no_recv.ranks[0] = actions("0F0 0SEND_F0 0F1 0SEND_F1 0B1 0RECV_B0 0B0");
  d = structure(no_recv);
  REQUIRE(d.size() == 2);
  CHECK(d[0].code == "unmatched-send");
  CHECK(d[0].message == "1SEND_B1 on rank 1 has no matching 0RECV_B1 on rank 0");
  CHECK(d[1].code == "backward-before-grad");
  CHECK(d[1].message == "rank 0 index 4: 0B1 needs 0RECV_B1 earlier on rank 0");
}

TEST_CASE("verify: sends before their producer, receives after their consumer", "[verify]") {
  Plan plan = pipeplan::plan(Problem{"gpipe", 2, 2, 0});
  Plan early = plan;
  early.ranks[0] = actions("0SEND_F0 0F0 0F1 0SEND_F1 0RECV_B1 0B1 0RECV_B0 0B0");
  auto d = structure(early);
  REQUIRE(d.size() == 1);
  CHECK(d[0].code == "send-before-producer");
  CHECK(d[0].message ==
        "rank 0 index 0: 0SEND_F0 sends the output of 0F0 earlier on rank 0 (it is at index 1)");
  Plan late = plan;
  late.ranks[1] = actions("1F0 1RECV_F0 1RECV_F1 1F1 1B1 1SEND_B1 1B0 1SEND_B0");
  d = structure(late);
  REQUIRE(d.size() == 1);
  CHECK(d[0].code == "forward-before-input");
  CHECK(d[0].message == "rank 1 index 0: 1F0 needs 1RECV_F0 earlier on rank 1 (it is at index 1)");
}

TEST_CASE("verify: communication that has no peer or is not needed", "[verify]") {
  auto d =
      structure(custom(2, 1, {"0F0 0SEND_F0 0RECV_B0 0B0 0SEND_B0", "1RECV_F0 1F0 1B0 1SEND_B0"}));
  REQUIRE(d.size() == 1);
  CHECK(d[0].code == "bad-comm");
  CHECK(d[0].message == "rank 0 index 4: 0SEND_B0 has no peer: stage 0 is the first stage");
  Plan v = custom(1, 1, {"0F0 0SEND_F0 1RECV_F0 1F0 1B0 0B0"}, 2, StageMapping::V);
  d = structure(v);
  REQUIRE(d.size() == 2);
  CHECK(d[0].message ==
        "rank 0 index 1: 0SEND_F0 is not needed: stages 0 and 1 are both on rank 0");
}

TEST_CASE("verify: a partial plan cannot be proven", "[verify]") {
  Plan one = plan_rank(Problem{"1f1b", 4, 8, 0}, 2);
  VerifyResult r = verify(one);
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(r.diagnostics[0].code == "partial-plan");
  CHECK(r.diagnostics[0].message ==
        "the plan holds rank(s) 2 of 4; verification needs every rank 0..3");
}

TEST_CASE("verify: a receive waiting on a peer that never sends it in time (eager chain)",
          "[verify]") {
  // Rank 1 waits for the gradient before it has sent the activation rank 0's
  // backward needs, and rank 0 waits for that: a cycle under every model.
  Plan plan = custom(2, 1, {"0F0 0RECV_B0 0B0 0SEND_F0", "1RECV_F0 1F0 1B0 1SEND_B0"});
  VerifyResult r = verify(plan, {Transport::Eager});
  REQUIRE_FALSE(r.ok());
  CHECK(r.diagnostics.back().message ==
        "deadlock under eager transport: 2 of 2 ranks cannot finish (0, 1); waiting chain: "
        "rank 0 (at 0B0) -> rank 1 (at 1F0) -> rank 0 (at 0B0) [cycle]");
}

TEST_CASE("verify: diagnostics format names code, place and action", "[verify]") {
  std::vector<Diagnostic> d = {{"w-before-i", 0, 1, "0W0", "msg"}, {"deadlock", -1, -1, "", "x"}};
  CHECK(format_diagnostics(d) == "error[w-before-i] rank 0 index 1 (0W0): msg\nerror[deadlock]: x");
  CHECK(format_diagnostics({}) == "");
}

TEST_CASE("verify: receives posted long before their consumers, and corruption on a finished run",
          "[verify]") {
  // Rank 1 posts all six receives up front, so its forwards find their
  // receive far behind them (beyond the few recent ones verify() keeps).
  const std::string rank0 =
      "0F0 0SEND_F0 0F1 0SEND_F1 0F2 0SEND_F2 0F3 0SEND_F3 0F4 0SEND_F4 0F5 0SEND_F5 "
      "0RECV_B5 0RECV_B4 0RECV_B3 0RECV_B2 0RECV_B1 0RECV_B0 0B5 0B4 0B3 0B2 0B1 0B0";
  const std::string rank1_head =
      "1RECV_F0 1RECV_F1 1RECV_F2 1RECV_F3 1RECV_F4 1RECV_F5 1F0 1F1 1F2 1F3 1F4 1F5 ";
  Plan plan = custom(2, 6,
                     {rank0, rank1_head + "1B5 1SEND_B5 1B4 1SEND_B4 1B3 1SEND_B3 1B2 1SEND_B2 "
                                          "1B1 1SEND_B1 1B0 1SEND_B0"});
  for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
    VerifyResult r = verify(plan, {t});
    INFO(to_string(t) << "\n" << format_diagnostics(r.diagnostics));
    CHECK(r.ok());
  }
  // Swapping two sends still lets every rank finish, but one pair position
  // carries the wrong gradient: the one diagnostic is the corruption.
  Plan swapped = custom(2, 6,
                        {rank0, rank1_head + "1B5 1B4 1SEND_B4 1SEND_B5 1B3 1SEND_B3 1B2 1SEND_B2 "
                                             "1B1 1SEND_B1 1B0 1SEND_B0"});
  for (Transport t : {Transport::Rendezvous, Transport::Serial, Transport::Eager}) {
    VerifyResult r = verify(swapped, {t});
    REQUIRE(r.diagnostics.size() == 1);
    CHECK(r.diagnostics[0].code == "fifo-corruption");
    CHECK(r.diagnostics[0].rank == 0);
    CHECK(r.diagnostics[0].index == 12);
    CHECK(r.diagnostics[0].message ==
          "send 0 from rank 1 to rank 0: rank 1 sends 1SEND_B4 (Grad(1, 4)) and rank 0 receives "
          "it as 0RECV_B5 (expects Grad(1, 5)); sends and receives meet in order, so the data "
          "would be silently corrupted");
  }
}

TEST_CASE("verify: a ring of serial stream heads is named once, as a cycle", "[verify]") {
  // Without serial_safe, interleaved-1f1b p=3 closes a ring of sends through
  // the rank 2 -> rank 0 link: fine per pair, stuck with one stream per rank.
  LowerOptions seed;
  seed.mode = LowerMode::Seed;
  Plan plan = lower(plan_compute(Problem{"interleaved-1f1b", 3, 6, 2}), seed);
  REQUIRE(verify(plan, {Transport::Rendezvous}).ok());
  VerifyResult r = verify(plan, {Transport::Serial});
  REQUIRE(r.diagnostics.size() == 4);
  CHECK(r.diagnostics[0].message ==
        "rank 0 is stuck at index 7 (3F0): it needs 3RECV_F0, but it queues behind 0SEND_F2 (pair "
        "0-1 "
        "position 2 on rank 0), which waits on 1SEND_F1 (pair 1-2 position 1 on rank 1), which "
        "waits on "
        "2SEND_F0 (pair 0-2 position 0 on rank 2), which waits on 0SEND_F2 (pair 0-1 position 2 on "
        "rank "
        "0), again: these stream heads wait on each other in a cycle");
  CHECK(r.diagnostics[3].code == "deadlock");
  // With serial_safe each rank keeps one order across its peers.
  LowerOptions safe = default_lowering("interleaved-1f1b");
  safe.serial_safe = true;
  CHECK(
      verify(pipeplan::plan(Problem{"interleaved-1f1b", 3, 6, 2}, safe), {Transport::Serial}).ok());
}

TEST_CASE("verify: group marks a file cannot hold are bad-group", "[verify][groups]") {
  Plan p;
  p.meta = PlanMeta{"custom", 2, 1, 1, StageMapping::Loop, false, {}};
  p.rank_ids = {0, 1};
  p.ranks = {actions("0F0 0SEND_F0 0RECV_B0 0B0"), actions("1RECV_F0 1F0 1B0 1SEND_B0")};
  p.ranks[0][0].batch_next = true;
  const std::vector<Diagnostic> d = check_structure(p);
  REQUIRE(d.size() == 1);
  CHECK(d[0].code == "bad-group");
  CHECK(d[0].message ==
        "rank 0 index 0: 0F0 is in a BATCH_P2P group, which holds only SEND_F, RECV_F, SEND_B "
        "and RECV_B");
  p.ranks[0][0].batch_next = false;
  p.ranks[1].back().batch_next = true;
  CHECK(verify(p).diagnostics.at(0).message ==
        "rank 1 index 3: 1SEND_B0 is marked as posted with the next action, but it ends its "
        "rank's list");
}

TEST_CASE("verify: under rendezvous a group member meeting a single SEND/RECV is named",
          "[verify][groups]") {
  // On NCCL the group runs on the group's communicator, the single on the
  // pair's: they never meet, though the rendezvous model lets them.
  const Plan mixed = custom(2, 1, {"0F0 (0SEND_F0;0RECV_B0)BATCH_P2P 0B0",
                                   "1RECV_F0 1F0 1B0 1SEND_B0"});
  const std::vector<Diagnostic> d = verify(mixed, {Transport::Rendezvous}).diagnostics;
  REQUIRE(d.size() == 2);
  CHECK(d[0].code == "group-meets-single");
  CHECK(d[0].rank == 0);
  CHECK(d[0].index == 1);
  CHECK(d[0].message ==
        "rank 0 posts 0SEND_F0 in a BATCH_P2P group and rank 1 posts its partner 1RECV_F0 "
        "alone: the rendezvous model lets them meet, but on NCCL (torch's ProcessGroupNCCL, "
        "pipeplan's executor) grouped operations run on the group's communicator and single "
        "ones on the pair's, so they never meet; post both in groups or both alone");
  CHECK(d[1].action == "0RECV_B0");
  // Serial (one communicator for everything) and eager (Gloo) meet them.
  CHECK(verify(mixed, {Transport::Serial}).ok());
  CHECK(verify(mixed, {Transport::Eager}).ok());
  // Groups that meet groups, and the batched lowering of every schedule, pass.
  const Plan grouped =
      custom(2, 2, {"0F0 0SEND_F0 0F1 (0RECV_B0;0SEND_F1)BATCH_P2P 0B0 0RECV_B1 0B1",
                    "1RECV_F0 1F0 1B0 (1SEND_B0;1RECV_F1)BATCH_P2P 1F1 1B1 1SEND_B1"});
  CHECK(verify(grouped, {Transport::Rendezvous}).ok());
  LoweringChoice batched;
  batched.batch_p2p = true;
  for (const char* s : {"1f1b", "gpipe", "interleaved-1f1b", "zb-h1"}) {
    INFO(s);
    const int v = std::string(s) == "interleaved-1f1b" ? 2 : 1;
    CHECK(verify(pipeplan::plan(Problem{s, 4, 8, v}, batched, CostModel{}), {Transport::Rendezvous})
              .ok());
  }
}
