// libFuzzer target: the action grammar. Properties: a refusal has a reason,
// an offset inside the text and a bounded message with its control bytes
// escaped; an accepted action is within the limits, parse_action says the
// same as the located parser, and printing then parsing is a fixed point.
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "pipeplan/ir.h"
#include "pipeplan/limits.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ActionParse located = parse_action_located(text);
  const std::optional<Action> plain = parse_action(text);
  fuzz::check(plain.has_value() == located.action.has_value(),
              "parse_action and parse_action_located disagree on acceptance");
  if (!located.action) {
    fuzz::check(located.error_offset <= text.size(), "error offset past the end of the text");
    fuzz::check(!located.reason.empty(), "a refusal without a reason");
    const std::string message = describe_bad_action(text, located);
    fuzz::check_message(message, 600 + located.reason.size());
    return 0;
  }
  const Action& a = *located.action;
  fuzz::check(*plain == a, "parse_action and parse_action_located disagree");
  fuzz::check(a.stage >= 0 && a.stage < limits::kMaxStages, "stage beyond the limit accepted");
  fuzz::check(a.microbatch < limits::kMaxMicrobatches, "microbatch beyond the limit accepted");
  const std::string printed = to_string(a);
  const std::optional<Action> reread = parse_action(printed);
  fuzz::check(reread && *reread == a, "parse of to_string differs: " + printed);
  fuzz::check(to_string(*reread) == printed, "printing is not a fixed point: " + printed);
  return 0;
}
