// The simulation engine. Every resource (a rank's compute stream, a pair's or
// a rank's P2P stream) serves its work in an order fixed by the plan, so no
// scheduling decision depends on time: each start is the max of a few known
// end times. The engine therefore propagates times along dependencies on the
// execution core's worklist of ranks (each action and each transfer is
// settled once: linear time), and whatever cannot be settled when the
// worklist runs dry is stuck.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ir/deps.h"
#include "model/cost_check.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
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
      routes_(plan.meta),
      transfer_time_(options.costs.transfer_time()),
      variable_lengths_(options.costs.variable_lengths()) {}

// After the run: checks what no rank reached (a halted rank resumes past
// the action that stopped it), so that bad actions anywhere are reported and
// a stuck rank's diagnostics can name where its inputs sit. Problems are
// kept per rank and reported in (rank, index) order, the first 20.
bool Engine::check_rest() {
  for (std::size_t r = 0; r < plan_.ranks.size(); ++r) {
    const auto& list = plan_.ranks[r];
    RankState& st = rank_[r];
    for (std::size_t i = st.checked; i < list.size(); ++i) {
      prefetch(list.data(), i, list.size());
      if (!validate_action(static_cast<int>(r), static_cast<int>(i), list[i]) &&
          rank_problems_[r].size() >= kMaxProblems)
        break;
    }
    st.checked = list.size();
  }
  std::vector<Diagnostic> bad_actions;
  for (auto& found : rank_problems_)
    for (auto& d : found)
      if (bad_actions.size() < kMaxProblems) bad_actions.push_back(std::move(d));
  if (bad_actions.empty()) return true;
  // A plan with bad actions reports only those (what ran is meaningless).
  result_.problems = std::move(bad_actions);
  return false;
}

void Engine::bad(int rank, int index, const Action& a, const std::string& message) {
  auto& found = rank_problems_[static_cast<std::size_t>(rank)];
  if (found.size() < kMaxProblems)
    found.push_back({"sim-bad-action", rank, index, to_string(a), message});
}

void Engine::misplaced(int r, int i, const Action& a, int stage, int mb) {
  if (!in_range(stage, mb)) {
    bad(r, i, a,
        "stage " + std::to_string(stage) + " microbatch " + std::to_string(mb) +
            " is out of range (" + std::to_string(num_stages_) + " stages, " +
            std::to_string(num_mb_) + " microbatches)");
  } else if (rank_of(stage) != r) {
    bad(r, i, a,
        "stage " + std::to_string(stage) + " belongs to rank " + std::to_string(rank_of(stage)) +
            ", not rank " + std::to_string(r));
  } else {
    bad(r, i, a,
        "stage " + std::to_string(stage) + " is off microbatch " + std::to_string(mb) +
            "'s route (stages " + std::to_string(routes_.first(mb)) + ".." +
            std::to_string(routes_.last(mb)) + ")");
  }
}

// Only a stage's own rank claims its records (placed() holds), so the first
// claimer ran on this rank.
void Engine::duplicate(int first, int stage, int mb, int rank, int index, const Action& a,
                       const char* what) {
  bad(rank, index, a,
      std::string("second ") + what + " of stage " + std::to_string(stage) + " microbatch " +
          std::to_string(mb) + " (the first is rank " + std::to_string(rank) + " index " +
          std::to_string(first) + ")");
}

// A W is only noted; a second one finds the first by a scan of its rank.
bool Engine::claim_w(int rank, int index, const Action& a) {
  std::uint8_t& seen = seen_[key(a.stage, a.microbatch)];
  if (!(seen & kSeenW)) {
    seen |= kSeenW;
    return true;
  }
  const auto& list = plan_.ranks[static_cast<std::size_t>(rank)];
  int first = 0;
  for (;; ++first) {  // stops at `index` at the latest
    const Action& w = list[static_cast<std::size_t>(first)];
    if (w.type == ActionType::W && w.stage == a.stage && w.microbatch == a.microbatch) break;
  }
  duplicate(first, a.stage, a.microbatch, rank, index, a, "weight backward");
  return false;
}

