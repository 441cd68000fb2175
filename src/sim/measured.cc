// Measured traces: consistency checks and per-step timelines (the same
// Timeline the simulator produces, so every renderer draws both).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/trace.h"
#include "sim/measured.h"

namespace pipeplan {
namespace detail {

// Dense when the plan holds at least a quarter as many actions as its shape
// has (stage, microbatch) rows (every complete plan does).
PlanLocations::PlanLocations(const Plan& plan)
    : plan_(plan), mbs_(plan.meta.num_microbatches), S_(plan.meta.num_stages()) {
  const std::size_t n = static_cast<std::size_t>(S_) * static_cast<std::size_t>(mbs_);
  dense_ = plan.num_actions() * 4 >= n;
  if (dense_)
    for (auto& t : dense_tables_) t.assign(n, {});
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
      const Action& a = plan.ranks[r][i];
      const Loc here{static_cast<int>(r), static_cast<int>(i)};
      switch (a.type) {
        case ActionType::F: put(kForward, a.stage, a.microbatch, here); break;
        case ActionType::B:
        case ActionType::I: put(kGrad, a.stage, a.microbatch, here); break;
        case ActionType::OverlapFB:
          put(kForward, a.stage, a.microbatch, here);
          put(kGrad, a.sub_stage, a.sub_microbatch, here);
          break;
        case ActionType::RecvF:
        case ActionType::RecvB:
          // Only where a SEND's peer looks for it: on the rank owning the stage.
          if (a.stage >= 0 && a.stage < S_ && plan.rank_ids[r] == plan.meta.rank_of(a.stage))
            put(a.type == ActionType::RecvF ? kRecvF : kRecvB, a.stage, a.microbatch, here);
          break;
        default: break;
      }
    }
}

void PlanLocations::put(Table t, int s, int mb, Loc here) {
  if (s < 0 || s >= S_ || mb < 0 || mb >= mbs_) return;
  if (dense_) dense_tables_[t][key(s, mb)] = here;
  else sparse_[t][key(s, mb)] = here;
}

Loc PlanLocations::get(Table t, int s, int mb) const {
  if (s < 0 || s >= S_ || mb < 0 || mb >= mbs_) return {};
  if (dense_) return dense_tables_[t][key(s, mb)];
  const auto it = sparse_[t].find(key(s, mb));
  return it == sparse_[t].end() ? Loc{} : it->second;
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
TransferEnds PlanLocations::ends_of_send(const Action& send) const {
  TransferEnds e;
  const bool fwd = send.type == ActionType::SendF;
  const int s = send.stage, mb = send.microbatch;
  const int peer_stage = fwd ? s + 1 : s - 1;
  e.producer = fwd ? forward(s, mb) : grad(s, mb);
  e.consumer = fwd ? forward(peer_stage, mb) : grad(peer_stage, mb);
  e.recv = get(fwd ? kRecvF : kRecvB, peer_stage, mb);
  return e;
}

StepRecords::StepRecords(const Trace& trace) {
  sorted_.reserve(trace.records.size());
  for (const TraceRecord& r : trace.records) sorted_.push_back(&r);
  auto by_step = [](const TraceRecord* a, const TraceRecord* b) { return a->step < b->step; };
  // Traces are written step by step: usually sorted already.
  if (!std::is_sorted(sorted_.begin(), sorted_.end(), by_step))
    std::stable_sort(sorted_.begin(), sorted_.end(), by_step);
}

StepRecords::Range StepRecords::of(int step) const {
  auto lo = std::partition_point(sorted_.begin(), sorted_.end(),
                                 [step](const TraceRecord* r) { return r->step < step; });
  auto hi = std::partition_point(lo, sorted_.end(),
                                 [step](const TraceRecord* r) { return r->step <= step; });
  return {sorted_.data() + (lo - sorted_.begin()), sorted_.data() + (hi - sorted_.begin())};
}

StepView::StepView(const Plan& plan) {
  at_.resize(plan.ranks.size());
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) at_[r].assign(plan.ranks[r].size(), nullptr);
}

StepView::StepView(const Trace& trace, int step) : StepView(trace.plan) {
  for (const TraceRecord& rec : trace.records)
    if (rec.step == step) put(rec);
}

void StepView::assign(StepRecords::Range records) {
  for (auto& row : at_) std::fill(row.begin(), row.end(), nullptr);
  for (auto it = records.first; it != records.second; ++it) put(**it);
}

void StepView::put(const TraceRecord& rec) {
  if (rec.rank < 0 || static_cast<std::size_t>(rec.rank) >= at_.size()) return;
  auto& row = at_[static_cast<std::size_t>(rec.rank)];
  if (rec.index < 0 || static_cast<std::size_t>(rec.index) >= row.size()) return;
  if (!row[static_cast<std::size_t>(rec.index)]) row[static_cast<std::size_t>(rec.index)] = &rec;
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

// Every record's slot (step, rank, index) as one number: (step - 1) *
// actions + first[rank] + index, below 2^56 with the readers' limits.
class Slots {
 public:
  explicit Slots(const Plan& plan) : first_(plan.ranks.size() + 1, 0) {
    for (std::size_t r = 0; r < plan.ranks.size(); ++r)
      first_[r + 1] = first_[r] + plan.ranks[r].size();
  }
  std::uint64_t of(int step, std::size_t rank, std::size_t index) const {
    return static_cast<std::uint64_t>(step - 1) * first_.back() + first_[rank] + index;
  }
  /// The (step, rank, index) of slot `k`.
  void locate(std::uint64_t k, int& step, std::size_t& rank, std::size_t& index) const {
    const std::uint64_t per_step = first_.back();
    step = static_cast<int>(k / per_step) + 1;
    const std::uint64_t in_step = k % per_step;
    rank = static_cast<std::size_t>(std::upper_bound(first_.begin(), first_.end(), in_step) -
                                    first_.begin() - 1);
    index = static_cast<std::size_t>(in_step - first_[rank]);
  }

 private:
  std::vector<std::uint64_t> first_;
};

// The records themselves: a known step, rank and index holding that action,
// once, with sane times; then the slots no record fills. Sorting the slots
// keeps memory and time by the records present, whatever step numbers a
// file claims; messages come in record order, then in slot order.
void check_records(const Trace& trace, int steps, const std::function<void(std::string)>& add,
                   const std::function<bool()>& full) {
  const Plan& plan = trace.plan;
  const Slots slots(plan);
  auto inside = [&](const TraceRecord& rec) {
    return rec.step >= 1 && rec.rank >= 0 && rec.rank < plan.meta.pp_degree && rec.index >= 0 &&
           static_cast<std::size_t>(rec.index) <
               plan.ranks[static_cast<std::size_t>(rec.rank)].size();
  };
  std::vector<std::pair<std::uint64_t, std::uint32_t>> taken;  // (slot, record)
  taken.reserve(trace.records.size());
  for (std::size_t k = 0; k < trace.records.size(); ++k) {
    const TraceRecord& rec = trace.records[k];
    if (inside(rec))
      taken.emplace_back(slots.of(rec.step, static_cast<std::size_t>(rec.rank),
                                  static_cast<std::size_t>(rec.index)),
                         static_cast<std::uint32_t>(k));
  }
  if (!std::is_sorted(taken.begin(), taken.end())) std::sort(taken.begin(), taken.end());
  std::vector<bool> second(trace.records.size(), false);  // the 2nd record of a slot
  for (std::size_t j = 1; j < taken.size(); ++j)
    if (taken[j].first == taken[j - 1].first && (j < 2 || taken[j - 2].first != taken[j].first))
      second[taken[j].second] = true;

  for (std::size_t k = 0; k < trace.records.size() && !full(); ++k) {
    const TraceRecord& rec = trace.records[k];
    auto who = [&] {
      return "record step " + std::to_string(rec.step) + " rank " + std::to_string(rec.rank) +
             " index " + std::to_string(rec.index);
    };
    if (!inside(rec)) {
      add(who() + " (" + to_string(rec.action) + ") lies outside the plan");
      continue;
    }
    const Action& want =
        plan.ranks[static_cast<std::size_t>(rec.rank)][static_cast<std::size_t>(rec.index)];
    if (rec.action != want)
      add(who() + " is " + to_string(rec.action) + ", but the plan has " + to_string(want) +
          " there");
    if (second[k]) add(who() + " (" + to_string(rec.action) + ") is recorded twice");
    if (!std::isfinite(rec.start) || !std::isfinite(rec.end) || !std::isfinite(rec.wait) ||
        !std::isfinite(rec.post) || rec.end < rec.start || rec.wait < 0 || rec.post < 0 ||
        rec.bytes < 0)
      add(who() + " (" + to_string(rec.action) + ") has bad times: start " +
          std::to_string(rec.start) + ", end " + std::to_string(rec.end) + ", wait " +
          std::to_string(rec.wait));
  }
  // Missing records: the gaps between the slots taken (time follows the
  // records and the problems reported).
  const std::uint64_t end = slots.of(steps + 1, 0, 0);
  auto missing = [&](std::uint64_t k) {
    int step = 0;
    std::size_t r = 0, i = 0;
    slots.locate(k, step, r, i);
    add("step " + std::to_string(step) + " has no record of rank " + std::to_string(r) + " index " +
        std::to_string(i) + " (" + to_string(plan.ranks[r][i]) + ")");
  };
  std::uint64_t next = 0;
  for (std::size_t j = 0; j <= taken.size() && !full(); ++j) {
    const std::uint64_t upto = j < taken.size() ? taken[j].first : end;
    for (; next < upto && !full(); ++next) missing(next);
    next = std::max(next, j < taken.size() ? upto + 1 : end);
  }
}

// Program order, no overlapping computes, dependencies respected, in one step.
void check_step_times(const Plan& plan, int k, const detail::StepView& v,
                      const std::vector<std::vector<std::vector<Loc>>>& inputs,
                      const std::vector<std::pair<Loc, Loc>>& sends, std::vector<double>& rank_free,
                      const std::function<void(std::string)>& add) {
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
      for (Loc p : inputs[r][i]) {
        const TraceRecord& pr = v.at(p.rank, p.index);
        if (rec.start + kSlackMs < pr.end)
          add(at(k, static_cast<int>(r), static_cast<int>(i), a) + " starts at " +
              std::to_string(rec.start) + " ms, before its input " + to_string(pr.action) +
              " on rank " + std::to_string(p.rank) + " ended (" + std::to_string(pr.end) + " ms)");
      }
    }
  }
  for (const auto& [from, to] : sends) {
    const TraceRecord& send = v.at(from.rank, from.index);
    const TraceRecord& recv = v.at(to.rank, to.index);
    if (recv.end + kSlackMs < send.start)
      add(at(k, to.rank, to.index, recv.action) + " completes at " + std::to_string(recv.end) +
          " ms, before " + to_string(send.action) + " was posted (" + std::to_string(send.start) +
          " ms)");
  }
}

