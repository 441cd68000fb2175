// The simulation engine. Every resource (a rank's compute stream, a pair's or
// a rank's P2P stream) serves its work in an order fixed by the plan, so no
// scheduling decision depends on time: each start is the max of a few known
// end times. The engine therefore propagates times along dependencies with a
// worklist of ranks (each action and each transfer is settled once: linear
// time), and whatever cannot be settled when the worklist runs dry is stuck.
#include <algorithm>
#include <cmath>

#include "pipeplan/error.h"
#include "pipeplan/simulate.h"
#include "sim/engine.h"

namespace pipeplan {
namespace detail {

Engine::Engine(const Plan& plan, const SimOptions& options)
    : plan_(plan),
      meta_(plan.meta),
      costs_(options.costs),
      transport_(options.transport),
      num_stages_(plan.meta.num_stages()),
      num_mb_(plan.meta.num_microbatches),
      transfer_time_(options.costs.transfer_time()) {}

bool Engine::validate() {
  const std::size_t keys = static_cast<std::size_t>(num_stages_) * static_cast<std::size_t>(num_mb_);
  for (auto* v : {&f_end_, &bi_end_, &w_end_}) v->assign(keys, kUnknown);
  for (auto* v : {&f_at_, &bi_at_, &w_at_}) v->assign(keys, Loc{});
  for (int d = 0; d < 2; ++d) {
    recv_done_[d].assign(keys, kUnknown);
    send_op_[d].assign(keys, -1);
    recv_op_[d].assign(keys, -1);
  }
  compute_only_ = plan_.is_compute_only();
  std::size_t comms = 0;
  for (const auto& list : plan_.ranks)
    for (const Action& a : list) comms += is_comm(a.type);
  ops_.reserve(comms);
  result_.transfers.reserve(comms / 2);
  const int n_ranks = static_cast<int>(plan_.ranks.size());
  for (int r = 0; r < n_ranks; ++r) {
    const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      if (!validate_action(r, i, list[static_cast<std::size_t>(i)])) {
        if (result_.problems.size() >= kMaxProblems) return false;
      }
    }
  }
  return result_.problems.empty();
}

bool Engine::in_range(int stage, int mb) const {
  return stage >= 0 && stage < num_stages_ && mb >= 0 && mb < num_mb_;
}

void Engine::bad(int rank, int index, const Action& a, const std::string& message) {
  if (result_.problems.size() < kMaxProblems)
    result_.problems.push_back({"sim-bad-action", rank, index, to_string(a), message});
}

bool Engine::claim(std::vector<Loc>& slot, int stage, int mb, int rank, int index,
                   const Action& a, const char* what) {
  Loc& loc = slot[key(stage, mb)];
  if (loc.rank >= 0) {
    bad(rank, index, a,
        std::string("second ") + what + " of stage " + std::to_string(stage) + " microbatch " +
            std::to_string(mb) + " (the first is rank " + std::to_string(loc.rank) + " index " +
            std::to_string(loc.index) + ")");
    return false;
  }
  loc = Loc{rank, index};
  return true;
}

bool Engine::validate_action(int r, int i, const Action& a) {
  if (is_passthrough(a.type)) return true;
  auto check_place = [&](int stage, int mb) {
    if (!in_range(stage, mb)) {
      bad(r, i, a,
          "stage " + std::to_string(stage) + " microbatch " + std::to_string(mb) +
              " is out of range (" + std::to_string(num_stages_) + " stages, " +
              std::to_string(num_mb_) + " microbatches)");
      return false;
    }
    if (meta_.rank_of(stage) != r) {
      bad(r, i, a,
          "stage " + std::to_string(stage) + " belongs to rank " +
              std::to_string(meta_.rank_of(stage)) + ", not rank " + std::to_string(r));
      return false;
    }
    return true;
  };
  if (is_compute(a.type)) {
    if (!check_place(a.stage, a.microbatch)) return false;
    switch (a.type) {
      case ActionType::F: return claim(f_at_, a.stage, a.microbatch, r, i, a, "forward");
      case ActionType::B:
      case ActionType::I: return claim(bi_at_, a.stage, a.microbatch, r, i, a, "backward");
      case ActionType::W: return claim(w_at_, a.stage, a.microbatch, r, i, a, "weight backward");
      default:  // OverlapFB: a forward and a full backward in one group
        if (!check_place(a.sub_stage, a.sub_microbatch)) return false;
        return claim(f_at_, a.stage, a.microbatch, r, i, a, "forward") &&
               claim(bi_at_, a.sub_stage, a.sub_microbatch, r, i, a, "backward");
    }
  }
  // SEND/RECV: the boundary must exist and cross ranks.
  if (!check_place(a.stage, a.microbatch)) return false;
  const bool fwd = a.type == ActionType::SendF || a.type == ActionType::RecvF;
  const int peer_stage =
      (a.type == ActionType::SendF || a.type == ActionType::RecvB) ? a.stage + 1 : a.stage - 1;
  if (peer_stage < 0 || peer_stage >= num_stages_) {
    bad(r, i, a, "stage " + std::to_string(a.stage) + " has no " +
                     (peer_stage < 0 ? "previous" : "next") + " stage to exchange with");
    return false;
  }
  if (meta_.rank_of(peer_stage) == r) {
    bad(r, i, a, "the boundary between stages " + std::to_string(std::min(a.stage, peer_stage)) +
                     " and " + std::to_string(std::max(a.stage, peer_stage)) +
                     " stays on rank " + std::to_string(r) + " and needs no transfer");
    return false;
  }
  // Payloads are keyed by the receiving side's (stage, microbatch).
  const int recv_stage = is_send(a.type) ? peer_stage : a.stage;
  auto& slot = is_send(a.type) ? send_op_[fwd ? 0 : 1] : recv_op_[fwd ? 0 : 1];
  int& existing = slot[key(recv_stage, a.microbatch)];
  if (existing != -1) {
    bad(r, i, a, std::string("the same ") + (is_send(a.type) ? "send" : "receive") +
                     " appears twice on rank " + std::to_string(r));
    return false;
  }
  existing = -2;  // claimed; becomes the op id once posted
  return true;
}

SimResult Engine::run() {
  if (!plan_.is_whole())
    throw InputError("simulate needs every rank's program (the plan holds " +
                     std::to_string(plan_.ranks.size()) + " of " +
                     std::to_string(meta_.pp_degree) + " ranks)");
  result_.compute_only = plan_.is_compute_only();
  if (!validate()) return std::move(result_);
  const int n_ranks = meta_.pp_degree;
  ranks_.assign(static_cast<std::size_t>(n_ranks), RankState{});
  result_.times.resize(static_cast<std::size_t>(n_ranks));
  for (int r = 0; r < n_ranks; ++r)
    result_.times[static_cast<std::size_t>(r)].assign(plan_.ranks[static_cast<std::size_t>(r)].size(),
                                                      ActionTime{});
  streams_.assign(static_cast<std::size_t>(n_ranks), Stream{});
  for (int r = n_ranks - 1; r >= 0; --r) wake(r);
  drain();
  finish();
  return std::move(result_);
}

void Engine::wake(int rank) {
  RankState& st = ranks_[static_cast<std::size_t>(rank)];
  if (st.queued) return;
  st.queued = true;
  worklist_.push_back(rank);
}

void Engine::drain() {
  while (!worklist_.empty() || !stream_work_.empty()) {
    if (!stream_work_.empty()) {
      int r = stream_work_.back();
      stream_work_.pop_back();
      try_serial(r);
      continue;
    }
    int r = worklist_.back();
    worklist_.pop_back();
    ranks_[static_cast<std::size_t>(r)].queued = false;
    advance(r);
  }
}

double Engine::forward_input(int stage, int mb, int rank, Loc* from, bool* received) {
  if (stage == 0) return 0.0;
  if (meta_.rank_of(stage - 1) == rank) return f_end_[key(stage - 1, mb)];
  if (!compute_only_) {
    *received = true;
    return recv_done_[0][key(stage, mb)];
  }
  double t = f_end_[key(stage - 1, mb)];
  if (t == kUnknown) return kUnknown;
  *from = f_at_[key(stage - 1, mb)];
  return t + transfer_time_;
}

double Engine::grad_input(int stage, int mb, int rank, Loc* from, bool* received) {
  if (stage == num_stages_ - 1) return 0.0;
  if (meta_.rank_of(stage + 1) == rank) return bi_end_[key(stage + 1, mb)];
  if (!compute_only_) {
    *received = true;
    return recv_done_[1][key(stage, mb)];
  }
  double t = bi_end_[key(stage + 1, mb)];
  if (t == kUnknown) return kUnknown;
  *from = bi_at_[key(stage + 1, mb)];
  return t + transfer_time_;
}

// Whether every value `a` consumes is there; `data` is when the last one is,
// `received` when the last one a RECV delivers is (the host waits for those).
// Compute-only cross-rank inputs are noted in `implicit`.
bool Engine::ready_time(const Action& a, int rank, Loc implicit[2], double* data,
                        double* received) {
  bool known = true;
  *data = *received = 0.0;
  auto need = [&](double t, bool via_recv) {
    if (t == kUnknown) known = false;
    *data = std::max(*data, t);
    if (via_recv) *received = std::max(*received, t);
  };
  bool r0 = false, r1 = false;
  switch (a.type) {
    case ActionType::F:
      need(forward_input(a.stage, a.microbatch, rank, &implicit[0], &r0), r0);
      break;
    case ActionType::B:
    case ActionType::I:
      need(f_end_[key(a.stage, a.microbatch)], false);
      need(grad_input(a.stage, a.microbatch, rank, &implicit[1], &r1), r1);
      break;
    case ActionType::W: need(bi_end_[key(a.stage, a.microbatch)], false); break;
    case ActionType::OverlapFB:
      need(forward_input(a.stage, a.microbatch, rank, &implicit[0], &r0), r0);
      need(f_end_[key(a.sub_stage, a.sub_microbatch)], false);
      need(grad_input(a.sub_stage, a.sub_microbatch, rank, &implicit[1], &r1), r1);
      break;
    default: break;
  }
  return known;
}

// Runs rank r's list from where it stopped until an input is missing. The
// host posts SEND/RECV and launches computes without waiting for the compute
// stream; it blocks only for a RECV whose value the next compute needs.
void Engine::advance(int r) {
  RankState& st = ranks_[static_cast<std::size_t>(r)];
  const auto& list = plan_.ranks[static_cast<std::size_t>(r)];
  auto& times = result_.times[static_cast<std::size_t>(r)];
  while (st.next < list.size()) {
    const Action& a = list[st.next];
    const int index = static_cast<int>(st.next);
    if (is_passthrough(a.type)) {
      times[st.next] = {st.host, st.host};
    } else if (is_comm(a.type)) {
      double ready = st.host;
      if (is_send(a.type)) {
        // A send ships a value this rank produced earlier in its list.
        const double produced = a.type == ActionType::SendF ? f_end_[key(a.stage, a.microbatch)]
                                                            : bi_end_[key(a.stage, a.microbatch)];
        if (produced == kUnknown) return;  // stuck: reported by finish()
        ready = std::max(ready, produced);
      }
      times[st.next] = {st.host, kUnknown};
      post(r, index, a, ready);
    } else {
      Loc implicit[2];
      double data = 0.0, received = 0.0;
      if (!ready_time(a, r, implicit, &data, &received)) return;  // woken when it arrives
      st.host = std::max(st.host, received);
      const double start = std::max({st.cursor, st.host, data});
      const double end = start + costs_.duration(a);
      times[st.next] = {start, end};
      if (st.computes == 0) st.first_start = start;
      ++st.computes;
      st.busy += end - start;
      st.cursor = st.last_end = end;
      for (int k = 0; k < 2; ++k)
        if (implicit[k].rank >= 0) add_implicit_transfer(implicit[k], Loc{r, index});
      complete_compute(r, a, end);
    }
    ++st.next;
  }
}

void Engine::add_implicit_transfer(Loc producer, Loc consumer) {
  const double t0 = result_.times[static_cast<std::size_t>(producer.rank)]
                                 [static_cast<std::size_t>(producer.index)].end;
  Transfer x;
  x.src_rank = producer.rank;
  x.src_index = x.producer = producer.index;
  x.dst_rank = consumer.rank;
  x.dst_index = x.consumer = consumer.index;
  x.start = t0;
  x.end = t0 + transfer_time_;
  result_.transfers.push_back(x);
}

// Records produced values, counts activations, wakes cross-rank consumers of
// compute-only plans (same-rank consumers come later in this rank's list).
void Engine::complete_compute(int r, const Action& a, double end) {
  RankState& st = ranks_[static_cast<std::size_t>(r)];
  auto produced_f = [&](int s, int mb) {
    f_end_[key(s, mb)] = end;
    ++st.live;
    st.peak = std::max(st.peak, st.live);
    if (compute_only_ && s + 1 < num_stages_ && meta_.rank_of(s + 1) != r) wake(meta_.rank_of(s + 1));
  };
  auto produced_grad = [&](int s, int mb) {
    bi_end_[key(s, mb)] = end;
    if (compute_only_ && s > 0 && meta_.rank_of(s - 1) != r) wake(meta_.rank_of(s - 1));
  };
  switch (a.type) {
    case ActionType::F: produced_f(a.stage, a.microbatch); break;
    case ActionType::B: produced_grad(a.stage, a.microbatch), --st.live; break;
    case ActionType::I: produced_grad(a.stage, a.microbatch); break;
    case ActionType::W:
      w_end_[key(a.stage, a.microbatch)] = end;
      --st.live;
      break;
    case ActionType::OverlapFB:
      produced_f(a.stage, a.microbatch);
      produced_grad(a.sub_stage, a.sub_microbatch);
      --st.live;
      break;
    default: break;
  }
}

}  // namespace detail

