// The verifier against what real runtimes do: the posting orders of
// Megatron-LM's pipeline schedules re-enacted op by op (from reading its
// schedules and P2P layer; none of its code), DeepSpeed's as the real package's
// instruction streams convert (tests/golden/deepspeed/, which the oracle test
// python/oracle_tests/test_deepspeed.py holds to the installed DeepSpeed; the
// core tests run without Python, so they read the golden), with the
// verdict each model must give and why, and swapped-order mutations that
// every model must reject (matching is by order everywhere).
#include <catch2/catch.hpp>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

const Transport kModels[] = {Transport::Rendezvous, Transport::Serial, Transport::Eager};

Plan from_cells(int p, int m, const std::vector<std::vector<std::string>>& cells,
                bool forward_only = false) {
  Plan plan;
  plan.meta = PlanMeta{"custom", p, m, 1, StageMapping::Loop, forward_only, {}};
  for (int r = 0; r < p; ++r) {
    std::string line;
    for (const std::string& c : cells[static_cast<std::size_t>(r)]) line += c + " ";
    plan.rank_ids.push_back(r);
    plan.ranks.push_back(test::actions(line));
  }
  return plan;
}

std::string cell(int stage, const char* type, int mb) {
  return std::to_string(stage) + type + std::to_string(mb);
}

// Megatron's P2P call on rank r: its operations (send_prev, recv_prev,
// send_next, recv_next, those not empty) as one batch_isend_irecv (a group;
// one of a single operation is that operation), or as single isend/irecv in
// _p2p_ops' order: even ranks send_next, recv_prev, send_prev, recv_next,
// odd ranks recv_prev, send_next, recv_next, send_prev.
void megatron_call(std::vector<std::string>& out, int r, bool batched, const std::string& send_prev,
                   const std::string& recv_prev, const std::string& send_next,
                   const std::string& recv_next) {
  const std::vector<std::string> order =
      batched      ? std::vector<std::string>{send_prev, recv_prev, send_next, recv_next}
      : r % 2 == 0 ? std::vector<std::string>{send_next, recv_prev, send_prev, recv_next}
                   : std::vector<std::string>{recv_prev, send_next, recv_next, send_prev};
  std::vector<std::string> ops;
  for (const std::string& o : order)
    if (!o.empty()) ops.push_back(o);
  if (!batched || ops.size() == 1) {
    for (const std::string& o : ops) out.push_back(o);
  } else if (!ops.empty()) {
    std::string g = "(";
    for (std::size_t k = 0; k < ops.size(); ++k) g += (k ? ";" : "") + ops[k];
    out.push_back(g + ")BATCH_P2P");
  }
}

// Megatron-LM's non-interleaved 1F1B (forward_backward_pipelining_without_
// interleaving) on rank r of p, stage r: warm-up forwards, steady 1F1B, cool-
// down backwards; each P2P call (megatron_call) is waited right after.
std::vector<std::string> megatron_1f1b(int p, int m, int r, bool batched) {
  std::vector<std::string> out;
  const bool first = r == 0, last = r == p - 1;
  auto post = [&](const std::string& send_prev, const std::string& recv_prev,
                  const std::string& send_next, const std::string& recv_next) {
    megatron_call(out, r, batched, send_prev, recv_prev, send_next, recv_next);
  };
  const std::string none;
  auto recv_f = [&](int mb) { return first ? none : cell(r, "RECV_F", mb); };
  auto send_f = [&](int mb) { return last ? none : cell(r, "SEND_F", mb); };
  auto recv_b = [&](int mb) { return last ? none : cell(r, "RECV_B", mb); };
  auto send_b = [&](int mb) { return first ? none : cell(r, "SEND_B", mb); };
  const int warmup = std::min(p - r - 1, m), steady = m - warmup;
  int f = 0, b = 0;
  for (int i = 0; i < warmup; ++i, ++f) {
    post(none, recv_f(f), none, none);
    out.push_back(cell(r, "F", f));
    post(none, none, send_f(f), none);
  }
  if (steady > 0) post(none, recv_f(f), none, none);
  for (int i = 0; i < steady; ++i) {
    out.push_back(cell(r, "F", f));
    post(none, none, send_f(f), recv_b(b));  // send_forward_recv_backward
    ++f;
    out.push_back(cell(r, "B", b));
    if (i == steady - 1) post(send_b(b), none, none, none);
    else post(send_b(b), recv_f(f), none, none);  // send_backward_recv_forward
    ++b;
  }
  for (int i = 0; i < warmup; ++i, ++b) {
    post(none, none, none, recv_b(b));
    out.push_back(cell(r, "B", b));
    post(send_b(b), none, none, none);
  }
  return out;
}

