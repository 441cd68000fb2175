#include "bench/torch_lowering.h"

#include <stdexcept>
#include <vector>

namespace pipeplan::bench {

Plan torch_lowering(const Plan& compute) {
  const PlanMeta& meta = compute.meta;
  const int n_stages = meta.num_stages(), n_mb = meta.num_microbatches;
  const auto n_keys = static_cast<std::size_t>(n_stages) * static_cast<std::size_t>(n_mb);
  auto at = [&](int s, int mb) { return static_cast<std::size_t>(s) * n_mb + mb; };
  auto in_range = [&](int s, int mb) { return s >= 0 && s < n_stages && mb >= 0 && mb < n_mb; };
  // Per (stage, mb), on the rank that owns the stage: what its list holds so far.
  std::vector<char> f_done(n_keys, 0), bi_done(n_keys, 0), recv_f(n_keys, 0), recv_b(n_keys, 0);

  Plan out;
  out.meta = meta;
  out.rank_ids = compute.rank_ids;
  out.ranks.resize(compute.ranks.size());
  std::vector<std::size_t> next(compute.ranks.size(), 0);

  auto f_ready = [&](int s, int mb) {
    // A microbatch enters at its route's first stage (PlanMeta::routes).
    if (!in_range(s, mb) || s == meta.route_of(mb).first) return true;
    return recv_f[at(s, mb)] || (meta.rank_of(s - 1) == meta.rank_of(s) && f_done[at(s - 1, mb)]);
  };
  auto b_ready = [&](int s, int mb) {
    if (!in_range(s, mb) || s == meta.route_of(mb).last) return true;
    return recv_b[at(s, mb)] || (meta.rank_of(s + 1) == meta.rank_of(s) && bi_done[at(s + 1, mb)]);
  };
  auto ready = [&](const Action& a) {
    switch (a.type) {
      case ActionType::F: return f_ready(a.stage, a.microbatch);
      case ActionType::B:
      case ActionType::I: return b_ready(a.stage, a.microbatch);
      case ActionType::OverlapFB:
        return f_ready(a.stage, a.microbatch) && b_ready(a.sub_stage, a.sub_microbatch);
      default: return true;
    }
  };
  // Records a produced value and ships it when its consumer is elsewhere.
  auto forward_out = [&](std::vector<Action>& list, int s, int mb) {
    if (!in_range(s, mb)) return;
    f_done[at(s, mb)] = 1;
    if (s >= meta.route_of(mb).last || meta.rank_of(s + 1) == meta.rank_of(s)) return;
    list.push_back(make(ActionType::SendF, s, mb));
    out.ranks[static_cast<std::size_t>(meta.rank_of(s + 1))].push_back(
        make(ActionType::RecvF, s + 1, mb));
    recv_f[at(s + 1, mb)] = 1;
  };
  auto backward_out = [&](std::vector<Action>& list, int s, int mb) {
    if (!in_range(s, mb)) return;
    bi_done[at(s, mb)] = 1;
    if (s <= meta.route_of(mb).first || meta.rank_of(s - 1) == meta.rank_of(s)) return;
    list.push_back(make(ActionType::SendB, s, mb));
    out.ranks[static_cast<std::size_t>(meta.rank_of(s - 1))].push_back(
        make(ActionType::RecvB, s - 1, mb));
    recv_b[at(s - 1, mb)] = 1;
  };

  bool left = true;
  while (left) {
    left = false;
    bool progress = false;
    for (std::size_t r = 0; r < compute.ranks.size(); ++r) {
      const auto& src = compute.ranks[r];
      if (next[r] >= src.size()) continue;
      left = true;
      const Action& a = src[next[r]];
      if (!ready(a)) continue;
      auto& list = out.ranks[r];
      list.push_back(a);
      switch (a.type) {
        case ActionType::F: forward_out(list, a.stage, a.microbatch); break;
        case ActionType::B:
        case ActionType::I: backward_out(list, a.stage, a.microbatch); break;
        case ActionType::OverlapFB:
          forward_out(list, a.stage, a.microbatch);
          backward_out(list, a.sub_stage, a.sub_microbatch);
          break;
        default: break;
      }
      ++next[r];
      progress = true;
    }
    if (left && !progress) throw std::runtime_error("torch lowering: no rank can move");
  }
  return out;
}

}  // namespace pipeplan::bench
