#include "lower/transfers.h"

#include <algorithm>

namespace pipeplan::detail {

Transfers::Transfers(const Plan& compute, const Timing& timing)
    : plan_(compute),
      timing_(timing),
      stages_(compute.meta.num_stages()),
      mbs_(compute.meta.num_microbatches),
      ends_(compute.meta),
      producers_(compute) {
  rank_of_.resize(static_cast<std::size_t>(stages_));
  for (int s = 0; s < stages_; ++s) rank_of_[static_cast<std::size_t>(s)] = compute.meta.rank_of(s);
  memo_.assign(static_cast<std::size_t>(stages_) * 2, {-1, -1});

  // Two passes (count, then fill) so every direction is one exact range.
  std::vector<std::size_t> count;
  for_each_input([&](int r, std::size_t, int from_stage, int, bool grad, int src) {
    const auto d = static_cast<std::size_t>(direction(src, r, from_stage, grad));
    if (d >= count.size()) count.resize(d + 1, 0);
    ++count[d];
  });
  std::size_t total = 0;
  for (std::size_t d = 0; d < dirs_.size(); ++d) {
    dirs_[d].begin = dirs_[d].end = total;
    total += count[d];
  }
  entries_.resize(total);
  send_pos_.assign(total, 0);
  for_each_input([&](int r, std::size_t i, int from_stage, int mb, bool grad, int src) {
    Dir& d = dirs_[static_cast<std::size_t>(direction(src, r, from_stage, grad))];
    entries_[d.end++] = {static_cast<std::uint32_t>(i) << 1 | (grad ? 1u : 0u),
                         producers_.of(grad, from_stage, mb)};
  });
  for (const Dir& d : dirs_) sort_direction(d);

  sends_of_.resize(compute.ranks.size());
  recvs_of_.resize(compute.ranks.size());
  for (std::size_t d = 0; d < dirs_.size(); ++d) {
    Dir& x = dirs_[d];
    sends_of_[static_cast<std::size_t>(x.src)].push_back(static_cast<int>(d));
    recvs_of_[static_cast<std::size_t>(x.dst)].push_back(static_cast<int>(d));
    x.rev = dir_of(x.dst, x.src);
  }
}

template <typename F>
void Transfers::for_each_input(F&& f) const {
  for (std::size_t r = 0; r < plan_.ranks.size(); ++r) {
    const auto& list = plan_.ranks[r];
    const int rank = static_cast<int>(r);
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      // The one home of the rules (deps.h): every value read across a stage
      // boundary on the microbatch's route.
      deps::for_each_input(a, ends_, [&](const deps::Value& v, int reader) {
        const int from_stage = v.stage, mb = v.microbatch;
        if (from_stage == reader) return;  // kept on its own stage
        if (from_stage < 0 || from_stage >= stages_ || mb < 0 || mb >= mbs_) return;
        const int src = rank_of_[static_cast<std::size_t>(from_stage)];
        if (src == rank) return;
        const bool grad = v.kind == deps::Kind::Grad;
        if (producers_.of(grad, from_stage, mb) < 0) return;  // structure checks report it
        f(rank, i, from_stage, mb, grad, src);
      });
    }
  }
}

int Transfers::direction(int src, int dst, int from_stage, bool grad) {
  // A sending stage always feeds the same rank in a valid plan: remember it,
  // so the map is consulted once per stage rather than once per transfer.
  auto& memo = memo_[static_cast<std::size_t>(from_stage) * 2 + (grad ? 1 : 0)];
  if (memo.first == dst) return memo.second;
  auto [it, inserted] = dir_ids_.emplace(std::make_pair(src, dst), static_cast<int>(dirs_.size()));
  if (inserted) dirs_.push_back(Dir{src, dst, -1, 0, 0});
  memo = {dst, it->second};
  return it->second;
}

int Transfers::dir_of(int src, int dst) const {
  auto it = dir_ids_.find({src, dst});
  return it == dir_ids_.end() ? -1 : it->second;
}

TransferKey Transfers::key_of(const Dir& d, Entry entry) const {
  TransferKey k = payload_of(d, entry);
  k.tc = timing_.start[static_cast<std::size_t>(d.dst)][static_cast<std::size_t>(k.consumer)];
  return k;
}

TransferKey Transfers::payload_of(const Dir& d, Entry entry) const {
  TransferKey k;
  k.src = d.src;
  k.dst = d.dst;
  k.consumer = static_cast<int>(entry.consumer >> 1);
  k.grad = (entry.consumer & 1u) != 0;
  const Action& a =
      plan_.ranks[static_cast<std::size_t>(d.dst)][static_cast<std::size_t>(k.consumer)];
  if (k.grad) {
    const bool overlap = a.type == ActionType::OverlapFB;
    k.send_stage = (overlap ? a.sub_stage : a.stage) + 1;
    k.mb = overlap ? a.sub_microbatch : a.microbatch;
  } else {
    k.send_stage = a.stage - 1;
    k.mb = a.microbatch;
  }
  return k;
}

TransferKey Transfers::key(int d, std::size_t t) const {
  return key_of(dirs_[static_cast<std::size_t>(d)], entries_[t]);
}

TransferKey Transfers::payload(int d, std::size_t t) const {
  return payload_of(dirs_[static_cast<std::size_t>(d)], entries_[t]);
}

Action Transfers::send_action(int d, std::size_t t) const {
  const Entry e = entries_[t];
  const Action& p = plan_.ranks[static_cast<std::size_t>(dirs_[static_cast<std::size_t>(d)].src)]
                               [static_cast<std::size_t>(e.producer)];
  // The producer is F (or an overlap's forward) for an activation, B/I (or
  // an overlap's backward) for a gradient.
  if ((e.consumer & 1u) == 0) return make(ActionType::SendF, p.stage, p.microbatch);
  return p.type == ActionType::OverlapFB ? make(ActionType::SendB, p.sub_stage, p.sub_microbatch)
                                         : make(ActionType::SendB, p.stage, p.microbatch);
}

// Consumer order is sigma order up to ties in the consumer's start time (an
// OVERLAP_F_B takes two inputs at once); sort those runs. A full sort is the
// fallback for cost models where start times could decrease.
void Transfers::sort_direction(const Dir& d) {
  auto less = [&](Entry x, Entry y) { return key_of(d, x) < key_of(d, y); };
  auto sorted = [&] {
    if (d.begin == d.end) return true;
    TransferKey prev = key_of(d, entries_[d.begin]);
    for (std::size_t t = d.begin + 1; t < d.end; ++t) {
      const TransferKey k = key_of(d, entries_[t]);
      if (k < prev) return false;
      prev = k;
    }
    return true;
  };
  if (sorted()) return;
  const auto first = entries_.begin();
  for (std::size_t t = d.begin; t < d.end;) {
    std::size_t u = t + 1;
    const double tc = key_of(d, entries_[t]).tc;
    while (u < d.end && key_of(d, entries_[u]).tc == tc) ++u;
    if (u - t > 1)
      std::sort(first + static_cast<std::ptrdiff_t>(t), first + static_cast<std::ptrdiff_t>(u),
                less);
    t = u;
  }
  if (!sorted())
    std::sort(first + static_cast<std::ptrdiff_t>(d.begin),
              first + static_cast<std::ptrdiff_t>(d.end), less);
}

}  // namespace pipeplan::detail
