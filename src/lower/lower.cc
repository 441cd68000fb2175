// lower(): the entry point, and the seed lowering (LowerMode::Seed); the
// latency-hiding one is in latency.cc.
//
// Seed lowering: every cross-rank boundary becomes one transfer. Each rank pair gets one
// transfer order (sigma), sorted by the consumer's start time in a unit-cost
// run; both ends post in that order, so the pair FIFO is complementary by
// construction. A receive sits right before its consumer; a send goes right
// after its producer, later only when sigma puts an earlier transfer of the
// same pair after that point on this rank. Because sigma follows consumer
// times, every transfer is posted on both ends by its consumer's start time,
// which makes the plan progress under rendezvous (and hence eager) transport.
// With serial_safe the same rules run over one history per rank (all its
// peers together), which keeps each rank's transfers in sigma order as well.
//
// Cost: linear. A rank's start times never decrease, so each direction's
// transfers, collected in consumer order, are already in sigma order up to
// ties (an OVERLAP_F_B consuming two values at once); sigma of a pair is a
// merge of its sorted sequences, and each rank's program a merge of those.
// A transfer costs 8 bytes while lowering; no per-op allocation.
#include "pipeplan/lower.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "lower/batch.h"
#include "lower/latency.h"
#include "lower/transfers.h"
#include "model/cost_check.h"
#include "pipeplan/error.h"