Plan megatron_1f1b(int p, int m, bool batched) {
  std::vector<std::vector<std::string>> cells;
  for (int r = 0; r < p; ++r) cells.push_back(megatron_1f1b(p, m, r, batched));
  return from_cells(p, m, cells);
}

// Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_
// interleaving) on rank r: v model chunks, stage c * p + r for chunk c,
// m a multiple of p. Iteration k runs chunk (k mod pv) / p (backwards from
// the last chunk), microbatch (k / pv) p + k mod p. A received tensor goes
// to the next forward (backward) of the chunk Megatron computes, in order,
// so a RECV is named by that chunk's count so far. Calls post send_prev,
// recv_prev, send_next, recv_next: batched (a group), unbatched (singles,
// even/odd order) or with overlap_p2p_comm (singles, forward and backward
// exchanges apart, waited before the next compute that needs them).
enum class P2p { Batched, Unbatched, Overlap };

std::vector<std::string> megatron_interleaved(int p, int v, int m, int r, P2p mode) {
  std::vector<std::string> out;
  const int total = m * v;
  auto chunk_f = [&](int k) { return (((k % (p * v)) + p * v) % (p * v)) / p; };  // k may be < 0
  auto chunk_b = [&](int k) { return v - 1 - chunk_f(k); };
  auto mb = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto stage = [&](int c) { return c * p + r; };
  std::vector<int> got_f(static_cast<std::size_t>(v), 0), got_b(static_cast<std::size_t>(v), 0);
  const std::string none;
  auto recv_f = [&](int c) {
    return cell(stage(c), "RECV_F", got_f[static_cast<std::size_t>(c)]++);
  };
  auto recv_b = [&](int c) {
    return cell(stage(c), "RECV_B", got_b[static_cast<std::size_t>(c)]++);
  };
  auto send_f = [&](int k) {
    return r == p - 1 && chunk_f(k) == v - 1 ? none : cell(stage(chunk_f(k)), "SEND_F", mb(k));
  };
  auto send_b = [&](int k) {
    return r == 0 && chunk_b(k) == 0 ? none : cell(stage(chunk_b(k)), "SEND_B", mb(k));
  };
  auto post = [&](const std::string& send_prev, const std::string& recv_prev,
                  const std::string& send_next, const std::string& recv_next) {
    megatron_call(out, r, mode == P2p::Batched, send_prev, recv_prev, send_next, recv_next);
  };
  const bool all_warmup = m == p;
  const int warmup = all_warmup ? total : std::min((p - r - 1) * 2 + (v - 1) * p, total);
  const int steady = total - warmup;
  if (r > 0) post(none, recv_f(0), none, none);
  for (int k = 0; k < warmup; ++k) {
    out.push_back(cell(stage(chunk_f(k)), "F", mb(k)));
    const int next = chunk_f(k + 1);
    const bool rp = !(r == 0 && next == 0) && k != total - 1;
    const bool exchange_b = k == warmup - 1 && !all_warmup && r != p - 1;
    // both names are taken in the order Megatron files them
    const std::string in = rp ? recv_f(next) : none;
    if (mode != P2p::Overlap) {
      post(none, in, send_f(k), exchange_b ? recv_b(v - 1) : none);
    } else {
      post(none, in, send_f(k), none);
      if (exchange_b) post(none, none, none, recv_b(v - 1));
    }
  }
  for (int k = 0; k < steady; ++k) {
    const int fk = k + warmup;
    int next_f = chunk_f(fk + 1), next_b = chunk_b(k + 1);
    bool rp = true, rn = true;
    if (r == 0) {
      next_f = chunk_f(fk - (p - 1));
      rp = next_f != v - 1;
      ++next_f;
    }
    if (r == p - 1) {
      next_b = chunk_b(k - (p - 1));
      rn = next_b != 0;
      --next_b;
    }
    if (k == steady - 1) rp = false;
    out.push_back(cell(stage(chunk_f(fk)), "F", mb(fk)));
    if (mode == P2p::Overlap) {
      post(none, rp ? recv_f(next_f) : none, send_f(fk), none);
      out.push_back(cell(stage(chunk_b(k)), "B", mb(k)));
      post(send_b(k), none, none, rn ? recv_b(next_b) : none);
    } else {
      out.push_back(cell(stage(chunk_b(k)), "B", mb(k)));
      const std::string in = rp ? recv_f(next_f) : none;
      post(send_b(k), in, send_f(fk), rn ? recv_b(next_b) : none);
    }
  }
  if (all_warmup && r != p - 1) post(none, none, none, recv_b(v - 1));
  for (int k = steady; k < total; ++k) {
    out.push_back(cell(stage(chunk_b(k)), "B", mb(k)));
    const int next = chunk_b(k + 1);
    const bool rn = !(r == p - 1 && next == v - 1) && k != total - 1;
    post(send_b(k), none, none, rn ? recv_b(next) : none);
  }
  return out;
}

