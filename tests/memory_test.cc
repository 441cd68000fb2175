// Memory actions (OFFLOAD, RELOAD, RECOMPUTE): the grammar and formats, the
// verifier's rules with their pinned diagnostics, and the simulator's time
// and memory model on hand-computed cases (docs/memory.md).
#include <catch2/catch.hpp>

#include <sstream>

#include "pipeplan/emit.h"
#include "pipeplan/interop.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/render.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::actions;

namespace {

Plan custom(int p, int m, const std::vector<std::string>& lines, bool forward_only = false) {
  Plan plan;
  plan.meta.schedule = "custom";
  plan.meta.pp_degree = p;
  plan.meta.num_microbatches = m;
  plan.meta.forward_only = forward_only;
  for (int r = 0; r < p; ++r) {
    plan.rank_ids.push_back(r);
    plan.ranks.push_back(actions(lines[static_cast<std::size_t>(r)]));
  }
  return plan;
}

// Rank 0 of a 2-rank, 2-microbatch 1F1B-like order given; rank 1 plain.
Plan two_ranks(const std::string& rank0) { return custom(2, 2, {rank0, "1F0 1B0 1F1 1B1"}); }

std::vector<std::string> codes(const std::vector<Diagnostic>& d) {
  std::vector<std::string> out;
  for (const Diagnostic& x : d) out.push_back(x.code);
  return out;
}

}  // namespace

TEST_CASE("memory: the grammar reads and writes OFFLOAD, RELOAD and RECOMPUTE", "[memory]") {
  for (const char* text : {"0OFFLOAD3", "0RELOAD3", "0RECOMPUTE3", "12RECOMPUTE0"}) {
    const std::optional<Action> a = parse_action(text);
    REQUIRE(a);
    CHECK(to_string(*a) == text);
    CHECK(is_memory(a->type));
  }
  CHECK(parse_action("0OFFLOAD3")->type == ActionType::Offload);
  CHECK(parse_action("0RELOAD3")->type == ActionType::Reload);
  CHECK(parse_action("0RECOMPUTE3")->type == ActionType::Recompute);
  CHECK(is_copy(ActionType::Offload));
  CHECK(is_copy(ActionType::Reload));
  CHECK_FALSE(is_copy(ActionType::Recompute));
  CHECK(is_compute(ActionType::Recompute));
  CHECK_FALSE(is_compute(ActionType::Offload));
  CHECK_FALSE(parse_action("0OFFLOAD"));  // a memory action names its microbatch
  CHECK_FALSE(parse_action("0OFFLOADS3"));
}

TEST_CASE("memory: JSON, CSV and text carry memory actions", "[memory]") {
  const Plan p = two_ranks("0F0 0OFFLOAD0 0F1 0RELOAD0 0B0 0RECOMPUTE1 0B1");
  REQUIRE(p.has_memory_actions());
  CHECK(p.is_compute_only());
  std::ostringstream json, csv, text;
  write_json(p, json);
  write_csv(p, csv);
  write_text(p, text);
  CHECK(csv.str() ==
        "0F0,0OFFLOAD0,0F1,0RELOAD0,0B0,0RECOMPUTE1,0B1\n"
        "1F0,1B0,1F1,1B1\n");
  CHECK(text.str() ==
        "rank 0: 0F0 0OFFLOAD0 0F1 0RELOAD0 0B0 0RECOMPUTE1 0B1\n"
        "rank 1: 1F0 1B0 1F1 1B1\n");
  const Plan from_json = parse_plan(json.str(), "plan.json");
  CHECK(from_json.ranks == p.ranks);
  CHECK(parse_plan(csv.str(), "plan.csv").ranks == p.ranks);
  CHECK(json.str().find("\"0RECOMPUTE1\"") != std::string::npos);
}

TEST_CASE("memory: a plan with memory actions is structurally valid and proved everywhere",
          "[memory]") {
  const Plan p = two_ranks("0F0 0OFFLOAD0 0F1 0RELOAD0 0B0 0RECOMPUTE1 0B1");
  CHECK(check_structure(p).empty());
  const Plan lowered = lower(p);
  CHECK(lowered.has_memory_actions());
  for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial})
    CHECK(verify(lowered, {t}).ok());
  // Offloading the input of a recomputed (stage, microbatch): OFFLOAD, RELOAD, RECOMPUTE.
  CHECK(check_structure(two_ranks("0F0 0OFFLOAD0 0F1 0RELOAD0 0RECOMPUTE0 0B0 0B1")).empty());
  // Split backward: before the I; the W needs nothing of them.
  CHECK(check_structure(custom(1, 1, {"0F0 0OFFLOAD0 0RELOAD0 0RECOMPUTE0 0I0 0W0"})).empty());
}