// Every SEND with a matching RECV: (send, recv) locations.
std::vector<std::pair<Loc, Loc>> matched_sends(const Plan& plan,
                                               const detail::PlanLocations& where) {
  std::vector<std::pair<Loc, Loc>> out;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
      const Action& a = plan.ranks[r][i];
      if (!is_send(a.type)) continue;
      const detail::TransferEnds e = where.ends_of_send(a);
      if (e.recv.rank < 0) continue;  // verify() reports unmatched sends
      out.push_back({Loc{static_cast<int>(r), static_cast<int>(i)}, e.recv});
    }
  return out;
}

}  // namespace

std::vector<std::string> check_trace(const Trace& trace, std::size_t max_problems) {
  std::vector<std::string> out;
  auto add = [&](std::string m) {
    if (out.size() < max_problems) out.push_back(std::move(m));
  };
  auto full = [&] { return out.size() >= max_problems; };
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
  check_records(trace, steps, add, full);
  if (!out.empty()) return out;

  // Times, step by step (every step is complete now).
  const detail::PlanLocations where(plan);
  std::vector<std::vector<std::vector<Loc>>> inputs(plan.ranks.size());
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (const Action& a : plan.ranks[r])
      inputs[r].push_back(is_compute(a.type) ? where.producers(a) : std::vector<Loc>{});
  const auto sends = matched_sends(plan, where);
  const detail::StepRecords by_step(trace);
  detail::StepView v(plan);
  std::vector<double> rank_free(plan.ranks.size(), -std::numeric_limits<double>::infinity());
  for (int k = 1; k <= steps && !full(); ++k) {
    v.assign(by_step.of(k));
    check_step_times(plan, k, v, inputs, sends, rank_free, add);
  }
  return out;
}

