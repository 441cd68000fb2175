// libFuzzer target: the stage-costs reader (CSV rows or JSON, calibrated or
// not) and the cost options built from it. Properties: reading is
// deterministic; whatever it accepts holds finite, non-negative costs; the
// simulator either refuses those costs with an InputError or runs a small
// plan to a finite makespan (never inf or nan).
#include <cmath>
#include <map>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "pipeplan/cost_options.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"

namespace {

using namespace pipeplan;

bool same(const std::map<int, StageScale>& a, const std::map<int, StageScale>& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || i->second.f != j->second.f || i->second.b != j->second.b ||
        i->second.i != j->second.i || i->second.w != j->second.w)
      return false;
  return true;
}

bool finite_scale(const StageScale& s) {
  for (double x : {s.f, s.b, s.i, s.w})
    if (!std::isfinite(x) || x < 0) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  StageCosts file;
  try {
    file = read_stage_costs(text, "fuzz.costs");
  } catch (const InputError&) {
    return 0;
  }
  const StageCosts again = read_stage_costs(text, "fuzz.costs");
  fuzz::check(same(again.stages, file.stages) && again.absolute == file.absolute,
              "reading the same stage costs twice differs");
  for (const auto& [stage, scale] : file.stages) {
    fuzz::check(stage >= 0, "a negative stage number was accepted");
    fuzz::check(finite_scale(scale), "a non-finite or negative stage cost was accepted");
  }
  for (double x : {file.comm_latency.value_or(0), file.comm_bandwidth.value_or(0),
                   file.transfer_bytes.value_or(0)})
    fuzz::check(std::isfinite(x) && x >= 0, "a non-finite or negative comm field was accepted");

  CostOptions given;
  given.stage_costs = text;
  given.stage_costs_source = "fuzz.costs";
  SimOptions options;
  try {
    options = make_sim_options(given);
    const SimResult r = simulate(plan(Problem{"1f1b", 2, 2}), options);
    fuzz::check(!r.ok() || (std::isfinite(r.makespan) && std::isfinite(r.bubble_fraction)),
                "a simulation with accepted costs is ok with a non-finite result");
  } catch (const InputError&) {
    // costs beyond the limits, or stages the plan lacks: refused by name
  }
  return 0;
}
