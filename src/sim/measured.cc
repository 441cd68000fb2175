// Measured traces: consistency checks and per-step timelines (the same
// Timeline the simulator produces, so every renderer draws both).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/trace.h"
#include "sim/measured.h"

namespace pipeplan {
namespace detail {

// Where each (stage, microbatch)'s forward, input-gradient backward (B or I,
// or the backward half of an OVERLAP_F_B) and W sit in the plan.
PlanLocations::PlanLocations(const Plan& plan)
    : mbs_(plan.meta.num_microbatches), S_(plan.meta.num_stages()) {
  const std::size_t n = static_cast<std::size_t>(S_) * static_cast<std::size_t>(mbs_);
  f_.assign(n, {});
  g_.assign(n, {});
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
      const Action& a = plan.ranks[r][i];
      const Loc here{static_cast<int>(r), static_cast<int>(i)};
      auto put = [&](std::vector<Loc>& v, int s, int mb) {
        if (s >= 0 && s < S_ && mb >= 0 && mb < mbs_) v[key(s, mb)] = here;
      };
      switch (a.type) {
        case ActionType::F: put(f_, a.stage, a.microbatch); break;
        case ActionType::B:
        case ActionType::I: put(g_, a.stage, a.microbatch); break;
        case ActionType::OverlapFB:
          put(f_, a.stage, a.microbatch);
          put(g_, a.sub_stage, a.sub_microbatch);
          break;
        default: break;
      }
    }
}

Loc PlanLocations::forward(int s, int mb) const {
  return s < 0 || s >= S_ || mb < 0 || mb >= mbs_ ? Loc{} : f_[key(s, mb)];
}
Loc PlanLocations::grad(int s, int mb) const {
  return s < 0 || s >= S_ || mb < 0 || mb >= mbs_ ? Loc{} : g_[key(s, mb)];
}

// The computes a compute action waits for (its data dependencies).
std::vector<Loc> PlanLocations::producers(const Action& a) const {
  std::vector<Loc> out;
  auto add = [&](Loc l) {
    if (l.rank >= 0) out.push_back(l);
  };
  auto fwd = [&](int s, int mb) { add(forward(s - 1, mb)); };
  auto bwd = [&](int s, int mb) {
    add(forward(s, mb));
    add(grad(s + 1, mb));
  };
  switch (a.type) {
    case ActionType::F: fwd(a.stage, a.microbatch); break;
    case ActionType::B:
    case ActionType::I: bwd(a.stage, a.microbatch); break;
    case ActionType::W: add(grad(a.stage, a.microbatch)); break;
    case ActionType::OverlapFB:
      fwd(a.stage, a.microbatch);
      bwd(a.sub_stage, a.sub_microbatch);
      break;
    default: break;
  }
  return out;
}

// The value a SEND ships: its producer on the sending rank and its consumer
// on the receiving rank, and where the matching RECV is.
TransferEnds PlanLocations::ends_of_send(const Plan& plan, const Action& send) const {
  TransferEnds e;
  const bool fwd = send.type == ActionType::SendF;
  const int s = send.stage, mb = send.microbatch;
  const int peer_stage = fwd ? s + 1 : s - 1;
  e.producer = fwd ? forward(s, mb) : grad(s, mb);
  e.consumer = fwd ? forward(peer_stage, mb) : grad(peer_stage, mb);
  if (peer_stage < 0 || peer_stage >= S_) return e;
  const int dst = plan.meta.rank_of(peer_stage);
  const Action recv = make(fwd ? ActionType::RecvF : ActionType::RecvB, peer_stage, mb);
  for (std::size_t rr = 0; rr < plan.rank_ids.size(); ++rr) {
    if (plan.rank_ids[rr] != dst) continue;
    const auto& list = plan.ranks[rr];
    for (std::size_t i = 0; i < list.size(); ++i)
      if (list[i] == recv) e.recv = {static_cast<int>(rr), static_cast<int>(i)};
  }
  return e;
}

StepView::StepView(const Trace& trace, int step) : plan_(trace.plan) {
  at_.resize(plan_.ranks.size());
  for (std::size_t r = 0; r < plan_.ranks.size(); ++r)
    at_[r].assign(plan_.ranks[r].size(), nullptr);
  for (const TraceRecord& rec : trace.records) {
    if (rec.step != step || rec.rank < 0 || static_cast<std::size_t>(rec.rank) >= at_.size())
      continue;
    auto& row = at_[static_cast<std::size_t>(rec.rank)];
    if (rec.index < 0 || static_cast<std::size_t>(rec.index) >= row.size()) continue;
    if (!row[static_cast<std::size_t>(rec.index)]) row[static_cast<std::size_t>(rec.index)] = &rec;
  }
}

bool StepView::complete() const {
  for (const auto& row : at_)
    for (const TraceRecord* r : row)
      if (!r) return false;
  return true;
}

}  // namespace detail

