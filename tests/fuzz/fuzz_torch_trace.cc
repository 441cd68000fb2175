// libFuzzer target: torch profiler traces in (issue 24's reader and import).
// Properties: parse_torch_trace and import_torch_traces answer or refuse
// with an InputError, never otherwise; every kept event has finite times;
// the import's report agrees with the trace (one rank, its steps); an
// imported trace passes check_trace or names its problems (at most as many
// as asked), and calibrates or is refused with an InputError.
#include <cmath>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/trace.h"

namespace {

using namespace pipeplan;

// The file name a torchtitan run gives rank 0, so a trace without
// distributedInfo still names its rank.
constexpr const char* kSource = "rank0_trace.json";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  TorchRankTrace rank;
  try {
    rank = parse_torch_trace(text, kSource);
  } catch (const InputError&) {
    return 0;  // refused with a message: fine
  }
  fuzz::check(rank.source == kSource, "the trace lost its source name");
  for (const TorchEvent& e : rank.events)
    fuzz::check(std::isfinite(e.ts) && std::isfinite(e.dur), "a kept event without finite times");
  Trace trace;
  TorchImportReport report;
  try {
    trace = import_torch_traces({rank}, {}, &report);
  } catch (const InputError&) {
    return 0;  // no actions, a rank it cannot tell, steps that disagree: named
  }
  fuzz::check(report.ranks == 1, "one file of one rank imports as one rank");
  fuzz::check(report.steps == trace.num_steps(), "the report's steps are the trace's");
  fuzz::check(report.device_timed <= report.actions, "more actions device-timed than seen");
  if (!fuzz::small_shape(trace.plan, size)) return 0;
  const std::vector<std::string> problems = check_trace(trace, 20);
  fuzz::check(problems.size() <= 20, "check_trace returned more problems than asked");
  if (!problems.empty()) return 0;
  try {
    (void)calibrate(trace);
  } catch (const InputError&) {
    // a trace whose steps cannot calibrate (e.g. one step only): named, fine
  }
  return 0;
}