namespace pipeplan {
namespace {

using detail::TransferKey;
using detail::Transfers;

// Order inside one slot (the gap before a compute action): sends of the
// previous action, then receives of the next, then parity-deferred sends.
constexpr std::uint32_t kSubSend = 0, kSubRecv = 1, kSubDeferred = 2;

// A position on a rank: before compute `slot`, then `sub`; ties between
// transfers break by their sigma key.
struct Pos {
  std::uint32_t slot = 0, sub = 0;
  bool operator<(const Pos& o) const { return slot != o.slot ? slot < o.slot : sub < o.sub; }
};
Pos unpack(std::uint32_t p) { return {p >> 2, p & 3u}; }
std::uint32_t pack(Pos p) { return p.slot << 2 | p.sub; }

// One sorted run of transfers: the sends of a direction or its receives.
struct Seq {
  int dir = 0;
  std::size_t next = 0, end = 0;
  bool send = false;
};

// Appends direction d's sends (or receives) as one sequence when non-empty.
void add_seq(std::vector<Seq>& seqs, const Transfers& tr, int d, bool send) {
  auto [b, e] = tr.range(d);
  if (b < e) seqs.push_back({d, b, e, send});
}

// Index of the live sequence whose head is smallest by `less`, or
// seqs.size() when all are done. A rank has at most two peers under either
// stage mapping, so at most four sequences meet: a scan beats a heap.
template <typename Less>
std::size_t smallest(const std::vector<Seq>& seqs, Less less) {
  std::size_t best = seqs.size();
  for (std::size_t q = 0; q < seqs.size(); ++q)
    if (seqs[q].next < seqs[q].end && (best == seqs.size() || less(q, best))) best = q;
  return best;
}

// The state of one history while it is walked: the last op posted and the
// trailing run of parity-deferred sends at that op's slot (the sends a later
// receive at the same slot pulls in front of itself).
struct History {
  bool any = false;
  Pos back;
  std::vector<std::size_t> deferred;  // transfer ids of the trailing run
};

// Walks the ops of one history (a rank's ops towards one peer, or towards
// every peer with serial_safe) in sigma order and fixes the final position
// of every send in it. Positions along a history never decrease. An op only
// reads and moves ops of its own history, so histories are walked one by
// one, each as a merge of its already sorted sequences.
// A receive that cannot sit before its consumer (only malformed input, e.g.
// a duplicated action, gets there); the first one in sigma order is reported.
struct Conflict {
  bool found = false;
  TransferKey key;
};

void walk_history(Transfers& tr, const std::vector<Seq>& seqs_in, const LowerOptions& options,
                  History& h, Conflict& conflict) {
  std::vector<Seq> seqs = seqs_in;
  std::vector<TransferKey> heads(seqs.size());
  for (std::size_t q = 0; q < seqs.size(); ++q) heads[q] = tr.key(seqs[q].dir, seqs[q].next);
  while (true) {
    const std::size_t best =
        smallest(seqs, [&](std::size_t x, std::size_t y) { return heads[x] < heads[y]; });
    if (best == seqs.size()) break;
    Seq& q = seqs[best];
    const TransferKey k = heads[best];
    const std::size_t t = q.next;
    if (q.send) {
      // Right after the producer, or at the history's last op if later.
      Pos s{static_cast<std::uint32_t>(tr.producer(t) + 1), kSubSend};
      if (options.send_placement == SendPlacement::ParityStaggered && !k.grad && k.src % 2 == 1 &&
          s.slot < tr.rank_length(k.src))
        s.sub = kSubDeferred;
      if (h.any && s < h.back) s = h.back;
      if (s.sub == kSubDeferred) {
        if (!(h.any && h.back.slot == s.slot && h.back.sub == kSubDeferred)) h.deferred.clear();
        h.deferred.push_back(t);
      } else {
        h.deferred.clear();
      }
      h.back = s;
      tr.set_send_pos(t, pack(s));
    } else {
      // Right before the consumer; deferred sends of the same slot move in
      // front of it, anything else posted later is a conflict.
      const Pos rv{static_cast<std::uint32_t>(k.consumer), kSubRecv};
      if (h.any && rv < h.back) {
        if (h.back.slot != rv.slot) {
          if (!conflict.found || k < conflict.key) conflict = {true, k};
          return;  // later ops of this history cannot be reported first
        }
        for (std::size_t d : h.deferred) tr.set_send_pos(d, pack({rv.slot, kSubRecv}));
      }
      h.deferred.clear();
      h.back = rv;
    }
    h.any = true;
    if (++q.next < q.end) heads[best] = tr.key(q.dir, q.next);
  }
}

// Every history of the plan: per (rank, peer) end, or per rank.
void walk(Transfers& tr, int n_ranks, const LowerOptions& options) {
  std::vector<Seq> seqs;
  History h;
  Conflict conflict;
  auto run = [&] {
    if (seqs.empty()) return;
    h = History{};
    walk_history(tr, seqs, options, h, conflict);
    seqs.clear();
  };
  auto report = [&] {
    if (conflict.found)
      throw InternalError("lower: transfer order conflicts with receive " +
                          to_string(Transfers::recv_action(conflict.key)) + " on rank " +
                          std::to_string(conflict.key.dst));
  };
  if (options.serial_safe) {
    for (int r = 0; r < n_ranks; ++r) {
      for (int d : tr.sends_of(r)) add_seq(seqs, tr, d, true);
      for (int d : tr.recvs_of(r)) add_seq(seqs, tr, d, false);
      run();
    }
    report();
    return;
  }
  for (int r = 0; r < n_ranks; ++r) {
    // End (r, peer): r's sends to peer and its receives from peer.
    for (int d : tr.sends_of(r)) {
      add_seq(seqs, tr, d, true);
      add_seq(seqs, tr, tr.reverse(d), false);
      run();
    }
    for (int d : tr.recvs_of(r))
      if (tr.reverse(d) < 0) {
        add_seq(seqs, tr, d, false);
        run();
      }
  }
  report();
}

// The head of a sequence: its position, and its sigma key once a tie on the
// position needed it (rare: most heads differ in slot or sub).
struct PosHead {
  Pos pos;
  bool keyed = false;
  TransferKey key;
};

// Rank r's program: its compute actions with every op it posts merged in by
// position. Each sequence is sorted by position already, so a merge
// reproduces a full sort of the rank's ops.
std::vector<Action> emit_rank(const Transfers& tr, int r, const std::vector<Action>& list) {
  std::vector<Seq> seqs;
  for (int d : tr.sends_of(r)) add_seq(seqs, tr, d, true);
  for (int d : tr.recvs_of(r)) add_seq(seqs, tr, d, false);
  std::size_t n_ops = 0;
  for (const Seq& q : seqs) n_ops += q.end - q.next;
  auto head_of = [&](const Seq& q) {
    PosHead h;
    h.pos = q.send ? unpack(tr.send_pos(q.next))
                   : Pos{static_cast<std::uint32_t>(tr.consumer(q.next)), kSubRecv};
    return h;
  };
  std::vector<PosHead> heads(seqs.size());
  for (std::size_t q = 0; q < seqs.size(); ++q) heads[q] = head_of(seqs[q]);
  auto less = [&](std::size_t x, std::size_t y) {
    PosHead& a = heads[x];
    PosHead& b = heads[y];
    if (a.pos < b.pos) return true;
    if (b.pos < a.pos) return false;
    for (std::size_t q : {x, y})
      if (!heads[q].keyed) {
        heads[q].key = tr.key(seqs[q].dir, seqs[q].next);
        heads[q].keyed = true;
      }
    return a.key < b.key;
  };

  std::vector<Action> out;
  out.reserve(list.size() + n_ops);
  std::size_t i = 0;  // next compute action
  while (true) {
    const std::size_t best = smallest(seqs, less);
    if (best == seqs.size()) break;
    const PosHead& h = heads[best];
    if (h.pos.slot > list.size())
      throw InternalError("lower: op placed past the end of rank " + std::to_string(r));
    while (i < h.pos.slot) out.push_back(list[i++]);
    Seq& q = seqs[best];
    out.push_back(q.send ? tr.send_action(q.dir, q.next)
                         : Transfers::recv_action(tr.payload(q.dir, q.next)));
    if (++q.next < q.end) heads[best] = head_of(q);
  }
  while (i < list.size()) out.push_back(list[i++]);
  return out;
}

}  // namespace

std::string_view to_string(LowerMode m) {
  switch (m) {
    case LowerMode::Seed: return "seed";
    case LowerMode::Exact: return "exact";
    default: return "latency-hiding";
  }
}

std::optional<LowerMode> parse_lower_mode(std::string_view s) {
  for (LowerMode m : {LowerMode::LatencyHiding, LowerMode::Seed, LowerMode::Exact})
    if (s == to_string(m)) return m;
  return std::nullopt;
}

std::string_view lower_mode_names() { return "latency-hiding, seed or exact"; }

std::string_view to_string(LowerReport::Orders o) {
  switch (o) {
    case LowerReport::Orders::Bound: return "at the eager bound";
    case LowerReport::Orders::Local: return "a local optimum";
    case LowerReport::Orders::Optimal: return "optimal";
    case LowerReport::Orders::Limited: return "the best found within the search limit";
    default: return "not searched";
  }
}

CostModel nominal_costs() {
  CostModel c;
  c.comm_latency = kNominalLatency;
  return c;
}

Plan lower(const Plan& plan, const LowerOptions& options) {
  LowerReport unused;
  return lower(plan, options, unused);
}

Plan lower(const Plan& plan, const LowerOptions& options, LowerReport& report) {
  report = LowerReport{};
  if (!plan.is_whole())
    throw InputError("lower: the plan must hold every rank 0.." +
                     std::to_string(plan.meta.pp_degree - 1));
  if (!plan.is_compute_only()) throw InputError("lower: the plan already has SEND/RECV actions");
  if (options.batch_p2p) return detail::lower_batched(plan, options);
  if (options.mode != LowerMode::Seed) return detail::lower_latency_hiding(plan, options, &report);

  // The ordering argument needs every compute to take time: with zero-length
  // actions, consumer start times stop separating transfers. The seed order
  // is a unit-cost run's: only the per-type costs count, transfers are free.
  const CostModel& given = options.costs;
  detail::check_costs(given, plan.meta.num_stages(), "lower: ");
  for (double c : {given.f, given.b, given.i, given.w})
    if (!(c > 0.0))
      throw InputError("lower: every unit cost must be positive and finite (F=" +
                       std::to_string(given.f) + ", B=" + std::to_string(given.b) +
                       ", I=" + std::to_string(given.i) + ", W=" + std::to_string(given.w) + ")");
  CostModel costs;
  costs.f = given.f;
  costs.b = given.b;
  costs.i = given.i;
  costs.w = given.w;
  detail::Timing timing = detail::time_compute(plan, costs, detail::TimingFields::Start);
  detail::refuse_if_stuck(timing);

  Transfers tr(plan, timing);
  walk(tr, static_cast<int>(plan.ranks.size()), options);

  Plan out;
  out.meta = plan.meta;
  out.rank_ids = plan.rank_ids;
  out.ranks.resize(plan.ranks.size());
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    out.ranks[r] = emit_rank(tr, static_cast<int>(r), plan.ranks[r]);
  return out;
}

}  // namespace pipeplan
