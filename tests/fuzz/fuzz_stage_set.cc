// libFuzzer target: the stage sets of --recompute/--offload and Python's
// recompute=/offload= (parse_stage_set). Properties: a refusal is an
// InputError with a bounded message whose control bytes are escaped; an
// accepted set is sorted, without repeats and within the stage limit, and
// printing it (to_string) then reading it again is a fixed point. The cost
// stays linear in the text however often a range repeats.
#include <algorithm>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/memory_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  StageSet set;
  try {
    set = parse_stage_set(text, "--recompute");
  } catch (const InputError& e) {
    // The whole set and the bad part are quoted (two excerpts), with words.
    fuzz::check_message(e.what(), 2 * fuzz::kMaxExcerpt + 200);
    return 0;
  }
  if (!set.all) {
    fuzz::check(std::adjacent_find(set.stages.begin(), set.stages.end(),
                                   [](int a, int b) { return a >= b; }) == set.stages.end(),
                "the stages are not sorted without repeats");
    fuzz::check(set.stages.empty() || (set.stages.front() >= 0 &&
                                       set.stages.back() < limits::kMaxStages),
                "a stage beyond the limit accepted");
  }
  const std::string printed = to_string(set);
  fuzz::check(parse_stage_set(printed, "--recompute") == set,
              "reading the printed set differs: " + printed.substr(0, 200));
  return 0;
}