namespace {

// One step's timeline from its records, times shifted by `origin`.
Timeline timeline_of(const Plan& plan, const detail::StepView& v, double origin,
                     const std::vector<std::pair<Loc, Loc>>& sends,
                     const detail::PlanLocations& where) {
  double last = -std::numeric_limits<double>::infinity();
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

  for (const auto& [from, to] : sends) {
    const Action& a =
        plan.ranks[static_cast<std::size_t>(from.rank)][static_cast<std::size_t>(from.index)];
    const detail::TransferEnds e = where.ends_of_send(a);
    Transfer tr;
    tr.src_rank = from.rank;
    tr.src_index = from.index;
    tr.dst_rank = to.rank;
    tr.dst_index = to.index;
    tr.producer = e.producer.rank == tr.src_rank ? e.producer.index : -1;
    tr.consumer = e.consumer.rank == tr.dst_rank ? e.consumer.index : -1;
    const ActionTime& send =
        t.times[static_cast<std::size_t>(from.rank)][static_cast<std::size_t>(from.index)];
    const ActionTime& recv =
        t.times[static_cast<std::size_t>(to.rank)][static_cast<std::size_t>(to.index)];
    tr.start = std::max(send.start, recv.start);
    tr.end = std::max(tr.start, recv.end);
    t.transfers.push_back(tr);
  }
  std::stable_sort(t.transfers.begin(), t.transfers.end(),
                   [](const Transfer& a, const Transfer& b) {
                     return a.start != b.start ? a.start < b.start : a.src_rank < b.src_rank;
                   });
  return t;
}

double first_start(const Trace& trace, int only_step) {
  double origin = std::numeric_limits<double>::infinity();
  for (const TraceRecord& r : trace.records)
    if (only_step == 0 || r.step == only_step) origin = std::min(origin, r.start);
  return origin;
}

}  // namespace

