// libFuzzer target: the strict JSON plan reader. Property: whatever it
// accepts is written back (write_json) and read again to the same plan.
#include <sstream>
#include <string_view>

#include "fuzz_util.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipeplan;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Plan plan;
  try {
    plan = parse_json_plan(text, "fuzz.json");
  } catch (const InputError&) {
    return 0;  // refused with a message: fine
  }
  std::ostringstream out;
  write_json(plan, out);
  Plan again;
  try {
    again = parse_json_plan(out.str(), "written.json");
  } catch (const InputError& e) {
    fuzz::fail(std::string("write_json output does not read back: ") + e.what());
  }
  fuzz::check(again == plan, "JSON -> JSON round trip changed the plan");
  return 0;
}
