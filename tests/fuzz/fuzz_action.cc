// libFuzzer target: the action grammar. Properties: the located parser (the
// readers') and ir.h's parse_action agree on everything the located parser
// accepts once printed, and printing is a fixed point.
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "io/action_text.h"
#include "pipeplan/ir.h"
#include "pipeplan/limits.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const io::ActionParse located = io::parse_action_located(text);
  const std::optional<Action> plain = parse_action(text);
  if (!located.action) {
    fuzz::check(located.error_offset <= text.size(), "error offset past the end of the text");
    fuzz::check(!located.reason.empty(), "a refusal without a reason");
    const std::string message = io::describe_bad_action(text, located);
    fuzz::check(message.size() < 600 + located.reason.size(), "an error message quotes too much");
    return 0;
  }
  const Action& a = *located.action;
  fuzz::check(a.stage >= 0 && a.stage < limits::kMaxStages, "stage beyond the limit accepted");
  fuzz::check(a.microbatch < limits::kMaxMicrobatches, "microbatch beyond the limit accepted");
  const std::string printed = to_string(a);
  const io::ActionParse reread = io::parse_action_located(printed);
  fuzz::check(reread.action && *reread.action == a,
              "located parse of to_string differs: " + printed);
  const std::optional<Action> strict = parse_action(printed);
  fuzz::check(strict && *strict == a, "parse_action of to_string differs: " + printed);
  // The strict grammar has no spaces: when it accepts the text, both agree.
  if (plain) fuzz::check(*plain == a, "parse_action and the located parser disagree");
  return 0;
}