// Checks one action and records where it sits. Only a stage's own rank
// claims its records, in list order, so when each rank's actions are checked
// relative to other ranks' does not change the outcome.
bool Engine::validate_action(int r, int i, const Action& a) {
  if (is_passthrough(a.type)) return true;
  if (is_memory(a.type)) return validate_memory(r, i, a);
  if (!placed(r, i, a, a.stage, a.microbatch)) return false;
  if (is_compute(a.type)) {
    KeyState& k = keys_[key(a.stage, a.microbatch)];
    switch (a.type) {
      case ActionType::F: return claim(k.f_at, a.stage, a.microbatch, r, i, a, "forward");
      case ActionType::B:
      case ActionType::I:
        return claim(k.bi_at, a.stage, a.microbatch, r, i, a, "backward") &&
               (mem_.empty() || backward_reads_device(r, i, a, a.stage, a.microbatch));
      case ActionType::W: return claim_w(r, i, a);
      default:  // OverlapFB: a forward and a full backward in one group
        if (!placed(r, i, a, a.sub_stage, a.sub_microbatch)) return false;
        return claim(k.f_at, a.stage, a.microbatch, r, i, a, "forward") &&
               claim(keys_[key(a.sub_stage, a.sub_microbatch)].bi_at, a.sub_stage, a.sub_microbatch,
                     r, i, a, "backward") &&
               (mem_.empty() || backward_reads_device(r, i, a, a.sub_stage, a.sub_microbatch));
    }
  }
  // SEND/RECV: the boundary must exist and cross ranks.
  const bool fwd = a.type == ActionType::SendF || a.type == ActionType::RecvF;
  const int peer_stage = deps::peer_stage(a);
  if (!routes_.on_route(peer_stage, a.microbatch)) {
    const bool before = peer_stage < a.stage;
    bad(r, i, a,
        "stage " + std::to_string(a.stage) + " has no " + (before ? "previous" : "next") +
            " stage to exchange with" +
            (routes_.has_routes() ? " on microbatch " + std::to_string(a.microbatch) + "'s route"
                                  : std::string()));
    return false;
  }
  if (rank_of(peer_stage) == r) {
    bad(r, i, a,
        "the boundary between stages " + std::to_string(std::min(a.stage, peer_stage)) + " and " +
            std::to_string(std::max(a.stage, peer_stage)) + " stays on rank " + std::to_string(r) +
            " and needs no transfer");
    return false;
  }
  // Payloads are keyed by the receiving side's (stage, microbatch).
  const bool send = is_send(a.type);
  const int recv_stage = send ? peer_stage : a.stage;
  const std::size_t k = key(recv_stage, a.microbatch);
  bool again;
  if (send) {
    const std::uint8_t bit = fwd ? kSeenSendF : kSeenSendB;
    again = seen_[k] & bit;
    seen_[k] |= bit;
  } else {
    std::int32_t& at = keys_[k].recv_at[fwd ? 0 : 1];
    again = at != -1;
    if (!again) at = i;
  }
  if (again) {
    bad(r, i, a,
        std::string("the same ") + (send ? "send" : "receive") + " appears twice on rank " +
            std::to_string(r));
    return false;
  }
  return true;
}

// BATCH_P2P groups run as units; marks a file cannot hold are bad actions.
bool Engine::check_groups() {
  bool any = false;
  for (std::size_t r = 0; r < plan_.ranks.size(); ++r) {
    std::string why;
    const long at = first_bad_group(plan_.ranks[r], &why);
    if (at >= 0) {
      const Action& a = plan_.ranks[r][static_cast<std::size_t>(at)];
      result_.problems.push_back(
          {"sim-bad-action", static_cast<int>(r), static_cast<int>(at), to_string(a), why});
    }
    for (const Action& a : plan_.ranks[r]) any |= a.batch_next || a.waited;
  }
  if (!result_.problems.empty()) return false;
  if (any) use_groups(plan_.ranks);
  return true;
}