int Trace::num_steps() const {
  int n = 0;
  for (const TraceRecord& r : records) n = std::max(n, r.step);
  return n;
}

namespace {

using detail::Loc;

constexpr double kSlackMs = 1e-6;  // clock rounding between ranks on one host

std::string at(int step, int rank, int index, const Action& a) {
  return "step " + std::to_string(step) + " rank " + std::to_string(rank) + " index " +
         std::to_string(index) + " (" + to_string(a) + ")";
}

}  // namespace

std::vector<std::string> check_trace(const Trace& trace, std::size_t max_problems) {
  std::vector<std::string> out;
  auto add = [&](std::string m) {
    if (out.size() < max_problems) out.push_back(std::move(m));
  };
  const Plan& plan = trace.plan;
  if (!plan.is_whole()) {
    add("the trace's plan holds " + std::to_string(plan.ranks.size()) + " of " +
        std::to_string(plan.meta.pp_degree) + " ranks; a trace needs every rank's program");
    return out;
  }
  const int steps = trace.num_steps();
  if (steps == 0) {
    add("the trace holds no record");
    return out;
  }
  // Records themselves: a known step, rank and index holding that action,
  // once. Counted in a map, so memory follows the records, not the step
  // numbers a file claims.
  std::unordered_map<std::uint64_t, int> seen;
  seen.reserve(trace.records.size());
  // (step, rank, index) -> step * actions + first[rank] + index: below 2^55
  // with the readers' limits (step < 2^31, actions <= 2^25).
  std::vector<std::uint64_t> first(plan.ranks.size() + 1, 0);
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    first[r + 1] = first[r] + plan.ranks[r].size();
  auto key = [&first](int step, std::size_t rank, std::size_t index) {
    return static_cast<std::uint64_t>(step) * first.back() + first[rank] + index;
  };
  for (const TraceRecord& rec : trace.records) {
    const std::string who = "record step " + std::to_string(rec.step) + " rank " +
                            std::to_string(rec.rank) + " index " + std::to_string(rec.index);
    if (rec.step < 1 || rec.rank < 0 || rec.rank >= plan.meta.pp_degree || rec.index < 0 ||
        static_cast<std::size_t>(rec.index) >=
            plan.ranks[static_cast<std::size_t>(rec.rank)].size()) {
      add(who + " (" + to_string(rec.action) + ") lies outside the plan");
      continue;
    }
    const Action& want =
        plan.ranks[static_cast<std::size_t>(rec.rank)][static_cast<std::size_t>(rec.index)];
    if (rec.action != want)
      add(who + " is " + to_string(rec.action) + ", but the plan has " + to_string(want) +
          " there");
    if (++seen[key(rec.step, static_cast<std::size_t>(rec.rank),
                   static_cast<std::size_t>(rec.index))] == 2)
      add(who + " (" + to_string(rec.action) + ") is recorded twice");
    if (!std::isfinite(rec.start) || !std::isfinite(rec.end) || !std::isfinite(rec.wait) ||
        !std::isfinite(rec.post) || rec.end < rec.start || rec.wait < 0 || rec.post < 0 ||
        rec.bytes < 0)
      add(who + " (" + to_string(rec.action) + ") has bad times: start " +
          std::to_string(rec.start) + ", end " + std::to_string(rec.end) + ", wait " +
          std::to_string(rec.wait));
  }
  // Missing records, up to max_problems of them (time follows the records).
  for (int k = 1; k <= steps && out.size() < max_problems; ++k)
    for (std::size_t r = 0; r < plan.ranks.size() && out.size() < max_problems; ++r)
      for (std::size_t i = 0; i < plan.ranks[r].size() && out.size() < max_problems; ++i)
        if (seen.find(key(k, r, i)) == seen.end())
          add("step " + std::to_string(k) + " has no record of rank " + std::to_string(r) +
              " index " + std::to_string(i) + " (" + to_string(plan.ranks[r][i]) + ")");
  if (!out.empty()) return out;

  // Times: program order, no overlapping computes, dependencies respected.
  const detail::PlanLocations where(plan);
  std::vector<double> rank_free(plan.ranks.size(), -std::numeric_limits<double>::infinity());
  for (int k = 1; k <= steps; ++k) {
    const detail::StepView v(trace, k);
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
      // Computes run on one stream and posts come from the host in program
      // order; a post may overlap the compute before it (an asynchronous
      // device, or the simulator), so each kind is ordered on its own.
      double last_start[2] = {-std::numeric_limits<double>::infinity(),
                              -std::numeric_limits<double>::infinity()};
      for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
        const TraceRecord& rec = v.at(static_cast<int>(r), static_cast<int>(i));
        const Action& a = rec.action;
        double& last = last_start[is_compute(a.type) ? 0 : 1];
        if (rec.start + kSlackMs < last)
          add(at(k, static_cast<int>(r), static_cast<int>(i), a) + " starts before the " +
              (is_compute(a.type) ? "compute" : "post") + " ahead of it in the program");
        last = std::max(last, rec.start);
        if (!is_compute(a.type)) continue;
        if (rec.start + kSlackMs < rank_free[r])
          add(at(k, static_cast<int>(r), static_cast<int>(i), a) +
              " overlaps the previous compute on its rank");
        rank_free[r] = std::max(rank_free[r], rec.end);
        for (Loc p : where.producers(a)) {
          const TraceRecord& pr = v.at(p.rank, p.index);
          if (rec.start + kSlackMs < pr.end)
            add(at(k, static_cast<int>(r), static_cast<int>(i), a) + " starts at " +
                std::to_string(rec.start) + " ms, before its input " + to_string(pr.action) +
                " on rank " + std::to_string(p.rank) + " ended (" + std::to_string(pr.end) +
                " ms)");
        }
      }
    }
    for (std::size_t r = 0; r < plan.ranks.size(); ++r)
      for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
        const Action& a = plan.ranks[r][i];
        if (!is_send(a.type)) continue;
        const detail::TransferEnds e = where.ends_of_send(plan, a);
        if (e.recv.rank < 0) continue;  // verify() reports unmatched sends
        const TraceRecord& send = v.at(static_cast<int>(r), static_cast<int>(i));
        const TraceRecord& recv = v.at(e.recv.rank, e.recv.index);
        if (recv.end + kSlackMs < send.start)
          add(at(k, e.recv.rank, e.recv.index, recv.action) + " completes at " +
              std::to_string(recv.end) + " ms, before " + to_string(a) + " was posted (" +
              std::to_string(send.start) + " ms)");
      }
  }
  return out;
}

