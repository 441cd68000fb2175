// Projections of plans: the forward-only view, the compute order, whether a
// program owes a backward. One home, so the planner, the executor and the
// front ends take the same view.
#include <algorithm>

#include "pipeplan/error.h"
#include "pipeplan/ir.h"

namespace pipeplan {

std::vector<Action> forward_projection(const std::vector<Action>& program) {
  std::vector<Action> out;
  out.reserve(program.size() / 2 + 1);
  // The forward members of a BATCH_P2P group stay one group (or a single
  // SEND/RECV when one is left): the last one kept closes it.
  long member_kept = -1;  // index in `out` of the group's last kept member
  for (std::size_t i = 0; i < program.size(); ++i) {
    const Action& a = program[i];
    const bool member = a.batch_next || (i > 0 && program[i - 1].batch_next);
    switch (a.type) {
      case ActionType::F:
      case ActionType::SendF:
      case ActionType::RecvF:
      case ActionType::Unshard:
      case ActionType::Reshard:
        out.push_back(a);
        out.back().batch_next = false;
        if (member) {
          if (member_kept >= 0) out[static_cast<std::size_t>(member_kept)].batch_next = true;
          member_kept = static_cast<long>(out.size()) - 1;
        }
        break;
      case ActionType::OverlapFB: out.push_back(make(ActionType::F, a.stage, a.microbatch)); break;
      default: break;
    }
    if (member && !a.batch_next) member_kept = -1;  // the group ended
  }
  return out;
}

Plan forward_projection(const Plan& plan) {
  Plan out;
  out.meta = plan.meta;
  out.meta.forward_only = true;
  out.rank_ids = plan.rank_ids;
  out.ranks.reserve(plan.ranks.size());
  for (const auto& program : plan.ranks) out.ranks.push_back(forward_projection(program));
  return out;
}

Plan compute_projection(Plan plan) {
  for (auto& program : plan.ranks)
    program.erase(std::remove_if(program.begin(), program.end(),
                                 [](const Action& a) { return is_comm(a.type); }),
                  program.end());
  return plan;
}

bool has_backward(const std::vector<Action>& program) {
  for (const Action& a : program) switch (a.type) {
      case ActionType::B:
      case ActionType::I:
      case ActionType::W:
      case ActionType::SendB:
      case ActionType::RecvB:
      case ActionType::OverlapFB: return true;
      default: break;
    }
  return false;
}

bool has_backward(const Plan& plan) {
  return std::any_of(plan.ranks.begin(), plan.ranks.end(),
                     [](const std::vector<Action>& p) { return has_backward(p); });
}

Plan keep_rank(Plan whole, int rank, const std::string& rank_name) {
  const int pp = whole.meta.pp_degree;
  if (rank < 0 || rank >= pp)
    throw InputError(rank_name + " " + std::to_string(rank) + " is out of range for pp_degree " +
                     std::to_string(pp) + " (valid: 0.." + std::to_string(pp - 1) + ")");
  const auto at = std::find(whole.rank_ids.begin(), whole.rank_ids.end(), rank);
  if (at == whole.rank_ids.end() || whole.ranks.size() != whole.rank_ids.size())
    throw InputError("the plan holds no program for " + rank_name + " " + std::to_string(rank));
  Plan one;
  one.meta = std::move(whole.meta);
  one.rank_ids = {rank};
  one.ranks.push_back(
      std::move(whole.ranks[static_cast<std::size_t>(at - whole.rank_ids.begin())]));
  return one;
}

}  // namespace pipeplan