Plan megatron_interleaved(int p, int v, int m, P2p mode) {
  std::vector<std::vector<std::string>> cells;
  for (int r = 0; r < p; ++r) cells.push_back(megatron_interleaved(p, v, m, r, mode));
  Plan plan = from_cells(p, m, cells);
  plan.meta.stages_per_rank = v;
  return plan;
}

// DeepSpeed's TrainSchedule / InferenceSchedule plans as pipeplan.from_deepspeed
// converts the real package's instruction streams (tests/golden/deepspeed/,
// checked against the installed DeepSpeed by python/oracle_tests/
// test_deepspeed.py): "p=P m=M" then one "rank R: ..." line per rank, blocks
// separated by an empty line.
struct GoldenPlan {
  int p = 0, m = 0;
  std::vector<std::vector<std::string>> cells;
};

std::vector<GoldenPlan> deepspeed_golden(const std::string& name) {
  std::vector<GoldenPlan> out;
  std::istringstream in(test::read_source_file("tests/golden/deepspeed/" + name + ".txt"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("p=", 0) == 0) {
      GoldenPlan g;
      REQUIRE(std::sscanf(line.c_str(), "p=%d m=%d", &g.p, &g.m) == 2);
      out.push_back(g);
      continue;
    }
    REQUIRE(!out.empty());
    const std::string prefix = "rank " + std::to_string(out.back().cells.size()) + ": ";
    REQUIRE(line.rfind(prefix, 0) == 0);
    std::istringstream cells(line.substr(prefix.size()));
    std::vector<std::string> row;
    for (std::string c; cells >> c;) row.push_back(c);
    out.back().cells.push_back(row);
  }
  return out;
}

std::vector<std::string> text_lines(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& list : plan.ranks) out.push_back(to_string(list));
  return out;
}

std::string verdicts(const Plan& plan) {
  std::string out;
  for (Transport t : kModels) {
    const VerifyResult v = verify(plan, {t});
    out += std::string(to_string(t)) + "=" + (v.ok() ? "ok" : v.diagnostics.back().code) + " ";
  }
  return out;
}

// Moves a rank's first SEND_F just after the next SEND_F of its stage (each
// send still follows its producer); whether there was one.
bool swap_two_sends(Plan& plan) {
  for (auto& list : plan.ranks) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i].type != ActionType::SendF) continue;
      for (std::size_t j = i + 1; j < list.size(); ++j) {
        if (list[j].type != ActionType::SendF || list[j].stage != list[i].stage) continue;
        const Action moved = list[i];
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
        list.insert(list.begin() + static_cast<std::ptrdiff_t>(j), moved);
        return true;
      }
    }
  }
  return false;
}

}  // namespace

TEST_CASE("runtimes: the issue's smallest false alarm runs with its groups", "[runtimes]") {
  // Megatron 1F1B, p=2, m=2, batch_p2p_comm: each group's send and receive
  // are posted together, and both ranks' groups meet as one unit.
  const Plan batched = megatron_1f1b(2, 2, true);
  CHECK(text_lines(batched) ==
        std::vector<std::string>{"0F0 0SEND_F0 0F1 (0SEND_F1;0RECV_B0)BATCH_P2P 0B0 0RECV_B1 0B1",
                                 "1RECV_F0 1F0 1B0 (1SEND_B0;1RECV_F1)BATCH_P2P 1F1 1B1 1SEND_B1"});
  for (Transport t : kModels) CHECK(verify(batched, {t}).ok());
  // Without the groups it is the deadlocking edit: both ranks' pair streams
  // start with a send (rank 0: SEND_F1, rank 1: SEND_B0), under rendezvous
  // and serial; eager buffers the sends.
  Plan singles = batched;
  for (auto& list : singles.ranks)
    for (Action& a : list) a.batch_next = false;
  CHECK(verdicts(singles) == "rendezvous=deadlock serial=deadlock eager=ok ");
  CHECK(verify(singles, {Transport::Rendezvous}).diagnostics[0].code == "fifo-both-send");
}

