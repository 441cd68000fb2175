// The IR's text form: the one action parser (its grammar, its limits) and the
// printer it inverts.
#include <catch2/catch.hpp>

#include <string>

#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/ir.h"
#include "pipeplan/limits.h"

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
        "UNSHARD, RESHARD, REDUCE_GRAD)");
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