TEST_CASE("memory: each misuse is rejected with its diagnostic", "[memory][verify]") {
  struct Case {
    std::string rank0, code, message;
  };
  const std::vector<Case> cases = {
      {"0OFFLOAD0 0F0 0F1 0RELOAD0 0B0 0B1", "offload-before-forward",
       "rank 0 index 0: 0OFFLOAD0 needs 0F0 earlier on rank 0 (it is at index 1), whose "
       "activations it moves"},
      {"0F0 0OFFLOAD0 0F1 0B0 0B1", "offload-without-reload",
       "rank 0 index 1: 0OFFLOAD0 moves stage 0 microbatch 0's activations to host, but no "
       "0RELOAD0 brings them back for its backward"},
      {"0F0 0F1 0B0 0OFFLOAD0 0B1", "offload-after-backward",
       "rank 0 index 3: 0OFFLOAD0 comes after 0B0 (index 2), which already freed the "
       "activations it would move"},
      {"0F0 0F1 0RELOAD0 0B0 0B1", "reload-without-offload",
       "rank 0 index 2: 0RELOAD0 brings back activations that no 0OFFLOAD0 moved to host"},
      {"0F0 0RELOAD0 0OFFLOAD0 0F1 0B0 0B1", "reload-before-offload",
       "rank 0 index 1: 0RELOAD0 needs 0OFFLOAD0 earlier on rank 0 (it is at index 2)"},
      {"0F0 0OFFLOAD0 0F1 0B0 0RELOAD0 0B1", "reload-after-backward",
       "rank 0 index 4: 0RELOAD0 must come before 0B0 (index 3), which reads the activations it "
       "brings back"},
      {"0RECOMPUTE0 0F0 0F1 0B0 0B1", "recompute-before-forward",
       "rank 0 index 0: 0RECOMPUTE0 needs 0F0 earlier on rank 0 (it is at index 1), whose input "
       "it re-runs from"},
      {"0F0 0F1 0B0 0RECOMPUTE0 0B1", "recompute-after-backward",
       "rank 0 index 3: 0RECOMPUTE0 must come before 0B0 (index 2), which reads the activations "
       "it rebuilds"},
      {"0F0 0OFFLOAD0 0F1 0RECOMPUTE0 0RELOAD0 0B0 0B1", "recompute-before-reload",
       "rank 0 index 3: 0RECOMPUTE0 needs 0RELOAD0 earlier on rank 0 (it is at index 4): the "
       "input it re-runs from is on host until then"},
      {"0F0 0RECOMPUTE0 0F1 0RECOMPUTE0 0B0 0B1", "duplicate-action",
       "0RECOMPUTE0 appears twice: rank 0 index 1 and rank 0 index 3 (each memory action at "
       "most once per stage and microbatch)"},
      {"0F0 0F1 0RECOMPUTE5 0B0 0B1", "microbatch-out-of-range",
       "rank 0 index 2: 0RECOMPUTE5 names microbatch 5, but the plan has 2 microbatches (0..1)"},
      {"0F0 0F1 1RECOMPUTE0 0B0 0B1", "wrong-rank",
       "rank 0 index 2: 1RECOMPUTE0 runs on rank 0, but stage 1 belongs to rank 1 (loop "
       "mapping)"},
  };
  for (const Case& c : cases) {
    INFO(c.rank0);
    const std::vector<Diagnostic> d = check_structure(two_ranks(c.rank0));
    REQUIRE(d.size() == 1);
    CHECK(d[0].code == c.code);
    CHECK(d[0].rank == 0);
    CHECK(d[0].message == c.message);
    // The verifier reports the same (it runs the structure checks first).
    CHECK(codes(verify(two_ranks(c.rank0)).diagnostics) == std::vector<std::string>{c.code});
  }
  // An OFFLOAD after the backward with its RELOAD: both named.
  CHECK(codes(check_structure(two_ranks("0F0 0F1 0B0 0OFFLOAD0 0RELOAD0 0B1"))) ==
        std::vector<std::string>{"offload-after-backward", "reload-after-backward"});
  // A forward-only plan keeps nothing for a backward.
  const std::vector<Diagnostic> fo =
      check_structure(custom(2, 1, {"0F0 0RECOMPUTE0", "1F0"}, /*forward_only=*/true));
  REQUIRE(fo.size() == 1);
  CHECK(fo[0].code == "memory-action-in-forward-only");
  CHECK(fo[0].message ==
        "rank 0 index 1: 0RECOMPUTE0 keeps activations for a backward, but the plan is "
        "forward-only (no backward keeps any)");
}