TEST_CASE("runtimes: Megatron 1F1B, batched and unbatched, on a grid", "[runtimes]") {
  // Batched (the default): every group pairs one direction's send with the
  // other direction's receive, and the neighbour's group holds the partners
  // of both, so the two groups end together: no model waits forever.
  // Unbatched: the even/odd posting order makes every rank pair's k-th
  // operations complementary (rendezvous, eager). Serial puts all of a
  // middle rank's operations on one stream: its send_forward_recv_backward
  // (towards the next rank) and send_backward_recv_forward (towards the
  // previous) queue behind each other, which the odd/even order was made for
  // too, so it runs as well.
  for (int p = 2; p <= 6; ++p) {
    for (int m = 1; m <= 12; ++m) {
      INFO("p=" << p << " m=" << m);
      const Plan batched = megatron_1f1b(p, m, true);
      REQUIRE(check_structure(batched).empty());
      CHECK(verdicts(batched) == "rendezvous=ok serial=ok eager=ok ");
      const Plan unbatched = megatron_1f1b(p, m, false);
      REQUIRE(check_structure(unbatched).empty());
      CHECK(verdicts(unbatched) == "rendezvous=ok serial=ok eager=ok ");
    }
  }
}

TEST_CASE("runtimes: DeepSpeed train and inference schedules, on a grid", "[runtimes]") {
  // Blocking send/recv in the step order: each exchange's partner is the
  // neighbour's next posted operation (the step parity alternates between
  // neighbours), so even one stream per rank (serial) runs. p 2..6, m 1..10;
  // the oracle test runs DeepSpeed itself on p 1..8, m 1..16.
  const std::vector<GoldenPlan> train = deepspeed_golden("train"),
                                infer = deepspeed_golden("inference");
  REQUIRE(train.size() == 50);
  REQUIRE(infer.size() == 50);
  for (const GoldenPlan& g : train) {
    INFO("train p=" << g.p << " m=" << g.m);
    const Plan t = from_cells(g.p, g.m, g.cells);
    REQUIRE(check_structure(t).empty());
    CHECK(verdicts(t) == "rendezvous=ok serial=ok eager=ok ");
  }
  for (const GoldenPlan& g : infer) {
    INFO("inference p=" << g.p << " m=" << g.m);
    const Plan i = from_cells(g.p, g.m, g.cells, true);
    REQUIRE(check_structure(i).empty());
    CHECK(verdicts(i) == "rendezvous=ok serial=ok eager=ok ");
  }
}

TEST_CASE("runtimes: two sends to one peer swapped are rejected under every model", "[runtimes]") {
  // The eager case: a rank ships two microbatches' activations in
  // swapped order. Matching is by order (NCCL; Gloo on one tag), so the
  // consumer would get the wrong tensor: corruption under every model.
  const Plan base = megatron_1f1b(3, 4, true);
  Plan swapped = base;
  auto& r0 = swapped.ranks[0];  // 0F0 0SEND_F0 0F1 0SEND_F1 ...: ship F1 first
  REQUIRE(text_lines(base)[0].rfind("0F0 0SEND_F0 0F1 0SEND_F1 ", 0) == 0);
  std::swap(r0[1], r0[3]);
  std::swap(r0[1], r0[2]);  // 0F0 0F1 0SEND_F1 0SEND_F0
  for (Transport t : kModels) {
    const VerifyResult v = verify(swapped, {t});
    INFO(to_string(t));
    REQUIRE(!v.ok());
    CHECK(v.diagnostics[0].code == "fifo-corruption");
    CHECK(v.diagnostics[0].message ==
          "send 0 from rank 0 to rank 1: rank 0 sends 0SEND_F1 (Forward(0, 1)) and rank 1 "
          "receives it as 1RECV_F0 (expects Forward(0, 0)); sends and receives meet in order, so "
          "the data would be silently corrupted");
  }
  // Every library schedule: a rank's first two sends of one stage swapped
  // (each still after its producer): rejected everywhere.
  int mutated = 0;
  for (const auto& info : schedules()) {
    for (int p : {2, 3, 4}) {
      Plan plan;
      try {
        plan = pipeplan::plan(Problem{info.name, p, 2 * p, 0});
      } catch (const std::exception&) {
        continue;
      }
      REQUIRE(verify(plan, {Transport::Rendezvous}).ok());
      if (swap_two_sends(plan)) {
        ++mutated;
        for (Transport t : kModels) {
          INFO(info.name << " p=" << p << " " << to_string(t));
          CHECK(!verify(plan, {t}).ok());
        }
      }
    }
  }
  CHECK(mutated >= 10);
}

