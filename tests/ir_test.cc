// The IR's text form: the one action parser (its grammar, its limits) and the
// printer it inverts.
#include <catch2/catch.hpp>

#include <string>

#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/ir.h"
#include "pipeplan/limits.h"
#include "test_util.h"

using namespace pipeplan;

namespace {

std::string refusal(const std::string& text) {
  const ActionParse p = parse_action_located(text);
  return p.action ? "(accepted " + to_string(*p.action) + ")" : p.reason;
}

std::string csv_error(const std::string& text) {
  try {
    parse_csv_plan(text, "plan.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("ir: every action type prints and parses back", "[ir]") {
  for (const char* text :
       {"0F0", "1B2", "3I4", "5W6", "0SEND_F3", "1RECV_F3", "2SEND_B0", "3RECV_B1",
        "(0F7;7B3)OVERLAP_F_B", "0UNSHARD", "4RESHARD", "2REDUCE_GRAD"}) {
    INFO(text);
    const std::optional<Action> a = parse_action(text);
    REQUIRE(a);
    CHECK(to_string(*a) == text);
  }
  CHECK(*parse_action("1SEND_F3") == make(ActionType::SendF, 1, 3));
  CHECK(*parse_action("(0F7;7B3)OVERLAP_F_B") == make_overlap(0, 7, 7, 3));
  CHECK(parse_action("0UNSHARD")->microbatch == -1);
  // Spaces around a group's members only (torch writes none; hand-written
  // files sometimes do).
  CHECK(*parse_action("( 0F7 ; 7B3 )OVERLAP_F_B") == make_overlap(0, 7, 7, 3));
  CHECK_FALSE(parse_action(" 0F0"));
  CHECK_FALSE(parse_action("0F0 "));
}

TEST_CASE("ir: one action parser, one set of limits", "[ir]") {
  // A stage or microbatch number at the limits of limits.h is refused by the
  // parser itself, so parse_action and every reader agree.
  const std::string max_stage = std::to_string(limits::kMaxStages - 1);
  const std::string max_mb = std::to_string(limits::kMaxMicrobatches - 1);
  CHECK(parse_action(max_stage + "F" + max_mb));
  CHECK(refusal("4147483SEND_B7") == "stage number 4147483 is larger than the supported 1048575");
  CHECK_FALSE(parse_action("4147483SEND_B7"));
  CHECK(refusal(std::to_string(limits::kMaxStages) + "F0") ==
        "stage number 1048576 is larger than the supported 1048575");
  CHECK(refusal("0F" + std::to_string(limits::kMaxMicrobatches)) ==
        "microbatch number 1048576 is larger than the supported 1048575");
  CHECK(refusal("0F99999999999999999999") ==
        "microbatch number 99999999999999999999 is larger than the supported 1048575");
  CHECK(refusal("(0F0;4147483B0)OVERLAP_F_B") ==
        "stage number 4147483 is larger than the supported 1048575");
  CHECK_FALSE(parse_action("(0F0;4147483B0)OVERLAP_F_B"));
  // The readers word the same refusal, located.
  CHECK(csv_error("0F0,4147483SEND_B7\n") ==
        "plan.csv:1:5: unknown action '4147483SEND_B7': stage number 4147483 is larger than the "
        "supported 1048575");
}

TEST_CASE("ir: a refusal says where and why", "[ir]") {
  const ActionParse bad = parse_action_located("0F1junk");
  REQUIRE_FALSE(bad.action);
  CHECK(bad.error_offset == 3);
  CHECK(bad.reason == "unexpected 'j' after the microbatch");
  CHECK(describe_bad_action("0F1junk", bad) ==
        "unknown action '0F1junk': unexpected 'j' after the microbatch");
  CHECK(refusal("2BW0") ==
        "'BW' is not an action type (types: F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, "
        "UNSHARD, RESHARD, REDUCE_GRAD, OFFLOAD, RELOAD, RECOMPUTE)");
  CHECK(refusal("") == "empty action");
  CHECK(refusal("0UNSHARD3") == "UNSHARD takes no microbatch");
  CHECK(refusal("0OVERLAP_F_B1") ==
        "OVERLAP_F_B is written as a group: (<s>F<m>;<s>B<m>)OVERLAP_F_B");
  CHECK(refusal("(0F1;1B0)") == "expected 'OVERLAP_F_B' after ')', got ''");
  CHECK(refusal("(0F1;1B0;2B0)OVERLAP_F_B") ==
        "an OVERLAP_F_B group holds exactly two actions: (<s>F<m>;<s>B<m>)");
  // Long input is quoted as an excerpt, never whole.
  const std::string junk(5000, 'Q');
  CHECK(describe_bad_action("0" + junk, parse_action_located("0" + junk)).size() < 400);
}

TEST_CASE("ir: projections of a plan", "[ir]") {
  const std::vector<Action> program = pipeplan::test::actions(
      "0UNSHARD 1RECV_F0 1F0 1SEND_F0 (1F1;1B0)OVERLAP_F_B 1RECV_B0 1I0 1W0 1SEND_B0 1B1 "
      "0REDUCE_GRAD 0RESHARD");
  CHECK(forward_projection(program) ==
        pipeplan::test::actions("0UNSHARD 1RECV_F0 1F0 1SEND_F0 1F1 0RESHARD"));
  CHECK(has_backward(program));
  CHECK_FALSE(has_backward(forward_projection(program)));
  CHECK(has_backward(pipeplan::test::actions("1RECV_B0")));
  // A group's forward members stay a group; one left alone is a single op.
  CHECK(forward_projection(pipeplan::test::actions(
            "1F0 (1SEND_F0;1RECV_B0;1RECV_F1)BATCH_P2P 1B0 (1SEND_B0;1RECV_F2)BATCH_P2P 1F1 "
            "(2SEND_F1;2RECV_B1;1SEND_B1)BATCH_P2P")) ==
        pipeplan::test::actions("1F0 (1SEND_F0;1RECV_F1)BATCH_P2P 1RECV_F2 1F1 2SEND_F1"));

  Plan p;
  p.meta = PlanMeta{"custom", 2, 2, 2, StageMapping::Loop, false, {}};
  p.rank_ids = {0, 1};
  p.ranks = {pipeplan::test::actions("0F0 0SEND_F0 0RECV_B0 0B0"),
             pipeplan::test::actions("1RECV_F0 1F0 1B0 1SEND_B0")};
  const Plan fwd = forward_projection(p);
  CHECK(fwd.meta.forward_only);
  CHECK(fwd.rank_ids == p.rank_ids);
  CHECK(fwd.ranks[1] == pipeplan::test::actions("1RECV_F0 1F0"));
  CHECK(has_backward(p));
  CHECK_FALSE(has_backward(fwd));
  const Plan compute = compute_projection(p);
  CHECK(compute.ranks[0] == pipeplan::test::actions("0F0 0B0"));
  CHECK(compute.ranks[1] == pipeplan::test::actions("1F0 1B0"));
  CHECK(compute.meta == p.meta);
  CHECK(compute.is_compute_only());

  const Plan one = keep_rank(p, 1);
  CHECK(one.rank_ids == std::vector<int>{1});
  CHECK(one.ranks == std::vector<std::vector<Action>>{p.ranks[1]});
  CHECK(one.meta == p.meta);
  CHECK_THROWS_WITH(keep_rank(p, 2), "rank 2 is out of range for pp_degree 2 (valid: 0..1)");
  CHECK_THROWS_WITH(keep_rank(p, -1, "--rank"),
                    "--rank -1 is out of range for pp_degree 2 (valid: 0..1)");
  CHECK_THROWS_WITH(keep_rank(one, 0), "the plan holds no program for rank 0");
}