TEST_CASE("memory: the simulator refuses misplaced memory actions", "[memory][simulate]") {
  for (const char* rank0 :
       {"0OFFLOAD0 0F0 0F1 0RELOAD0 0B0 0B1", "0F0 0OFFLOAD0 0F1 0B0 0B1",
        "0F0 0F1 0RELOAD0 0B0 0B1", "0F0 0OFFLOAD0 0F1 0B0 0RELOAD0 0B1",
        "0F0 0F1 0B0 0RECOMPUTE0 0B1", "0F0 0OFFLOAD0 0F1 0RECOMPUTE0 0RELOAD0 0B0 0B1",
        "0F0 0RECOMPUTE0 0RECOMPUTE0 0F1 0B0 0B1"}) {
    INFO(rank0);
    const SimResult r = simulate(two_ranks(rank0));
    REQUIRE_FALSE(r.ok());
    CHECK(r.problems[0].code == "sim-bad-action");
    CHECK(r.problems[0].rank == 0);
  }
}

TEST_CASE("memory: offload frees device memory while the copy stream hides it",
          "[memory][simulate]") {
  // One rank, 3 microbatches, F = 1, B = 2, activation 1, copies take 1.
  SimOptions o;
  o.costs.host_bandwidth = 1.0;
  const SimResult kept = simulate(custom(1, 3, {"0F0 0F1 0F2 0B2 0B1 0B0"}), o);
  const SimResult off = simulate(custom(1, 3, {"0F0 0OFFLOAD0 0F1 0F2 0B2 0RELOAD0 0B1 0B0"}), o);
  REQUIRE(kept.ok());
  REQUIRE(off.ok());
  CHECK(kept.makespan == 9.0);
  CHECK(off.makespan == 9.0);  // the copies overlap compute
  CHECK(kept.ranks[0].peak_memory == 3.0);
  CHECK(off.ranks[0].peak_memory == 2.0);  // mb 0 is on host while F2 runs
  CHECK(off.ranks[0].peak_host_memory == 1.0);
  CHECK(off.ranks[0].copy_busy == 2.0);
  CHECK(kept.ranks[0].peak_host_memory == 0.0);
  // OFFLOAD starts at its F's end; RELOAD when the compute before it (B2) ended.
  CHECK(off.times[0][1].start == 1.0);
  CHECK(off.times[0][1].end == 2.0);
  CHECK(off.times[0][5].start == 5.0);
  CHECK(off.times[0][5].end == 6.0);
  // Slow copies: the backward waits for its RELOAD.
  o.costs.host_bandwidth = 0.25;  // 4 per copy
  o.costs.host_latency = 0.5;
  const SimResult slow = simulate(custom(1, 3, {"0F0 0OFFLOAD0 0F1 0F2 0B2 0RELOAD0 0B1 0B0"}), o);
  REQUIRE(slow.ok());
  // OFFLOAD [1, 5.5], RELOAD [5.5, 10] (B2 ended at 5), B1 [5, 7], B0 [10, 12].
  CHECK(slow.times[0][5].start == 5.5);
  CHECK(slow.times[0][7].start == 10.0);
  CHECK(slow.makespan == 12.0);
  CHECK(slow.ranks[0].copy_busy == 9.0);
}