SimResult Engine::simulate() {
  if (!plan_.is_whole())
    throw InputError("simulate needs every rank's program (the plan holds " +
                     std::to_string(plan_.ranks.size()) + " of " + std::to_string(meta_.pp_degree) +
                     " ranks)");
  compute_only_ = plan_.is_compute_only();
  result_.compute_only = compute_only_;
  const std::size_t keys =
      static_cast<std::size_t>(num_stages_) * static_cast<std::size_t>(num_mb_);
  if (keys >= (std::size_t{1} << 31))
    throw InputError("simulate handles at most 2^31 (stage, microbatch) values; the plan has " +
                     std::to_string(keys));
  keys_.assign(keys, KeyState{});
  seen_.assign(keys, 0);
  find_recomputes();  // sizes mem_ when the plan has memory actions
  stage_rank_.resize(static_cast<std::size_t>(num_stages_));
  for (int s = 0; s < num_stages_; ++s) stage_rank_[static_cast<std::size_t>(s)] = meta_.rank_of(s);
  // One pair per pair of ranks that some stage boundary joins, so every
  // SEND/RECV (and every compute-only value) finds its pair by its boundary.
  connect(meta_, transport_);
  if (!check_groups()) return std::move(result_);
  hop_ends_.resize(ends().size());
  const int n_ranks = meta_.pp_degree;
  rank_.assign(static_cast<std::size_t>(n_ranks), RankState{});
  rank_problems_.resize(static_cast<std::size_t>(n_ranks));
  // Each rank's timeline grows as the rank runs (one write per action);
  // finish() pads the lists of ranks that got stuck.
  result_.times.resize(static_cast<std::size_t>(n_ranks));
  for (std::size_t r = 0; r < result_.times.size(); ++r)
    result_.times[r].reserve(plan_.ranks[r].size());
  start(plan_.ranks);
  run();
  if (!check_rest()) {
    result_.times.clear();
    return std::move(result_);
  }
  finish();
  return std::move(result_);
}

// When `rank`'s RECV of the value keyed (dir, k) completed; kUnknown while
// it has not, or was not even posted.
double Engine::received(int dir, std::size_t k, int rank) const {
  const int at = keys_[k].recv_at[dir];
  return passed(rank, at) ? time_at(rank, at).end : kUnknown;
}

double Engine::forward_input(int stage, int mb, int rank, Loc* from, bool* via_recv) {
  if (stage == 0) return 0.0;
  const int src_rank = rank_of(stage - 1);
  if (src_rank != rank && !compute_only_) {
    *via_recv = true;
    return received(0, key(stage, mb), rank);
  }
  const KeyState& src = keys_[key(stage - 1, mb)];
  const double t = src.f_end;
  if (src_rank == rank || t == kUnknown) return t;
  *from = Loc{src_rank, src.f_at};
  return t + hop_time(key(stage, mb));
}

double Engine::grad_input(int stage, int mb, int rank, Loc* from, bool* via_recv) {
  if (stage == num_stages_ - 1) return 0.0;
  const int src_rank = rank_of(stage + 1);
  if (src_rank != rank && !compute_only_) {
    *via_recv = true;
    return received(1, key(stage, mb), rank);
  }
  const KeyState& src = keys_[key(stage + 1, mb)];
  const double t = src.bi_end;
  if (src_rank == rank || t == kUnknown) return t;
  *from = Loc{src_rank, src.bi_at};
  return t + hop_time(key(stage, mb));
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
  int via_recvs = 0;
  deps::for_each_input(a, routes_, [&](const deps::Value& v, int stage) {
    bool via_recv = false;
    if (v.stage == stage) {  // kept from this stage's own forward or backward
      const std::size_t k = key(v.stage, v.microbatch);
      need(v.kind == deps::Kind::Forward ? kept_at(k) : keys_[k].bi_end, false);
    } else if (v.kind == deps::Kind::Forward)
      need(forward_input(stage, v.microbatch, rank, &implicit[0], &via_recv), via_recv);
    else need(grad_input(stage, v.microbatch, rank, &implicit[1], &via_recv), via_recv);
    via_recvs += via_recv ? 1 : 0;
  });
  consumed_recvs_ = via_recvs;
  return known;
}

// ---- the core's hooks ------------------------------------------------------

// Checks an action when its rank first reaches it (a rank may wait at an
// action and come back); a failed check stops the rank, and check_rest()
// reports it with the rest.
run::Step Engine::enter(int r, std::size_t index, const Action& a) {
  RankState& st = rank_[static_cast<std::size_t>(r)];
  if (st.checked != index) return run::Step::Next;
  ++st.checked;
  return validate_action(r, static_cast<int>(index), a) ? run::Step::Next : run::Step::Halt;
}

run::Step Engine::bookkeeping(int r, std::size_t, const Action&) {
  const double host = rank_[static_cast<std::size_t>(r)].host;
  result_.times[static_cast<std::size_t>(r)].push_back({host, host});
  return run::Step::Next;
}

