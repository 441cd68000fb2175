// libFuzzer target: the torch-style CSV reader. Properties: whatever it
// accepts is written back (write_csv) and read again, with the metadata a CSV
// lacks given as options, to the same plan; and through JSON to the same plan.
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
    plan = parse_csv_plan(text, "fuzz.csv");
  } catch (const InputError&) {
    return 0;
  }
  fuzz::check(plan.is_whole(), "a CSV plan holds every rank");
  std::ostringstream csv;
  write_csv(plan, csv);
  CsvReadOptions options;
  options.mapping = plan.meta.mapping;
  options.num_microbatches = plan.meta.num_microbatches;
  options.schedule = plan.meta.schedule;
  try {
    fuzz::check(parse_csv_plan(csv.str(), "written.csv", options) == plan,
                "CSV -> CSV round trip changed the plan");
    // Without options the inference must find the same metadata again.
    fuzz::check(parse_csv_plan(csv.str(), "written.csv") == plan,
                "CSV metadata inference is not stable");
  } catch (const InputError& e) {
    fuzz::fail(std::string("write_csv output does not read back: ") + e.what());
  }
  std::ostringstream json;
  write_json(plan, json);
  try {
    const Plan via_json = parse_json_plan(json.str(), "written.json");
    fuzz::check(via_json == plan, "CSV -> JSON round trip changed the plan");
    std::ostringstream back;
    write_csv(via_json, back);
    fuzz::check(back.str() == csv.str(), "CSV -> JSON -> CSV is not exact");
  } catch (const InputError& e) {
    fuzz::fail(std::string("JSON of a CSV plan does not read back: ") + e.what());
  }
  return 0;
}
