// Test helper: memory actions inserted into a lowered plan by hand, on
// every stage and microbatch (OFFLOAD right after the F, RELOAD and
// RECOMPUTE right before the backward), for exactness tests.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/ir.h"

namespace pipeplan::test {

// `mode`: "recompute", "offload" or "both".
inline Plan with_memory_actions(Plan plan, const std::string& mode) {
  const bool rec = mode == "recompute" || mode == "both";
  const bool off = mode == "offload" || mode == "both";
  for (auto& list : plan.ranks) {
    std::vector<Action> out;
    for (const Action& a : list) {
      const bool bwd = a.type == ActionType::B || a.type == ActionType::I;
      if (bwd && off) out.push_back(make(ActionType::Reload, a.stage, a.microbatch));
      if (bwd && rec) out.push_back(make(ActionType::Recompute, a.stage, a.microbatch));
      out.push_back(a);
      if (a.type == ActionType::F && off)
        out.push_back(make(ActionType::Offload, a.stage, a.microbatch));
    }
    list = std::move(out);
  }
  return plan;
}

}  // namespace pipeplan::test