Timeline step_timeline(const Trace& trace, int step, bool rebase) {
  const Plan& plan = trace.plan;
  if (step < 1 || step > trace.num_steps())
    throw InputError("the trace has steps 1.." + std::to_string(trace.num_steps()) + ", not " +
                     std::to_string(step));
  const detail::StepView v(trace, step);
  if (!plan.is_whole() || !v.complete())
    throw InputError("step " + std::to_string(step) + " of the trace is incomplete (check_trace)");
  double origin = std::numeric_limits<double>::infinity(), last = -origin;
  for (const TraceRecord& r : trace.records) {
    if (rebase && r.step != step) continue;
    origin = std::min(origin, r.start);
  }
  Timeline t;
  t.times.resize(plan.ranks.size());
  double step_first = std::numeric_limits<double>::infinity();
  double busy_total = 0.0;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    RankStats st;
    st.rank = plan.rank_ids[r];
    st.first_start = std::numeric_limits<double>::infinity();
    int live = 0;
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
      const TraceRecord& rec = v.at(static_cast<int>(r), static_cast<int>(i));
      const ActionTime at{rec.start - origin, rec.end - origin};
      t.times[r].push_back(at);
      step_first = std::min(step_first, at.start);
      last = std::max(last, at.end);
      const Action& a = rec.action;
      if (!is_compute(a.type)) continue;
      st.busy += at.end - at.start;
      st.first_start = std::min(st.first_start, at.start);
      st.last_end = std::max(st.last_end, at.end);
      if (a.type == ActionType::F || a.type == ActionType::OverlapFB) {
        st.peak_activations = std::max(st.peak_activations, live + 1);
        if (!plan.meta.forward_only) ++live;
      }
      if (a.type == ActionType::B || a.type == ActionType::W || a.type == ActionType::OverlapFB)
        live = std::max(0, live - 1);
    }
    if (!std::isfinite(st.first_start)) st.first_start = 0.0;
    st.peak_rank_activations = static_cast<double>(st.peak_activations) / plan.meta.stages_per_rank;
    busy_total += st.busy;
    t.ranks.push_back(st);
  }
  if (!std::isfinite(step_first)) step_first = 0.0, last = 0.0;
  t.makespan = std::max(0.0, last);
  const double span = last - step_first;
  for (RankStats& st : t.ranks) st.idle = span - st.busy;
  t.bubble_fraction =
      span > 0 ? 1.0 - busy_total / (static_cast<double>(plan.ranks.size()) * span) : 0.0;

  const detail::PlanLocations where(plan);
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
      const Action& a = plan.ranks[r][i];
      if (!is_send(a.type)) continue;
      const detail::TransferEnds e = where.ends_of_send(plan, a);
      if (e.recv.rank < 0) continue;
      Transfer tr;
      tr.src_rank = static_cast<int>(r);
      tr.src_index = static_cast<int>(i);
      tr.dst_rank = e.recv.rank;
      tr.dst_index = e.recv.index;
      tr.producer = e.producer.rank == tr.src_rank ? e.producer.index : -1;
      tr.consumer = e.consumer.rank == tr.dst_rank ? e.consumer.index : -1;
      tr.start = std::max(
          t.times[r][i].start,
          t.times[static_cast<std::size_t>(e.recv.rank)][static_cast<std::size_t>(e.recv.index)]
              .start);
      tr.end = std::max(
          tr.start,
          t.times[static_cast<std::size_t>(e.recv.rank)][static_cast<std::size_t>(e.recv.index)]
              .end);
      t.transfers.push_back(tr);
    }
  std::stable_sort(t.transfers.begin(), t.transfers.end(),
                   [](const Transfer& a, const Transfer& b) {
                     return a.start != b.start ? a.start < b.start : a.src_rank < b.src_rank;
                   });
  return t;
}

std::vector<Timeline> trace_timelines(const Trace& trace) {
  std::vector<Timeline> out;
  for (int k = 1; k <= trace.num_steps(); ++k) out.push_back(step_timeline(trace, k, false));
  return out;
}

}  // namespace pipeplan
