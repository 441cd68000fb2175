// libFuzzer target: verify and lower on whatever the readers accept (JSON or
// CSV, detected from content). Properties:
// - the verifier and the simulator agree, model by model, on whether a
//   structurally sound plan with comms runs to the end;
// - the models are ordered: serial ok => rendezvous ok => eager ok;
// - lower() of a sound compute-only order (both modes: latency-hiding and
//   seed) either refuses it as a cycle
//   (PlanRejected) or yields a plan with the same compute order that verify
//   proves under rendezvous and eager (and serial when serial_safe), and that
//   round-trips through JSON.
#include <sstream>
#include <string_view>

#include "fuzz_util.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

namespace {

using namespace pipeplan;

std::vector<std::vector<Action>> compute_order(const Plan& p) {
  std::vector<std::vector<Action>> out;
  for (const auto& list : p.ranks) {
    out.emplace_back();
    for (const Action& a : list)
      if (!is_comm(a.type)) out.back().push_back(a);
  }
  return out;
}

// Whether every rank progresses: under rendezvous verify also names a group
// member meeting a single SEND/RECV (group-meets-single, which NCCL never
// meets), a pairing the model itself completes and the simulator times.
bool progresses(const VerifyResult& v) {
  for (const Diagnostic& d : v.diagnostics)
    if (d.code != "group-meets-single") return false;
  return true;
}

void check_models(const Plan& plan) {
  bool ok[3] = {};
  const Transport models[3] = {Transport::Eager, Transport::Rendezvous, Transport::Serial};
  for (int k = 0; k < 3; ++k) {
    const VerifyResult v = verify(plan, {models[k]});
    ok[k] = progresses(v);
    SimOptions options;
    options.transport = models[k];
    const SimResult s = simulate(plan, options);
    fuzz::check(s.ok() == ok[k], std::string("verify and simulate disagree under ") +
                                      std::string(to_string(models[k])) + ": verify " +
                                      (v.ok() ? "ok" : format_diagnostics(v.diagnostics)) +
                                      ", simulate " + (s.ok() ? "ok" : s.problems.front().message));
  }
  fuzz::check(!ok[2] || ok[1], "serial ok but rendezvous not");
  fuzz::check(!ok[1] || ok[0], "rendezvous ok but eager not");
}

void check_lowering(const Plan& plan, LowerMode mode, bool serial_safe) {
  LowerOptions options;
  options.mode = mode;
  options.serial_safe = serial_safe;
  Plan lowered;
  try {
    lowered = lower(plan, options);
  } catch (const PlanRejected&) {
    return;  // a cyclic wait: refused, as documented
  }
  fuzz::check(compute_order(lowered) == plan.ranks, "lower changed the compute order");
  fuzz::check(verify(lowered, {Transport::Rendezvous}).ok(), "lowered plan hangs under rendezvous");
  fuzz::check(verify(lowered, {Transport::Eager}).ok(), "lowered plan hangs under eager");
  if (serial_safe)
    fuzz::check(verify(lowered, {Transport::Serial}).ok(), "serial_safe plan hangs under serial");
  std::ostringstream json;
  write_json(lowered, json);
  fuzz::check(parse_json_plan(json.str(), "lowered.json") == lowered,
              "lowered plan JSON round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Plan plan;
  try {
    plan = parse_plan(text, "fuzz");
  } catch (const InputError&) {
    return 0;
  }
  if (!plan.is_whole()) {
    fuzz::check(!verify(plan).ok(), "a partial plan verified");
    return 0;
  }
  if (!fuzz::small_shape(plan, size)) {
    // Verify still runs (its index follows the actions present) ...
    fuzz::check(!verify(plan).ok(), "a plan with fewer actions than its shape needs verified");
    return 0;  // ... the other passes' tables follow the shape: slow, skip
  }
  const std::vector<Diagnostic> structure = check_structure(plan);
  if (!structure.empty()) {
    fuzz::check(!verify(plan).ok(), "verify ok despite structural diagnostics");
    return 0;
  }
  if (plan.is_compute_only()) {
    for (LowerMode mode : {LowerMode::LatencyHiding, LowerMode::Seed}) {
      check_lowering(plan, mode, false);
      check_lowering(plan, mode, true);
    }
  } else {
    check_models(plan);
  }
  return 0;
}