TEST_CASE("runtimes: a rank passes a group only when the group ended", "[runtimes]") {
  // Rank 0 posts its send of microbatch 1 only after the group; the group
  // waits for the gradient of microbatch 0, which rank 1 makes after its
  // forward of microbatch 1: stuck under every model, eager included.
  const Plan grouped = from_cells(
      2, 2,
      {{"0F0", "0F1", "(0SEND_F0;0RECV_B0)BATCH_P2P", "0SEND_F1", "0B0", "0RECV_B1", "0B1"},
       {"1RECV_F0", "1RECV_F1", "1F0", "1F1", "1B0", "1SEND_B0", "1B1", "1SEND_B1"}});
  REQUIRE(check_structure(grouped).empty());
  CHECK(verdicts(grouped) == "rendezvous=deadlock serial=deadlock eager=deadlock ");
  const VerifyResult eager = verify(grouped, {Transport::Eager});
  REQUIRE(eager.diagnostics.size() == 3);
  CHECK(eager.diagnostics[0].message ==
        "rank 0 is stuck at index 2 ((0SEND_F0;0RECV_B0)BATCH_P2P): the group waits for 0RECV_B0, "
        "but rank 1 has not posted 1SEND_B0 yet");
  CHECK(eager.diagnostics[1].message ==
        "rank 1 is stuck at index 3 (1F1): it needs 1RECV_F1, but rank 0 has not posted 0SEND_F1 "
        "yet");
  const VerifyResult rv = verify(grouped, {Transport::Rendezvous});
  REQUIRE(rv.diagnostics.size() == 3);
  CHECK(rv.diagnostics[0].message ==
        "rank 0 is stuck at index 2 ((0SEND_F0;0RECV_B0)BATCH_P2P): the group waits for 0RECV_B0, "
        "but rank 1 has not posted 1SEND_B0, which 0RECV_B0 meets, yet");
  // As single operations eager buffers the sends and runs it; rendezvous
  // meets two receives at pair position 1.
  Plan singles = grouped;
  for (auto& list : singles.ranks)
    for (Action& a : list) a.batch_next = false;
  CHECK(verdicts(singles) == "rendezvous=deadlock serial=deadlock eager=ok ");
}

TEST_CASE("runtimes: a group queued behind another names the chain", "[runtimes]") {
  // Rank 1's second group (sending the gradient of microbatch 0) is behind
  // its first, which waits for rank 0's activation of microbatch 1, which
  // rank 0 sends in a group that waits for that very gradient.
  const Plan p = from_cells(
      2, 2,
      {{"0F0", "0SEND_F0", "0F1", "(0SEND_F1;0RECV_B0)BATCH_P2P", "0B0", "0RECV_B1", "0B1"},
       {"1RECV_F0", "1F0", "1B0", "(1RECV_F1;1SEND_B1)BATCH_P2P", "1SEND_B0", "1F1", "1B1"}});
  CHECK(!check_structure(p).empty());  // SEND_B1 before B1: not a plan
  const Plan q = from_cells(
      2, 2,
      {{"0F0", "0SEND_F0", "0F1", "(0RECV_B0;0SEND_F1)BATCH_P2P", "0B0", "0RECV_B1", "0B1"},
       {"1RECV_F0", "1F0", "1B0", "1RECV_F1", "1F1", "1B1", "(1SEND_B1;1SEND_B0)BATCH_P2P"}});
  REQUIRE(check_structure(q).empty());
  // Rank 0's group waits for 1SEND_B0, posted in rank 1's last group, which
  // rank 1 reaches after 1F1, which needs 1RECV_F1: met by 0SEND_F1 in rank
  // 0's group, at the head of its stream, so it completes; rank 1 then
  // posts its group, whose first send meets 0RECV_B0 by order: the values
  // differ (B1 meets the receive of B0) under every model.
  for (Transport t : kModels) {
    const VerifyResult v = verify(q, {t});
    INFO(to_string(t) << "\n" << format_diagnostics(v.diagnostics));
    REQUIRE(!v.ok());
    CHECK(v.diagnostics[0].code == "fifo-corruption");
  }
}

