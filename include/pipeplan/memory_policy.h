// Memory policies for a compute order (docs/memory.md): which stages
// recompute their activations before each backward, which offload them to
// host after each forward and reload them before the backward. The front
// ends (plan, lower, simulate/render -s, compare) apply one to a library
// schedule's order or a plan read from a file, before lowering it.
//
// @code
//   MemoryPolicy policy;
//   policy.recompute = parse_stage_set("all", "--recompute");
//   const Planner planner(Problem{"1f1b", 4, 8});
//   Plan p = lower(apply_memory_policy(planner.compute(), policy),
//                  planner.lowering());  // 1F1B with full recompute
// @endcode
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/ir.h"

namespace pipeplan {

/// A set of stages: every stage, or the listed ones.
struct StageSet {
  bool all = false;
  std::vector<int> stages;  ///< sorted, no repeats (when not `all`)

  bool empty() const { return !all && stages.empty(); }
  bool contains(int stage) const;
  friend bool operator==(const StageSet& a, const StageSet& b) {
    return a.all == b.all && a.stages == b.stages;
  }
};

/// Reads "all" or a comma-separated list of stages and ranges ("0,2,4-7").
/// Throws InputError naming `what` (e.g. "--recompute") and the bad part.
StageSet parse_stage_set(std::string_view text, const std::string& what);
/// "all", or the stages as parse_stage_set reads them ("0,2,4-7").
std::string to_string(const StageSet& set);

/// What apply_memory_policy() inserts into a compute order.
struct MemoryPolicy {
  /// A RECOMPUTE right before each backward (B, I, or an OVERLAP_F_B's) of
  /// these stages.
  StageSet recompute;
  /// An OFFLOAD right after each forward of these stages and a RELOAD
  /// `offload_lead` computes before its backward (after the OFFLOAD; before
  /// the RECOMPUTE when the stage recomputes too).
  StageSet offload;
  int offload_lead = 1;

  bool empty() const { return recompute.empty() && offload.empty(); }
};

/// The policy as users give it (the CLI's --recompute, --offload and
/// --offload-lead; the Python keywords recompute=, offload=, offload_lead=):
/// stage sets as text ("" = none) and the lead (unset: 1). Throws InputError
/// for a bad stage list or a lead without an offload, naming the option
/// with `name_prefix` in front ("--": "--offload-lead"; "": the keyword,
/// "offload_lead").
MemoryPolicy memory_policy_from(std::string_view recompute, std::string_view offload,
                                std::optional<int> offload_lead,
                                const std::string& name_prefix = "");

/// Throws InputError when a non-empty `policy` meets a forward-only run (no
/// backward keeps activations to recompute or offload): apply_memory_policy's
/// rule, shared with front ends that run a training plan forward only.
void require_backward_for(const MemoryPolicy& policy, bool forward_only);

/// `plan` with the policy's memory actions inserted on every rank. Throws
/// InputError for a stage the plan does not have, a negative lead, a
/// forward-only plan (no backward keeps anything), or a plan that already
/// holds memory actions. An empty policy returns the plan unchanged.
Plan apply_memory_policy(Plan plan, const MemoryPolicy& policy);

}  // namespace pipeplan