TEST_CASE("memory: 1F1B p=4 m=8 with full recompute peaks at its inputs plus one activation",
          "[memory][simulate]") {
  // Eight layers of activation 2 whose inputs are 0.5: stages of two layers
  // hold 4 per microbatch; a recomputing stage keeps 0.5.
  std::string csv = "name,F,B,W,activation,input\n";
  for (int l = 0; l < 8; ++l) csv += "l" + std::to_string(l) + ",1,2,1,2,0.5\n";
  const LayerProfile profile = parse_layer_profile(csv);
  Plan compute = plan_compute(Problem{"1f1b", 4, 8, 1});
  for (auto& list : compute.ranks) {
    std::vector<Action> out;
    for (const Action& a : list) {
      if (a.type == ActionType::B)
        out.push_back(make(ActionType::Recompute, a.stage, a.microbatch));
      out.push_back(a);
    }
    list = out;
  }
  SimOptions o;
  o.costs = stage_costs(profile, balanced_partition(profile, 4));
  const Plan lowered = lower(compute);
  for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial})
    CHECK(verify(lowered, {t}).ok());
  const SimResult r = simulate(lowered, o);
  REQUIRE(r.ok());
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const int in_flight = 4 - rank;  // 1F1B's warm-up on rank r
    CHECK(r.ranks[static_cast<std::size_t>(rank)].peak_memory == Approx(0.5 * in_flight + 4.0));
    CHECK(r.ranks[static_cast<std::size_t>(rank)].peak_host_memory == 0.0);
  }
  // Each recompute costs its stage's forward: 8 x 2 more per rank.
  const SimResult plain = simulate(lower(plan_compute(Problem{"1f1b", 4, 8, 1})), o);
  REQUIRE(plain.ok());
  CHECK(plain.ranks[0].peak_memory == 16.0);
  CHECK(r.ranks[0].busy == plain.ranks[0].busy + 16.0);
}

TEST_CASE("memory: render draws RECOMPUTE in the rank's row and copies in their own lane",
          "[memory][render]") {
  const Plan p = custom(1, 3, {"0F0 0OFFLOAD0 0F1 0F2 0B2 0RELOAD0 0RECOMPUTE1 0B1 0B0"});
  SimOptions o;
  o.costs.host_bandwidth = 1.0;
  const SimResult r = simulate(p, o);
  REQUIRE(r.ok());
  std::ostringstream svg, chrome, text;
  write_svg(p, r, SvgOptions{}, svg);
  write_chrome_trace(p, r, chrome);
  TextTimelineOptions to;
  to.columns_per_unit = 2;
  write_text_timeline(p, r, to, text);
  // SVG: a "copy" lane with the two copies, the recompute in the rank's row.
  CHECK(svg.str().find(">copy</text>") != std::string::npos);
  CHECK(svg.str().find("<title>0OFFLOAD0 1..2</title>") != std::string::npos);
  CHECK(svg.str().find("<title>0RELOAD0 5..6</title>") != std::string::npos);
  CHECK(svg.str().find("<title>0RECOMPUTE1 5..6</title>") != std::string::npos);
  CHECK(svg.str().find("offload to host") != std::string::npos);
  CHECK(svg.str().find("R recompute") != std::string::npos);
  // Chrome trace: a track per rank's copy stream.
  CHECK(chrome.str().find("\"name\":\"rank 0 copy\"") != std::string::npos);
  CHECK(chrome.str().find("{\"name\":\"0OFFLOAD0\",\"cat\":\"OFFLOAD\",\"ph\":\"X\",\"pid\":0,"
                          "\"tid\":1,") != std::string::npos);
  // Text: the copy stream under the rank.
  CHECK(text.str() ==
        "  time |0         5         10\n"
        "rank 0 |F0F1F2B2  R1B1  B0  |\n"
        "  copy |  O0      L0        |\n"
        "scale: 1 column = 0.5 time units; F forward, B backward, I input grad, W weight grad, "
        "F3/B1 overlapped, '.' idle; R recompute, O offload, L reload (copy stream)\n"
        "makespan 10, bubble 0.00%\n");
}

TEST_CASE("memory: torch's dialect writers refuse memory actions", "[memory][interop]") {
  const Plan p = two_ranks("0F0 0F1 0RECOMPUTE0 0B0 0B1");
  CHECK(torch_dialect_refusal(p) ==
        "torch's CSV dialect has no memory actions, and the plan holds 0RECOMPUTE0 (rank 0 index "
        "2); write pipeplan's own format (json, csv) or plan without --recompute/--offload");
  CHECK(torch_dialect_refusal(two_ranks("0F0 0F1 0B0 0B1")).empty());
  CHECK(torchtitan_refusal(p) == torch_dialect_refusal(p));
}
