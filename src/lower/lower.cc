// lower(): place SEND/RECV around a compute-only order.
//
// Every cross-rank boundary becomes one transfer. Each rank pair gets one
// transfer order (sigma), sorted by the consumer's start time in a unit-cost
// run; both ends post in that order, so the pair FIFO is complementary by
// construction. A receive sits right before its consumer; a send goes right
// after its producer, later only when sigma puts an earlier transfer of the
// same pair after that point on this rank. Because sigma follows consumer
// times, every transfer is posted on both ends by its consumer's start time,
// which makes the plan progress under rendezvous (and hence eager) transport.
#include "pipeplan/lower.h"

#include <algorithm>
#include <tuple>

#include "lower/timing.h"
#include "pipeplan/error.h"

namespace pipeplan {
namespace {

// Order inside one slot (the gap before a compute action): sends of the
// previous action, then receives of the next, then parity-deferred sends.
constexpr int kSubSend = 0, kSubRecv = 1, kSubDeferred = 2;

struct Transfer {
  bool grad = false;  // SEND_B/RECV_B (else SEND_F/RECV_F)
  int send_stage = 0, mb = 0;
  int src = 0, dst = 0;        // ranks
  int producer = 0;            // index on src
  int consumer = 0;            // index on dst
  double tc = 0.0;             // consumer start time
  // sigma key: consumer time, gradients first on ties, then payload.
  auto key() const { return std::make_tuple(tc, grad ? 0 : 1, send_stage, mb); }
};

// One op placed on a rank: before compute `slot`, ordered by (sub, key).
struct Placed {
  int slot = 0, sub = 0;
  std::size_t transfer = 0;
  Action action;
};

struct RankProducers {
  // index of F and of B/I per (stage, mb) on its rank; -1 when absent.
  int stages = 0, mbs = 0;
  std::vector<int> f_idx, bi_idx;
  RankProducers(int s, int m)
      : stages(s), mbs(m), f_idx(static_cast<std::size_t>(s) * m, -1),
        bi_idx(static_cast<std::size_t>(s) * m, -1) {}
  std::size_t at(int s, int mb) const { return static_cast<std::size_t>(s) * mbs + mb; }
  bool in_range(int s, int mb) const { return s >= 0 && s < stages && mb >= 0 && mb < mbs; }
};

}  // namespace

Plan lower(const Plan& plan, const LowerOptions& options) {
  if (!plan.is_whole())
    throw InputError("lower: the plan must hold every rank 0.." +
                     std::to_string(plan.meta.pp_degree - 1));
  if (!plan.is_compute_only())
    throw InputError("lower: the plan already has SEND/RECV actions");
  const PlanMeta& meta = plan.meta;
  const int n_ranks = meta.pp_degree;
  const int n_stages = meta.num_stages();

  detail::ComputeCosts costs{options.cost_f, options.cost_b, options.cost_i, options.cost_w};
  detail::Timing timing = detail::time_compute(plan, costs);
  if (!timing.complete)
    throw InputError("lower: the compute order cannot complete (cyclic wait across ranks): " +
                     timing.stuck);

  RankProducers prod(n_stages, meta.num_microbatches);
  for (int r = 0; r < n_ranks; ++r) {
    const auto& list = plan.ranks[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[static_cast<std::size_t>(i)];
      auto set = [&](std::vector<int>& v, int s, int mb) {
        if (prod.in_range(s, mb)) v[prod.at(s, mb)] = i;
      };
      if (a.type == ActionType::F) set(prod.f_idx, a.stage, a.microbatch);
      if (a.type == ActionType::B || a.type == ActionType::I)
        set(prod.bi_idx, a.stage, a.microbatch);
      if (a.type == ActionType::OverlapFB) {
        set(prod.f_idx, a.stage, a.microbatch);
        set(prod.bi_idx, a.sub_stage, a.sub_microbatch);
      }
    }
  }

  // Collect transfers from each consumer, in consumer order per rank.
  std::vector<Transfer> transfers;
  auto add = [&](bool grad, int from_stage, int mb, int dst, int consumer) {
    int src = meta.rank_of(from_stage);
    if (src == dst || !prod.in_range(from_stage, mb)) return;
    int p = grad ? prod.bi_idx[prod.at(from_stage, mb)] : prod.f_idx[prod.at(from_stage, mb)];
    if (p < 0) return;  // structure checks report the missing producer
    Transfer t;
    t.grad = grad;
    t.send_stage = from_stage;
    t.mb = mb;
    t.src = src;
    t.dst = dst;
    t.producer = p;
    t.consumer = consumer;
    t.tc = timing.start[static_cast<std::size_t>(dst)][static_cast<std::size_t>(consumer)];
    transfers.push_back(t);
  };
  for (int r = 0; r < n_ranks; ++r) {
    const auto& list = plan.ranks[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const Action& a = list[static_cast<std::size_t>(i)];
      auto fwd = [&](int s, int mb) {
        if (s > 0) add(false, s - 1, mb, r, i);
      };
      auto bwd = [&](int s, int mb) {
        if (s + 1 < n_stages) add(true, s + 1, mb, r, i);
      };
      if (a.type == ActionType::F) fwd(a.stage, a.microbatch);
      if (a.type == ActionType::B || a.type == ActionType::I) bwd(a.stage, a.microbatch);
      if (a.type == ActionType::OverlapFB) {
        fwd(a.stage, a.microbatch);
        bwd(a.sub_stage, a.sub_microbatch);
      }
    }
  }

  // sigma: all transfers sorted by key, then walked pair by pair.
  std::vector<std::size_t> order(transfers.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return transfers[a].key() < transfers[b].key();
  });

