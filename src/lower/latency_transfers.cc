// Phase 1 of the latency-hiding lowering (latency.cc): the transfers.
#include "lower/latency_transfers.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/error.h"

namespace pipeplan::detail::hiding {
namespace {

class TransferCollector {
 public:
  TransferCollector(const Plan& plan, const ProducerIndex& producers, const Timing& timing,
                    const std::vector<std::vector<double>>& latest)
      : plan_(plan),
        producers_(producers),
        timing_(timing),
        latest_(latest),
        stages_(plan.meta.num_stages()),
        mbs_(plan.meta.num_microbatches) {}

  Transfers run(int max_prefetch) {
    index_producers();
    collect();
    cap_receives(max_prefetch);
    return std::move(t_);
  }

 private:
  int ranks() const { return static_cast<int>(plan_.ranks.size()); }
  bool in_range(int s, int mb) const { return s >= 0 && s < stages_ && mb >= 0 && mb < mbs_; }
  std::size_t at(int s, int mb) const { return static_cast<std::size_t>(s) * mbs_ + mb; }
  int rank_of(int s) const { return rank_of_[static_cast<std::size_t>(s)]; }

  void index_producers() {
    const std::size_t n = static_cast<std::size_t>(stages_) * static_cast<std::size_t>(mbs_);
    t_.tid_f.assign(n, -1);
    t_.tid_b.assign(n, -1);
    rank_of_.resize(static_cast<std::size_t>(stages_));
    for (int s = 0; s < stages_; ++s) rank_of_[static_cast<std::size_t>(s)] = plan_.meta.rank_of(s);
    memo_.assign(static_cast<std::size_t>(stages_) * 2, -1);
  }

  int direction(int src, int dst, int stage, bool grad) {
    int& memo = memo_[static_cast<std::size_t>(stage) * 2 + (grad ? 1 : 0)];
    if (memo >= 0 && t_.dirs[static_cast<std::size_t>(memo)].src == src &&
        t_.dirs[static_cast<std::size_t>(memo)].dst == dst)
      return memo;
    auto [it, inserted] =
        t_.dir_ids.emplace(std::make_pair(src, dst), static_cast<int>(t_.dirs.size()));
    if (inserted) t_.dirs.push_back(Dir{src, dst, {}});
    memo = it->second;
    return memo;
  }

  // One transfer out of rank r's action i, when the value crosses ranks.
  void add(int r, std::size_t i, bool grad, int s, int mb) {
    if (!in_range(s, mb)) return;
    const int to = grad ? s - 1 : s + 1;
    if (to < 0 || to >= stages_) return;
    const int dst = rank_of(to);
    if (dst == r) return;
    // The consumer of Forward(s) produces Forward(s+1); that of Grad(s)
    // produces Grad(s-1).
    const std::int32_t consumer = producers_.of(grad, to, mb);
    if (consumer < 0) return;  // structure checks report a missing consumer
    Xfer x;
    x.t = timing_.end[static_cast<std::size_t>(r)][i];
    x.deadline = latest_[static_cast<std::size_t>(dst)][static_cast<std::size_t>(consumer)];
    x.src = r;
    x.dst = dst;
    x.producer = static_cast<std::int32_t>(i);
    x.consumer = consumer;
    x.send_stage = s;
    x.mb = mb;
    x.grad = grad;
    const auto id = static_cast<std::uint32_t>(t_.xfers.size());
    t_.xfers.push_back(x);
    (grad ? t_.tid_b : t_.tid_f)[at(s, mb)] = static_cast<std::int32_t>(id);
    t_.dirs[static_cast<std::size_t>(direction(r, dst, s, grad))].ids.push_back(id);
  }

  // Every transfer, walking each sending rank's list: per direction the ids
  // come out in producer order, which is key order.
  void collect() {
    std::size_t n_actions = 0;  // a bound on the transfers, but for OVERLAP_F_B's second
    for (const auto& list : plan_.ranks) n_actions += list.size();
    t_.xfers.reserve(n_actions);
    for (int r = 0; r < ranks(); ++r) {
      const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        switch (a.type) {
          case ActionType::F: add(r, i, false, a.stage, a.microbatch); break;
          case ActionType::B:
          case ActionType::I: add(r, i, true, a.stage, a.microbatch); break;
          case ActionType::OverlapFB:  // same key: gradient first
            add(r, i, true, a.sub_stage, a.sub_microbatch);
            add(r, i, false, a.stage, a.microbatch);
            break;
          default: break;
        }
      }
    }
    t_.sends_of.assign(static_cast<std::size_t>(ranks()), {});
    t_.recvs_of.assign(static_cast<std::size_t>(ranks()), {});
    for (std::size_t d = 0; d < t_.dirs.size(); ++d) {
      t_.sends_of[static_cast<std::size_t>(t_.dirs[d].src)].push_back(static_cast<int>(d));
      t_.recvs_of[static_cast<std::size_t>(t_.dirs[d].dst)].push_back(static_cast<int>(d));
    }
  }

  // The prefetch cap: the j-th receive of a rank (in consumer order) may be
  // posted only after the consumer of its (j - cap)-th. Work and memory
  // follow the receives, whatever the cap (a cap above a rank's receive
  // count constrains nothing there).
  void cap_receives(int cap) {
    if (cap <= 0) return;
    std::vector<std::uint32_t> consumer_at;  // this rank's j-th receive: its consumer's index
    for (int r = 0; r < ranks(); ++r) {
      consumer_at.clear();
      const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        auto input = [&](bool grad, int from, int mb) {
          if (!in_range(from, mb) || rank_of(from) == r) return;
          const std::int32_t id = (grad ? t_.tid_b : t_.tid_f)[at(from, mb)];
          if (id < 0) return;
          const std::size_t j = consumer_at.size();
          const auto here = static_cast<std::uint32_t>(i);
          t_.xfers[static_cast<std::size_t>(id)].recv_lb =
              j < static_cast<std::size_t>(cap)
                  ? 0u
                  : std::min(consumer_at[j - static_cast<std::size_t>(cap)] + 1, here);
          consumer_at.push_back(here);
        };
        switch (a.type) {
          case ActionType::F: input(false, a.stage - 1, a.microbatch); break;
          case ActionType::B:
          case ActionType::I: input(true, a.stage + 1, a.microbatch); break;
          case ActionType::OverlapFB:
            input(false, a.stage - 1, a.microbatch);
            input(true, a.sub_stage + 1, a.sub_microbatch);
            break;
          default: break;
        }
      }
    }
  }

  const Plan& plan_;
  const ProducerIndex& producers_;
  const Timing& timing_;
  const std::vector<std::vector<double>>& latest_;  // latest starts (deadlines)
  int stages_, mbs_;
  std::vector<int> rank_of_;
  std::vector<int> memo_;
  Transfers t_;
};

}  // namespace

Transfers collect_transfers(const Plan& plan, const ProducerIndex& producers, const Timing& timing,
                            const std::vector<std::vector<double>>& latest, int max_prefetch) {
  return TransferCollector(plan, producers, timing, latest).run(max_prefetch);
}

}  // namespace pipeplan::detail::hiding