TEST_CASE("runtimes: simulate times groups and agrees with verify on the grids", "[runtimes]") {
  // Megatron 1F1B p=2 m=2 batched, default costs (F 1, B 2), a transfer of
  // 0.5. Rank 0's group (0SEND_F1; 0RECV_B0) and rank 1's (1SEND_B0;
  // 1RECV_F1) meet member by member, and the members run independently:
  // 0SEND_F1 (ready when 0F1 ends at 2) meets 1RECV_F1 and lands at 2.5;
  // 1SEND_B0 is ready when 1B0 ends (1RECV_F0 lands at 1.5, 1F0 1.5-2.5, 1B0
  // 2.5-4.5) and lands at 5. Both groups end with their last member, at 5,
  // so rank 1's forward of microbatch 1 starts at 5, not at 2.5: the rank
  // passes its group only when the group ended. The same under every model.
  SimOptions o;
  o.costs.comm_latency = 0.5;
  const Plan batched = megatron_1f1b(2, 2, true);
  for (Transport t : kModels) {
    o.transport = t;
    const SimResult s = simulate(batched, o);
    INFO(to_string(t));
    REQUIRE(s.ok());
    const auto& r0 = s.times[0];
    const auto& r1 = s.times[1];
    CHECK(r0[3].end == Approx(2.5));    // 0SEND_F1
    CHECK(r1[4].end == Approx(2.5));    // 1RECV_F1
    CHECK(r1[3].end == Approx(5.0));    // 1SEND_B0
    CHECK(r0[4].end == Approx(5.0));    // 0RECV_B0
    CHECK(r1[5].start == Approx(5.0));  // 1F1, after the group
    CHECK(r0[5].start == Approx(5.0));  // 0B0, after the group
    // 1F1 5-6, 1B1 6-8, 1SEND_B1 lands at 8.5, 0B1 8.5-10.5
    CHECK(s.makespan == Approx(10.5));
  }
  for (int p = 2; p <= 5; ++p)
    for (int m = 1; m <= 8; ++m)
      for (bool b : {true, false})
        for (Transport t : kModels) {
          o.transport = t;
          const Plan plan = megatron_1f1b(p, m, b);
          INFO("p=" << p << " m=" << m << " batched=" << b << " " << to_string(t));
          CHECK(simulate(plan, o).ok() == verify(plan, {t}).ok());
        }
}

TEST_CASE("runtimes: Megatron interleaved 1F1B, batched, unbatched, overlap_p2p_comm",
          "[runtimes]") {
  int corrupt = 0, mixed = 0;
  for (int p = 2; p <= 4; ++p)
    for (int v = 2; v <= 3; ++v)
      for (int m = p; m <= 3 * p; m += p)
        for (P2p mode : {P2p::Batched, P2p::Unbatched, P2p::Overlap}) {
          const Plan plan = megatron_interleaved(p, v, m, mode);
          INFO("p=" << p << " v=" << v << " m=" << m << " mode=" << static_cast<int>(mode) << "\n"
                    << to_string(plan.ranks[0]) << "\n"
                    << to_string(plan.ranks[1]));
          REQUIRE(check_structure(plan).empty());
          const std::string got = verdicts(plan);
          if (p == 2 && mode == P2p::Batched && m > p) {
            // p = 2: the previous and the next rank are one rank. A group
            // sending a gradient back (send_prev) and an activation on
            // (send_next) ships them in that order, while the peer's group
            // receives the activation (recv_prev) before the gradient
            // (recv_next): the k-th send meets the k-th receive of the
            // other direction's value. NCCL would silently swap the two
            // same-shaped tensors; every model names it. (With m = p every
            // forward runs in the warm-up: no call sends both ways.)
            CHECK(got ==
                  "rendezvous=fifo-corruption serial=fifo-corruption eager=fifo-corruption ");
            ++corrupt;
            continue;
          }
          // Megatron posts even a one-operation call as a batch, on the
          // group's communicator; this restatement writes it as a single
          // SEND/RECV, so a group may meet a single. As written NCCL would
          // post the two on different communicators: named under
          // rendezvous (group-meets-single), every rank still progresses.
          if (mode != P2p::Unbatched &&
              got == "rendezvous=group-meets-single serial=ok eager=ok ") {
            ++mixed;
            continue;
          }
          // Otherwise each call's partner operations are in the neighbour's
          // call of the same step (a group ends when its partners' group
          // does; unbatched even/odd orders keep each pair complementary).
          CHECK(got == "rendezvous=ok serial=ok eager=ok ");
        }
  CHECK(corrupt == 4);  // v 2..3 x m 4, 6
  CHECK(mixed > 0);
}
