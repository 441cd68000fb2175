// libFuzzer target: the measured-trace reader and the passes over a trace.
// Properties: whatever the reader accepts writes back (write_trace_json) to
// a document that reads again and is a fixed point of writing; the
// consistency check, the step timelines and calibration answer or refuse
// with an InputError, never otherwise; a consistent trace's every step is a
// timeline of the plan.
#include <sstream>
#include <string_view>

#include "fuzz_util.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/trace.h"

namespace {

using namespace pipeplan;

std::string written(const Trace& t) {
  std::ostringstream out;
  write_trace_json(t, out);
  return out.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Trace trace;
  try {
    trace = parse_trace_json(text, "fuzz.json");
  } catch (const InputError&) {
    return 0;  // refused with a message: fine
  }
  // Written times keep 6 decimals: the first writing may round, the second
  // must not change anything.
  Trace once;
  try {
    once = parse_trace_json(written(trace), "written.json");
  } catch (const InputError& e) {
    fuzz::fail(std::string("write_trace_json output does not read back: ") + e.what());
  }
  fuzz::check(once.plan == trace.plan, "the trace's plan changed through writing");
  fuzz::check(once.records.size() == trace.records.size(), "records lost through writing");
  fuzz::check(written(once) == written(parse_trace_json(written(once), "again.json")),
              "writing a written trace is not a fixed point");

  const std::vector<std::string> problems = check_trace(trace, 20);
  fuzz::check(problems.size() <= 20, "check_trace returned more problems than asked");
  if (!problems.empty()) return 0;
  const int steps = trace.num_steps();
  const std::vector<Timeline> all = trace_timelines(trace);
  fuzz::check(static_cast<int>(all.size()) == steps, "one timeline per step");
  for (const Timeline& t : all) {
    fuzz::check(t.times.size() == trace.plan.ranks.size(), "a timeline row per rank");
    for (std::size_t r = 0; r < t.times.size(); ++r)
      fuzz::check(t.times[r].size() == trace.plan.ranks[r].size(), "a time per action");
  }
  (void)step_timeline(trace, steps);
  try {
    (void)calibrate(trace);
  } catch (const InputError&) {
    // a trace without computes: named, fine
  }
  return 0;
}