// The host launches a compute without waiting for the compute stream; it
// blocks only for a RECV whose value the compute needs.
run::Step Engine::compute(int r, std::size_t, const Action& a) {
  RankState& st = rank_[static_cast<std::size_t>(r)];
  Loc implicit[2];
  double data = 0.0, received = 0.0;
  if (!ready_time(a, r, implicit, &data, &received))
    return run::Step::Wait;  // woken when it arrives
  st.host = std::max(st.host, received);
  st.buffers -= consumed_recvs_;  // received values become the compute's input
  const double start = std::max({st.cursor, st.host, data});
  const double end = start + costs_.duration(a);
  result_.times[static_cast<std::size_t>(r)].push_back({start, end});
  if (st.computes == 0) st.first_start = start;
  ++st.computes;
  st.busy += end - start;
  st.cursor = st.last_end = end;
  // Forward values cross the boundary below this stage, gradients the
  // one above the backward's stage.
  if (implicit[0].rank >= 0)
    add_implicit_transfer(a.stage - 1, implicit[0], a.stage, a.microbatch, true);
  if (implicit[1].rank >= 0) {
    const bool overlap = a.type == ActionType::OverlapFB;
    const int stage = overlap ? a.sub_stage : a.stage;
    add_implicit_transfer(stage, implicit[1], stage, overlap ? a.sub_microbatch : a.microbatch,
                          false);
  }
  complete_compute(r, a, end);
  return run::Step::Next;
}

// A compute-only value of (stage, mb) that crossed `boundary` when produced.
void Engine::add_implicit_transfer(int boundary, Loc producer, int stage, int mb, bool fwd) {
  const double t0 = time_at(producer.rank, producer.index).end;
  add_hop(end_of(boundary, producer.rank),
          Hop{t0, producer.index, static_cast<std::uint32_t>(2 * key(stage, mb) + (fwd ? 0 : 1))});
}

// Records produced values, counts activations, wakes cross-rank consumers of
// compute-only plans (same-rank consumers come later in this rank's list).
void Engine::complete_compute(int r, const Action& a, double end) {
  RankState& st = rank_[static_cast<std::size_t>(r)];
  deps::for_each_output(a, [&](const deps::Value& v) {
    KeyState& k = keys_[key(v.stage, v.microbatch)];
    if (v.kind == deps::Kind::Forward) {
      k.f_end = end;
      // Inference keeps no activation for a backward: one is live while it runs.
      st.peak = std::max(st.peak, st.live + 1);
      const double size = costs_.memory(v.stage, v.microbatch);
      st.peak_memory = std::max(st.peak_memory, st.memory + size);
      if (!plan_.meta.forward_only) ++st.live, st.memory += size;
    } else {
      k.bi_end = end;
    }
    const int consumer = deps::consumer_stage(v);
    if (compute_only_ && consumer >= 0 && consumer < num_stages_ && rank_of(consumer) != r)
      wake(rank_of(consumer));
  });
  // A full backward (or W after I) frees the activations its forward kept
  // (OVERLAP_F_B: those of its backward part's stage).
  if (a.type == ActionType::B || a.type == ActionType::W || a.type == ActionType::OverlapFB) {
    --st.live;
    st.memory -= a.type == ActionType::OverlapFB ? costs_.memory(a.sub_stage, a.sub_microbatch)
                                                 : costs_.memory(a.stage, a.microbatch);
  }
}

}  // namespace detail

SimResult simulate(const Plan& plan, const SimOptions& options) {
  if (plan.meta.pp_degree < 1 || plan.meta.num_microbatches < 1 || plan.meta.stages_per_rank < 1)
    throw InputError("plan shape must have pp_degree, microbatches and stages_per_rank >= 1");
  detail::check_costs(options.costs, plan.meta.num_stages());
  options.costs.check_lengths(plan.meta.num_microbatches);
  detail::check_measured(options.costs, plan);
  detail::Engine engine(plan, options);
  SimResult result = engine.simulate();
  // Unreachable with bounded costs; a guard so no report ever says ok with inf/nan.
  if (!std::isfinite(result.makespan) || !std::isfinite(result.bubble_fraction))
    throw InputError("the simulated times overflow (makespan " +
                     detail::cost_text(result.makespan) + "); use smaller costs");
  return result;
}

}  // namespace pipeplan
