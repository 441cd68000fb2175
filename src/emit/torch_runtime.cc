// The torch runtime table and the checks of a plan against one release.
// Every row was read from torch/distributed/pipelining/schedules.py of the
// release's wheel (torch-2.X.0 on PyPI); docs/interop.md has the table.
#include "pipeplan/torch_runtime.h"

#include <charconv>

#include "pipeplan/diagnostic.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/verify.h"

namespace pipeplan {
namespace {

constexpr std::string_view kGuardNone = "none: no schedule checks for torch.compile";
constexpr std::string_view kGuardInterleavedZb =
    "ScheduleInterleavedZeroBubble.__init__ refuses OptimizedModule stages";
constexpr std::string_view kGuardZb =
    "_check_torch_compile_compatibility in ScheduleInterleavedZeroBubble, "
    "ScheduleZBVZeroBubble and ScheduleDualPipeV";

// One row per release whose runtime differs from the one before in a column.
// clang-format off
const std::vector<TorchRuntimeVersion> kRows = {
    // since     OVERLAP  UNSHARD  REDUCE  WAIT_*  transport              compile guard
    {{2, 6},     false,   true,    false,  false,  Transport::Serial,     kGuardNone,
     "torch 2.6.0: _ComputationType has I, B (full backward), W, UNSHARD, RESHARD; "
     "_batch_p2p returns dist.batch_isend_irecv(p2p_ops)"},
    {{2, 7},     false,   true,    false,  false,  Transport::Serial,     kGuardInterleavedZb,
     "torch 2.7.0: ScheduleInterleavedZeroBubble checks isinstance(stage.submod, OptimizedModule)"},
    {{2, 9},     true,    true,    false,  false,  Transport::Serial,     kGuardInterleavedZb,
     "torch 2.9.0: _ComputationType.OVERLAP_F_B; _Action.from_str reads (..;..)OVERLAP_F_B"},
    {{2, 10},    true,    true,    true,   false,  Transport::Serial,     kGuardZb,
     "torch 2.10.0: _ComputationType.REDUCE_GRAD; _check_torch_compile_compatibility"},
    {{2, 12},    true,    true,    true,   false,  Transport::Rendezvous, kGuardZb,
     "torch 2.12.0: _batch_p2p posts an all-send or all-recv batch as plain isend/irecv"},
    {{2, 15},    true,    true,    true,   true,   Transport::Rendezvous, kGuardZb,
     "torch 2.15.0: WAIT_SEND_F, WAIT_SEND_B, WAIT_REDUCE_GRAD; _validate_send_waits"},
};
// clang-format on

// Which row column an action kind needs; kinds not listed every row reads.
struct KindNeed {
  ActionType type;
  bool TorchRuntimeVersion::*has;
};
constexpr KindNeed kKindNeeds[] = {
    {ActionType::OverlapFB, &TorchRuntimeVersion::overlap_f_b},
    {ActionType::Unshard, &TorchRuntimeVersion::unshard_reshard},
    {ActionType::Reshard, &TorchRuntimeVersion::unshard_reshard},
    {ActionType::ReduceGrad, &TorchRuntimeVersion::reduce_grad},
};

// The first release whose row has `has` (every kind listed has one).
TorchVersion first_with(bool TorchRuntimeVersion::*has) {
  for (const TorchRuntimeVersion& row : kRows)
    if (row.*has) return row.since;
  return kRows.back().since;
}

bool parse_int(std::string_view text, int& out) {
  if (text.empty() || text.size() > 4 || text[0] < '0' || text[0] > '9') return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string to_string(TorchVersion v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

const std::vector<TorchRuntimeVersion>& torch_runtime_versions() { return kRows; }

TorchVersion parse_torch_version(std::string_view text) {
  auto bad = [&]() {
    return InputError("torch version '" + limits::excerpt(std::string(text)) +
                      "' is not MAJOR.MINOR[.PATCH] (e.g. 2.11 or 2.15.0)");
  };
  std::string_view release = text.substr(0, text.find('+'));  // "+cu132", a local build tag
  const std::size_t dot = release.find('.');
  if (dot == std::string_view::npos) throw bad();
  std::string_view minor = release.substr(dot + 1);
  std::string_view patch;
  if (const std::size_t dot2 = minor.find('.'); dot2 != std::string_view::npos) {
    patch = minor.substr(dot2 + 1);
    minor = minor.substr(0, dot2);
    int p = 0;
    if (!parse_int(patch, p)) throw bad();
  }
  TorchVersion v;
  if (!parse_int(release.substr(0, dot), v.major) || !parse_int(minor, v.minor)) throw bad();
  if (v.major != 2)
    throw InputError("torch " + to_string(v) + ": pipeplan knows torch 2.x runtimes (" +
                     to_string(kRows.front().since) + " to " + to_string(kRows.back().since) + ")");
  if (v < kRows.front().since)
    throw InputError("torch " + to_string(v) +
                     " is older than the oldest runtime pipeplan writes for (" +
                     to_string(kRows.front().since) +
                     "): before it torch has no I (2.5 reads B as a backward whose kind is a "
                     "schedule setting; 2.4 has no _load_csv)");
  return v;
}

const TorchRuntimeVersion& torch_runtime(TorchVersion version) {
  const TorchRuntimeVersion* found = &kRows.front();
  for (const TorchRuntimeVersion& row : kRows)
    if (!(version < row.since)) found = &row;
  return *found;
}

std::string torch_version_refusal(const Plan& plan, TorchVersion version) {
  const TorchRuntimeVersion& row = torch_runtime(version);
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
      const Action& a = plan.ranks[r][i];
      for (const KindNeed& need : kKindNeeds)
        if (need.type == a.type && !(row.*need.has))
          return "torch " + to_string(version) + "'s runtime has no " +
                 std::string(to_string(a.type)) + ", and the plan holds " + to_string(a) +
                 " (rank " + std::to_string(plan.rank_ids[r]) + " index " + std::to_string(i) +
                 "); torch has " + std::string(to_string(a.type)) + " from " +
                 to_string(first_with(need.has)) + " on";
    }
  return {};
}

const Runtime& torch_release_runtime(TorchVersion version) {
  return runtime_named(torch_runtime(version).transport == Transport::Serial ? "torch-2.11"
                                                                             : "torch");
}

TorchTarget torch_target(std::string_view version, std::string_view runtime) {
  TorchTarget t;
  if (!version.empty()) t.version = parse_torch_version(version);
  if (runtime.empty()) {
    if (!version.empty()) t.runtimes = {torch_release_runtime(t.version)};
    else t.runtimes = {runtime_named("torch-2.11"), runtime_named("torch")};
    return t;
  }
  const Runtime& rt = runtime_named(runtime);
  if (rt.name != "torch-2.11" && rt.name != "torch")
    throw InputError("runtime '" + std::string(rt.name) +
                     "': a torch schedule CSV runs on torch's own runtime (torch-2.11 or torch)");
  if (version.empty()) {
    // The newest release the runtime covers.
    t.version = rt.name == "torch" ? kTorchDefaultVersion : TorchVersion{2, 11};
  } else if (torch_release_runtime(t.version).name != rt.name) {
    throw InputError("torch " + to_string(t.version) + " runs the '" +
                     std::string(torch_release_runtime(t.version).name) + "' runtime, not '" +
                     std::string(rt.name) + "': give one of --torch-version and --runtime");
  }
  t.runtimes = {rt};
  return t;
}

void require_torch_runs(const Plan& plan, const TorchTarget& target) {
  if (std::string why = torch_version_refusal(plan, target.version); !why.empty())
    throw InputError(why);
  if (plan.is_compute_only()) return;
  for (const Runtime& rt : target.runtimes) {
    VerifyResult res = verify(plan, verify_options(rt));
    if (res.ok()) continue;
    const bool one = target.runtimes.size() == 1;
    const std::string who =
        one ? "torch " + to_string(target.version) + "'s runtime ('" + std::string(rt.name) + "')"
            : "torch's runtime '" + std::string(rt.name) + "'";
    const std::string why = who + " posts P2P as the " + std::string(to_string(rt.model)) +
                            " transport model, under which this plan is not deadlock-free" +
                            (!one ? " (a CSV is proved under both torch runtimes unless "
                                    "--runtime or --torch-version names one)"
                                  : "") +
                            ":\n" + format_diagnostics(res.diagnostics);
    throw PlanRejected(why, std::move(res.diagnostics));
  }
}

void require_torch_runs(const Plan& plan, TorchVersion version) {
  require_torch_runs(plan, TorchTarget{version, {torch_release_runtime(version)}});
}

std::string torch_compile_guard_warning(const Plan& plan, TorchVersion version) {
  for (const auto& list : plan.ranks)
    for (const Action& a : list)
      if (a.type == ActionType::I || a.type == ActionType::W)
        return "the plan splits backward (I/W), which torch.compile'd stages do not support; "
               "torch " +
               to_string(version) + " does not check it for a schedule loaded with _load_csv (" +
               std::string(torch_runtime(version).compile_guard) +
               "): do not compile the stages (pytorch#143599, #161904)";
  return {};
}

}  // namespace pipeplan
