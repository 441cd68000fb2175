// Interop with torch.distributed.pipelining runtimes beyond the file format.
#include <map>
#include <set>

#include "pipeplan/io.h"

namespace pipeplan {

Plan add_reduce_grad(const Plan& plan) {
  Plan out = plan;
  const int m = plan.meta.num_microbatches;
  for (auto& list : out.ranks) {
    std::set<int> has;
    for (const Action& a : list)
      if (a.type == ActionType::ReduceGrad) has.insert(a.stage);
    // torch counts B and W per stage (an I alone does not finish a backward).
    std::map<int, int> count;
    std::vector<Action> next;
    next.reserve(list.size() + 4);
    auto count_one = [&](int stage, std::vector<int>& done) {
      if (++count[stage] == m && !has.count(stage)) done.push_back(stage);
    };
    // The sends right after the completing action go first (as in torch,
    // whose lowering runs after this pass): the peer should not wait for a
    // gradient reduction.
    std::vector<int> done;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      next.push_back(a);
      if (a.type == ActionType::B || a.type == ActionType::W) count_one(a.stage, done);
      if (a.type == ActionType::OverlapFB) count_one(a.sub_stage, done);
      if (i + 1 < list.size() && is_send(list[i + 1].type)) continue;
      for (int s : done) next.push_back(Action{ActionType::ReduceGrad, s, -1, -1, -1});
      done.clear();
    }
    list = std::move(next);
  }
  return out;
}

}  // namespace pipeplan
