// verify(): structural checks, then the progress proof under one transport
// model (verify/proof.h): a run of the plan on the execution core whose
// hooks keep end counters only. Linear in the number of actions.
#include <algorithm>

#include "ir/deps.h"
#include "pipeplan/error.h"
#include "pipeplan/verify.h"
#include "verify/payload.h"
#include "verify/proof.h"

namespace pipeplan {
namespace detail {

// ---- layout ------------------------------------------------------------

// Each stage's ends towards its neighbours (the plan passed the structure
// checks, so a SEND/RECV's peer stage exists on another rank), and each
// end's range of report records from the per-stage counts the structure scan
// kept; ranks fill the ranges in program order when a report needs them.
Proof::Proof(const Plan& plan, const PlanIndex& index, ProofState& core, Transport model,
             const RunRules& rules)
    : plan_(plan),
      index_(index),
      core_(core),
      n_(plan.meta.pp_degree),
      mbs_(static_cast<std::size_t>(index.mbs)),
      rules_(rules) {
  core.connect(plan.meta, model);
  // Waited singles change nothing on one stream per rank: every later op of
  // the rank queues behind the waited one anyway, and a compute it passes
  // feeds only those ops. So serial runs them as posted (the fast path).
  const bool wait_singles = rules.waits == Waits::AtPost && !one_stream_per_rank(model);
  if (index.groups || wait_singles) core.use_groups(plan.ranks, wait_singles);
  const int S = index_.stages;
  up_.assign(static_cast<std::size_t>(S), -1);
  down_.assign(static_cast<std::size_t>(S), -1);
  for (int s = 0; s < S; ++s) {
    const int r = index_.rank_of[static_cast<std::size_t>(s)];
    if (s > 0) up_[static_cast<std::size_t>(s)] = core.end_of(s - 1, r);
    if (s + 1 < S) down_[static_cast<std::size_t>(s)] = core.end_of(s, r);
  }
  const std::size_t n_ends = core.ends().size();
  ends_of_.assign(static_cast<std::size_t>(n_), {});
  for (std::size_t e = 0; e < n_ends; ++e)
    ends_of_[static_cast<std::size_t>(core.ends()[e].rank)].push_back(static_cast<int>(e));
  std::vector<std::size_t> counts(n_ends, 0);
  for (int s = 0; s < S; ++s) {
    const auto* c = &index_.comm_count[static_cast<std::size_t>(s) * 4];
    const int up = up_[static_cast<std::size_t>(s)], down = down_[static_cast<std::size_t>(s)];
    if (down >= 0)
      counts[static_cast<std::size_t>(down)] += c[comm_slot(kSendF)] + c[comm_slot(kRecvB)];
    if (up >= 0)
      counts[static_cast<std::size_t>(up)] += c[comm_slot(kRecvF)] + c[comm_slot(kSendB)];
  }
  end_first_.assign(n_ends, 0);
  end_last_.assign(n_ends, 0);
  std::size_t total = 0;
  for (std::size_t e = 0; e < n_ends; ++e) {
    end_first_[e] = total;
    total += counts[e];
    end_last_[e] = total;
  }
  if (buffered_sends(model))
    delivered_.assign((2 * static_cast<std::size_t>(S) * index.mbs + 63) / 64, 0);
  recent_.assign(static_cast<std::size_t>(n_), {});
  recent_next_.assign(static_cast<std::size_t>(n_), 0);
}

// ---- the core's hooks ----------------------------------------------------

void Proof::conclude(std::vector<Diagnostic>& out) {
  // A clean run needs no per-operation record; reports rebuild one.
  const bool finished = all_done();
  if (!finished || corrupt_any_) fill_ends();
  // Without groups, rendezvous and serial meet pair positions in order: the
  // first position that cannot complete is named.
  if (!finished && !buffered_sends(core_.model()) && !core_.groups()) fifo_check(out);
  // A plan that progresses under the model may still pair a group with a
  // single, which NCCL never meets where groups run apart (docs/semantics.md).
  // Only plans with groups pay for this walk; one that hangs anyway is named
  // by its hang. On one stream per rank a group and a single share it.
  if (finished && !corrupt_any_ && core_.groups() && rules_.groups_apart &&
      !buffered_sends(core_.model()) && !one_stream_per_rank(core_.model()))
    group_single_check(out);
  // Every met pair was checked as it met; a deadlock may leave some unmet.
  if (!finished || corrupt_any_) report_corruption(out);
  if (!finished) report(out);  // else no rank is stuck
}

bool Proof::all_done() const {
  for (int r = 0; r < n_; ++r)
    if (core_.pc(r) < plan_.ranks[static_cast<std::size_t>(r)].size()) return false;
  const bool eager = buffered_sends(core_.model());
  for (std::size_t e = 0; e < core_.ends().size(); ++e) {
    const int c = count(static_cast<int>(e));
    if (core_.ends()[e].posted != c || (!eager && core_.ends()[e].done != c)) return false;
  }
  return true;
}

namespace {

template <Transport M>
void prove(const Plan& plan, const PlanIndex& index, const RunRules& rules,
           std::vector<Diagnostic>& out) {
  ProofRun<M>(plan, index, rules).prove(out);
}

}  // namespace

}  // namespace detail

VerifyResult verify(const Plan& plan, const VerifyOptions& options) {
  VerifyResult res;
  if (!plan.is_whole()) {
    res.diagnostics = check_structure(plan, options.max_diagnostics);
    return res;
  }
  detail::check_plan_limits(plan);  // before the index sizes itself by the shape
  detail::PlanIndex index(plan.meta, plan.num_actions());
  res.diagnostics = detail::check_structure_indexed(plan, options.max_diagnostics, index);
  if (!res.diagnostics.empty()) return res;
  // A clean structure has every (stage, microbatch) row, so the index is dense.
  if (!index.dense()) throw InternalError("verify: a complete plan got a sparse index");
  // One instantiation per model row (the model a constant in the loop).
  static_assert(kTransportModels.size() == 3, "a new model needs its instantiation here");
  const RunRules& rules = options.rules;
  switch (options.transport) {
    case Transport::Rendezvous:
      detail::prove<Transport::Rendezvous>(plan, index, rules, res.diagnostics);
      break;
    case Transport::Eager:
      detail::prove<Transport::Eager>(plan, index, rules, res.diagnostics);
      break;
    case Transport::Serial:
      detail::prove<Transport::Serial>(plan, index, rules, res.diagnostics);
      break;
  }
  return res;
}

}  // namespace pipeplan