  // Initial positions: send and receive ops of each transfer.
  std::vector<Placed> send_op(transfers.size()), recv_op(transfers.size());
  for (std::size_t k = 0; k < transfers.size(); ++k) {
    const Transfer& t = transfers[k];
    const auto src_len = static_cast<int>(plan.ranks[static_cast<std::size_t>(t.src)].size());
    Placed s;
    s.slot = t.producer + 1;
    s.sub = kSubSend;
    if (options.send_placement == SendPlacement::ParityStaggered && !t.grad && t.src % 2 == 1 &&
        s.slot < src_len)
      s.sub = kSubDeferred;
    s.transfer = k;
    s.action = t.grad ? make(ActionType::SendB, t.send_stage, t.mb)
                      : make(ActionType::SendF, t.send_stage, t.mb);
    send_op[k] = s;
    Placed rv;
    rv.slot = t.consumer;
    rv.sub = kSubRecv;
    rv.transfer = k;
    rv.action = t.grad ? make(ActionType::RecvB, t.send_stage - 1, t.mb)
                       : make(ActionType::RecvF, t.send_stage + 1, t.mb);
    recv_op[k] = rv;
  }

  // Walk sigma per (rank, peer) end: positions must not decrease. A send may
  // move later; a receive stays before its consumer, pulling same-slot
  // deferred sends in front of it instead.
  auto pos_less = [&](const Placed& a, const Placed& b) {
    if (a.slot != b.slot) return a.slot < b.slot;
    if (a.sub != b.sub) return a.sub < b.sub;
    return transfers[a.transfer].key() < transfers[b.transfer].key();
  };
  // last op posted on each end, keyed by rank * n_ranks + peer
  std::vector<Placed*> last(static_cast<std::size_t>(n_ranks) * n_ranks, nullptr);
  std::vector<std::vector<Placed*>> history(static_cast<std::size_t>(n_ranks) * n_ranks);
  for (std::size_t k : order) {
    const Transfer& t = transfers[k];
    // Per pair end, or per rank when every peer shares one stream (serial).
    auto end_key = [&](int rank, int peer) {
      return options.serial_safe ? static_cast<std::size_t>(rank) * n_ranks
                                 : static_cast<std::size_t>(rank) * n_ranks + peer;
    };
    // Sender's end.
    {
      auto& hist = history[end_key(t.src, t.dst)];
      Placed& s = send_op[k];
      if (!hist.empty() && pos_less(s, *hist.back())) {
        s.slot = hist.back()->slot;
        s.sub = hist.back()->sub;
      }
      hist.push_back(&s);
    }
    // Receiver's end.
    {
      auto& hist = history[end_key(t.dst, t.src)];
      Placed& rv = recv_op[k];
      for (auto it = hist.rbegin(); it != hist.rend() && pos_less(rv, **it); ++it) {
        Placed& prev = **it;
        if (is_recv(prev.action.type) || prev.slot != rv.slot)
          throw InternalError("lower: transfer order conflicts with receive " +
                              to_string(rv.action) + " on rank " + std::to_string(t.dst));
        prev.sub = kSubRecv;  // a deferred send moves in front of this receive
      }
      hist.push_back(&rv);
    }
  }

  // Emit every rank: per slot, ops by (sub, key), then the compute action.
  std::vector<std::vector<Placed*>> per_rank(static_cast<std::size_t>(n_ranks));
  for (std::size_t k = 0; k < transfers.size(); ++k) {
    per_rank[static_cast<std::size_t>(transfers[k].src)].push_back(&send_op[k]);
    per_rank[static_cast<std::size_t>(transfers[k].dst)].push_back(&recv_op[k]);
  }
  Plan out;
  out.meta = meta;
  out.rank_ids = plan.rank_ids;
  out.ranks.resize(static_cast<std::size_t>(n_ranks));
  for (int r = 0; r < n_ranks; ++r) {
    auto& ops = per_rank[static_cast<std::size_t>(r)];
    std::sort(ops.begin(), ops.end(), [&](const Placed* a, const Placed* b) { return pos_less(*a, *b); });
    const auto& list = plan.ranks[static_cast<std::size_t>(r)];
    auto& dst = out.ranks[static_cast<std::size_t>(r)];
    dst.reserve(list.size() + ops.size());
    std::size_t j = 0;
    for (int i = 0; i <= static_cast<int>(list.size()); ++i) {
      while (j < ops.size() && ops[j]->slot == i) dst.push_back(ops[j++]->action);
      if (i < static_cast<int>(list.size())) dst.push_back(list[static_cast<std::size_t>(i)]);
    }
    if (j != ops.size()) throw InternalError("lower: op placed past the end of rank " + std::to_string(r));
  }
  return out;
}

}  // namespace pipeplan