Timeline step_timeline(const Trace& trace, int step, bool rebase) {
  const Plan& plan = trace.plan;
  if (step < 1 || step > trace.num_steps())
    throw InputError("the trace has steps 1.." + std::to_string(trace.num_steps()) + ", not " +
                     std::to_string(step));
  const detail::StepView v(trace, step);
  if (!plan.is_whole() || !v.complete())
    throw InputError("step " + std::to_string(step) + " of the trace is incomplete (check_trace)");
  const detail::PlanLocations where(plan);
  return timeline_of(plan, v, first_start(trace, rebase ? step : 0), matched_sends(plan, where),
                     where);
}

std::vector<Timeline> trace_timelines(const Trace& trace) {
  const Plan& plan = trace.plan;
  const int steps = trace.num_steps();
  std::vector<Timeline> out;
  if (steps == 0) return out;
  if (!plan.is_whole()) throw InputError("step 1 of the trace is incomplete (check_trace)");
  const detail::PlanLocations where(plan);
  const auto sends = matched_sends(plan, where);
  const detail::StepRecords by_step(trace);
  const double origin = first_start(trace, 0);
  detail::StepView v(plan);
  for (int k = 1; k <= steps; ++k) {
    v.assign(by_step.of(k));
    if (!v.complete())
      throw InputError("step " + std::to_string(k) + " of the trace is incomplete (check_trace)");
    out.push_back(timeline_of(plan, v, origin, sends, where));
  }
  return out;
}

}  // namespace pipeplan