SimResult simulate(const Plan& plan, const SimOptions& options) {
  const CostModel& c = options.costs;
  for (double v : {c.f, c.b, c.i, c.w, c.comm_latency, c.comm_bandwidth, c.transfer_bytes})
    if (!std::isfinite(v) || v < 0) throw InputError("costs must be finite and non-negative");
  if (c.overlap && (!std::isfinite(*c.overlap) || *c.overlap < 0))
    throw InputError("costs must be finite and non-negative");
  for (const auto& [stage, scale] : c.stage_scales) {
    if (stage < 0 || stage >= plan.meta.num_stages())
      throw InputError("stage costs name stage " + std::to_string(stage) + ", but the plan has " +
                       std::to_string(plan.meta.num_stages()) + " stages (0.." +
                       std::to_string(plan.meta.num_stages() - 1) + ")");
    for (double v : {scale.f, scale.b, scale.i, scale.w})
      if (!std::isfinite(v) || v < 0)
        throw InputError("stage " + std::to_string(stage) + " cost multipliers must be non-negative");
  }
  if (plan.meta.pp_degree < 1 || plan.meta.num_microbatches < 1 || plan.meta.stages_per_rank < 1)
    throw InputError("plan shape must have pp_degree, microbatches and stages_per_rank >= 1");
  detail::Engine engine(plan, options);
  return engine.run();
}

}  // namespace pipeplan
