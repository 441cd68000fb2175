// The diagnosis of a stuck run, in two phases: a front per record kind turns
// what the records show into, per rank, the plan's actions of the steps it
// began, each completed, posted or not reached (observe_*); one pass then
// names the last completed and first unmatched action of every rank and
// follows who waits for whom (conclude).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ir/deps.h"
#include "pipeplan/diagnose.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

using deps::peer_stage;

enum class Seen : std::uint8_t { Done, Posted, Unseen };

struct Observed {
  StepAction at;
  Seen seen = Seen::Unseen;
  /// A posted SEND/RECV whose partner the peer posted too: the transfer met
  /// and never completed.
  bool partner_posted = false;
};

/// One rank as its record shows it.
struct RankObservation {
  bool present = false;
  std::string record;
  std::vector<Observed> ops;  ///< in run order
  /// When no action of the steps it began completed: the last action of
  /// the step before (a trace's earlier steps are complete by construction).
  std::optional<StepAction> before;
};

int peer_rank(const PlanMeta& meta, const Action& a) { return meta.rank_of(peer_stage(a)); }

// The action on the peer that meets `a`: SEND_F(s) meets RECV_F(s+1), SEND_B(s)
// meets RECV_B(s-1), and the other way round.
Action partner(const Action& a) {
  static constexpr struct {
    ActionType from, to;
  } kPartners[] = {{ActionType::SendF, ActionType::RecvF},
                   {ActionType::RecvF, ActionType::SendF},
                   {ActionType::SendB, ActionType::RecvB},
                   {ActionType::RecvB, ActionType::SendB}};
  for (const auto& row : kPartners)
    if (row.from == a.type) return make(row.to, peer_stage(a), a.microbatch);
  return a;
}

std::string describe(const StepAction& s) {
  return to_string(s.action) + " (step " + std::to_string(s.step) + ", index " +
         std::to_string(s.index) + ")";
}

RankDiagnosis conclude_rank(const Plan& plan, int rank, const RankObservation& obs) {
  RankDiagnosis d;
  d.rank = rank;
  d.record = obs.record;
  if (!obs.present) {
    d.status = RankDiagnosis::Status::NoRecord;
    d.why = "no record of rank " + std::to_string(rank);
    return d;
  }
  d.last_completed = obs.before;
  const Observed* first = nullptr;
  for (const Observed& o : obs.ops) {
    if (o.seen == Seen::Done) d.last_completed = o.at;
    if (o.seen != Seen::Done && !first) first = &o;
  }
  if (!first) {
    d.status = RankDiagnosis::Status::Finished;
    d.steps_done = obs.ops.empty() ? (obs.before ? obs.before->step : 0) : obs.ops.back().at.step;
    d.why = "finished " + std::to_string(d.steps_done) + " step(s)";
    return d;
  }
  d.steps_done = first->at.step - 1;
  d.first_unmatched = first->at;
  const Action& a = first->at.action;
  if (first->seen == Seen::Posted && is_comm(a.type)) {
    d.status = RankDiagnosis::Status::Waiting;
    d.waits_for = peer_rank(plan.meta, a);
    d.why = "posted " + to_string(a) + ", which waits for " + to_string(partner(a)) + " on rank " +
            std::to_string(*d.waits_for);
    if (first->partner_posted)
      d.why +=
          ", posted too: the transfer met and never completed (the transport, or an "
          "earlier operation on its stream)";
  } else {
    d.status = RankDiagnosis::Status::Stopped;
    d.why = "stopped before " + to_string(a) +
            ": everything it posted before completed; it is computing, blocked outside the "
            "plan, or dead";
  }
  return d;
}

std::string at_text(const RankDiagnosis& d) {
  switch (d.status) {
    case RankDiagnosis::Status::Waiting:
      return " (at " + to_string(d.first_unmatched->action) + ")";
    case RankDiagnosis::Status::Stopped:
      return " (stopped before " + to_string(d.first_unmatched->action) + ")";
    case RankDiagnosis::Status::Finished:
      return " (finished " + std::to_string(d.steps_done) + " step(s))";
    case RankDiagnosis::Status::NoRecord: return " (no record)";
  }
  return "";
}

HangReport conclude(const Plan& plan, const std::vector<RankObservation>& obs, std::string kind,
                    std::string observed, std::vector<std::string> notes) {
  HangReport r;
  r.kind = std::move(kind);
  r.observed = std::move(observed);
  r.notes = std::move(notes);
  for (int rank = 0; rank < plan.meta.pp_degree; ++rank)
    r.ranks.push_back(conclude_rank(plan, rank, obs[static_cast<std::size_t>(rank)]));

  std::vector<int> waiting;
  bool all_finished = true;
  for (const RankDiagnosis& d : r.ranks) {
    if (d.status == RankDiagnosis::Status::Waiting) waiting.push_back(d.rank);
    all_finished = all_finished && d.status == RankDiagnosis::Status::Finished &&
                   d.steps_done == r.ranks.front().steps_done;
  }
  if (all_finished) {
    r.completed = true;
    r.summary = "completed: every rank finished " + std::to_string(r.ranks.front().steps_done) +
                " step(s) of the plan";
    return r;
  }
  // Follow who waits for whom from the first waiting rank.
  if (!waiting.empty()) {
    std::vector<int> pos(r.ranks.size(), -1);
    int at = waiting.front();
    while (true) {
      if (pos[static_cast<std::size_t>(at)] >= 0) {
        r.cycle = true;
        r.cycle_start = static_cast<std::size_t>(pos[static_cast<std::size_t>(at)]);
        break;
      }
      pos[static_cast<std::size_t>(at)] = static_cast<int>(r.chain.size());
      r.chain.push_back(at);
      const RankDiagnosis& d = r.ranks[static_cast<std::size_t>(at)];
      if (d.status != RankDiagnosis::Status::Waiting) break;
      at = *d.waits_for;
    }
  }
  std::string list;
  for (int w : waiting) list += (list.empty() ? "" : ", ") + std::to_string(w);
  r.summary = "hang: " + std::to_string(waiting.size()) + " of " + std::to_string(r.ranks.size()) +
              " ranks waiting" + (list.empty() ? "" : " (" + list + ")");
  if (!r.chain.empty()) {
    r.summary += "; waiting chain: ";
    for (std::size_t i = 0; i < r.chain.size(); ++i) {
      const RankDiagnosis& d = r.ranks[static_cast<std::size_t>(r.chain[i])];
      r.summary += (i ? " -> " : "") + std::string("rank ") + std::to_string(d.rank) + at_text(d);
    }
    if (r.cycle) r.summary += " -> rank " + std::to_string(r.chain[r.cycle_start]) + " [cycle]";
  } else {
    for (const RankDiagnosis& d : r.ranks)
      if (d.status != RankDiagnosis::Status::Finished) {
        r.summary += "; rank " + std::to_string(d.rank) + at_text(d);
        break;
      }
  }
  return r;
}

// ---- Flight Recorder dumps ----

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw InputError(source + ": " + what);
}

/// A dump placed on the plan: its rank and its P2P entries (offset: entries
/// the ring buffer dropped before the first).
struct PlacedDump {
  const FlightRecorderDump* dump = nullptr;
  std::vector<const FrEntry*> p2p;
  std::size_t offset = 0;
  bool reports_completion = false;
};

// The trailing digits of a file name: torch's loader names rank R's dump
// <prefix>R.
std::optional<int> file_rank(const std::string& name) {
  std::size_t end = name.size(), begin = end;
  while (begin > 0 && name[begin - 1] >= '0' && name[begin - 1] <= '9' && end - begin < 9) --begin;
  if (begin == end) return std::nullopt;
  return std::stoi(name.substr(begin, end - begin));
}

const FrGroup* group_named(const FlightRecorderDump& d, const std::string& name) {
  for (const FrGroup& g : d.groups)
    if (g.name == name) return &g;
  return nullptr;
}

int place(const Plan& plan, const FlightRecorderDump& d, PlacedDump& out) {
  out.dump = &d;
  for (const FrEntry& e : d.entries) {
    if (e.is_p2p()) out.p2p.push_back(&e);
    if (e.state != "scheduled") out.reports_completion = true;
  }
  // The pipeline's group: the one its P2P entries name.
  const FrGroup* group = nullptr;
  for (const FrEntry* e : out.p2p) {
    const FrGroup* g = group_named(d, e->pg_name);
    if (!g)
      bad(d.source, "a P2P entry names process group '" + limits::excerpt(e->pg_name) +
                        "', which pg_config does not list");
    if (group && g != group)
      bad(d.source, "P2P entries on two process groups ('" + limits::excerpt(group->name) +
                        "' and '" + limits::excerpt(g->name) +
                        "'); the diagnosis reads one pipeline group");
    group = g;
  }
  if (!group)
    for (const FrGroup& g : d.groups)
      if (g.desc == "default_pg" || d.groups.size() == 1) group = &g;
  if (group && static_cast<int>(group->ranks.size()) != plan.meta.pp_degree)
    bad(d.source, "the dump is of " + std::to_string(group->ranks.size()) +
                      " ranks (process group '" + limits::excerpt(group->name) +
                      "'), the plan of " + std::to_string(plan.meta.pp_degree));
  // Its rank in the group: what its P2P entries say, else its file name.
  std::optional<int> rank;
  for (const FrEntry* e : out.p2p) {
    const int self = e->op == "send" ? e->src : e->dst;
    if (rank && *rank != self)
      bad(d.source, "P2P entries of two ranks (" + std::to_string(*rank) + " and " +
                        std::to_string(self) + ") in one dump");
    rank = self;
  }
  if (!rank) {
    const std::optional<int> global = file_rank(d.source);
    if (global && group) {
      auto it = std::find(group->ranks.begin(), group->ranks.end(), *global);
      if (it != group->ranks.end()) rank = static_cast<int>(it - group->ranks.begin());
    } else if (global) {
      rank = *global;
    }
  }
  if (!rank)
    bad(d.source,
        "cannot tell which rank the dump is of: it has no P2P entry and its name does "
        "not end in the rank (torch names them <prefix><rank>)");
  if (*rank < 0 || *rank >= plan.meta.pp_degree)
    bad(d.source, "the dump is of rank " + std::to_string(*rank) + ", the plan has ranks 0.." +
                      std::to_string(plan.meta.pp_degree - 1));
  // A ring buffer that overflowed dropped the oldest entries; p2p_seq_id,
  // counted from 1 per P2P op, says how many when it runs without gaps.
  if (!out.p2p.empty() && out.p2p.front()->p2p_seq_id > 1) {
    bool consecutive = true;
    for (std::size_t k = 1; k < out.p2p.size(); ++k)
      consecutive = consecutive && out.p2p[k]->p2p_seq_id == out.p2p[k - 1]->p2p_seq_id + 1;
    if (consecutive) out.offset = static_cast<std::size_t>(out.p2p.front()->p2p_seq_id - 1);
  }
  return *rank;
}

std::vector<int> comm_indices(const std::vector<Action>& list) {
  std::vector<int> out;
  for (std::size_t i = 0; i < list.size(); ++i)
    if (is_comm(list[i].type)) out.push_back(static_cast<int>(i));
  return out;
}

// Entry k of `dump` against the plan's op it stands for: kind and peer agree.
void check_entry(const Plan& plan, int rank, const FrEntry& e, std::size_t k, const StepAction& at,
                 const PlacedDump& dump) {
  const Action& a = at.action;
  const bool send = e.op == "send";
  const int peer = send ? e.dst : e.src;
  const int want = peer_rank(plan.meta, a);
  if (send == is_send(a.type) && (peer == want || (!send && peer < 0))) return;
  const std::string what = std::string(is_send(a.type) ? "a send to" : "a receive from") +
                           " rank " + std::to_string(want);
  bad(dump.dump->source,
      "P2P op " + std::to_string(dump.offset + k) + " of rank " + std::to_string(rank) + " (" +
          limits::excerpt(e.profiling_name) + ", record " + std::to_string(e.record_id) +
          ") differs from the plan, whose op " + std::to_string(dump.offset + k) + " there is " +
          describe(at) + ", " + what);
}

void require_whole(const Plan& plan) {
  if (!plan.is_whole())
    throw InputError("the plan holds only some of its " + std::to_string(plan.meta.pp_degree) +
                     " ranks; a diagnosis needs every rank's program");
}

}  // namespace

HangReport diagnose_flight_recorder(const Plan& plan,
                                    const std::vector<FlightRecorderDump>& dumps) {
  require_whole(plan);
  const auto ranks = static_cast<std::size_t>(plan.meta.pp_degree);
  std::vector<PlacedDump> placed(ranks);
  std::vector<bool> have(ranks, false);
  for (const FlightRecorderDump& d : dumps) {
    PlacedDump p;
    const int r = place(plan, d, p);
    if (have[static_cast<std::size_t>(r)])
      bad(d.source, "a second dump of rank " + std::to_string(r) +
                        " (the first: " + placed[static_cast<std::size_t>(r)].dump->source + ")");
    have[static_cast<std::size_t>(r)] = true;
    placed[static_cast<std::size_t>(r)] = std::move(p);
  }
  std::vector<std::string> notes;
  std::string silent;  // ranks whose dump reports no completion
  std::vector<std::vector<int>> comms(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    comms[r] = comm_indices(plan.ranks[r]);
    if (!have[r]) continue;
    const PlacedDump& p = placed[r];
    if (comms[r].empty() && !p.p2p.empty())
      bad(p.dump->source,
          "rank " + std::to_string(r) + " has P2P entries; its plan has no SEND/RECV");
    if (p.offset)
      notes.push_back("rank " + std::to_string(r) + ": the dump starts at P2P op " +
                      std::to_string(p.offset) + " (the ring buffer dropped older entries)");
    if (!p.reports_completion && !p.p2p.empty())
      silent += (silent.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!silent.empty())
    notes.push_back("rank(s) " + silent +
                    ": no entry reports completion (the backend pushes none; Gloo through c10d's "
                    "FlightRecorderHook retires each op at issue), so an op counts as completed "
                    "once its partner is in the peer's dump");
  auto op_at = [&](std::size_t r, std::size_t j) {
    const std::vector<int>& c = comms[r];
    const int index = c[j % c.size()];
    return StepAction{static_cast<int>(j / c.size()) + 1, index,
                      plan.ranks[r][static_cast<std::size_t>(index)]};
  };
  // Per rank pair and direction, how many ops each end posted: the k-th
  // send from a to b meets the k-th receive of b from a.
  std::map<std::pair<int, int>, std::size_t> sends, recvs;  // (from, to) -> count
  for (std::size_t r = 0; r < ranks; ++r) {
    if (!have[r]) continue;
    for (std::size_t k = 0; k < placed[r].p2p.size(); ++k) {
      const StepAction at = op_at(r, placed[r].offset + k);
      check_entry(plan, static_cast<int>(r), *placed[r].p2p[k], k, at, placed[r]);
      const int peer = peer_rank(plan.meta, at.action);
      if (is_send(at.action.type)) ++sends[{static_cast<int>(r), peer}];
      else ++recvs[{peer, static_cast<int>(r)}];
    }
  }
  std::vector<RankObservation> obs(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    RankObservation& o = obs[r];
    o.present = have[r];
    if (!have[r] || comms[r].empty()) continue;
    const PlacedDump& p = placed[r];
    o.record = p.dump->source;
    std::map<std::pair<int, int>, std::size_t> nth;  // (is_send, peer) -> ordinal
    const std::size_t n = comms[r].size();
    const std::size_t posted = p.offset + p.p2p.size();
    const std::size_t until = posted == 0 ? n : (posted + n - 1) / n * n;
    for (std::size_t j = p.offset; j < until; ++j) {
      Observed ob{op_at(r, j), Seen::Unseen, false};
      if (j < posted) {
        const FrEntry& e = *p.p2p[j - p.offset];
        const bool send = is_send(ob.at.action.type);
        const int peer = peer_rank(plan.meta, ob.at.action);
        const std::size_t k = nth[{send, peer}]++;
        // Its partner is posted when the peer's dump holds at least k+1 ops
        // the other way (ordinals count from each dump's first entry).
        const std::size_t other =
            send ? recvs[{static_cast<int>(r), peer}] : sends[{peer, static_cast<int>(r)}];
        ob.partner_posted = have[static_cast<std::size_t>(peer)] && k < other;
        if (p.reports_completion) ob.seen = e.state == "completed" ? Seen::Done : Seen::Posted;
        else ob.seen = ob.partner_posted ? Seen::Done : Seen::Posted;
      }
      o.ops.push_back(ob);
    }
  }
  return conclude(plan, obs, "flight-recorder", "SEND/RECV", std::move(notes));
}

// ---- pipeplan's own trace ----

HangReport diagnose_trace(const Plan& plan, const Trace& trace, const std::string& source) {
  require_whole(plan);
  if (trace.plan.ranks.size() != plan.ranks.size())
    bad(source, "the trace's plan has " + std::to_string(trace.plan.ranks.size()) +
                    " ranks, the plan " + std::to_string(plan.ranks.size()));
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    const auto& a = trace.plan.ranks[r];
    const auto& b = plan.ranks[r];
    for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i)
      if (i >= a.size() || i >= b.size() || a[i] != b[i])
        bad(source, "the trace's plan differs from the plan at rank " + std::to_string(r) +
                        " index " + std::to_string(i) + ": the trace has " +
                        (i < a.size() ? to_string(a[i]) : std::string("nothing")) + ", the plan " +
                        (i < b.size() ? to_string(b[i]) : std::string("nothing")));
  }
  const int last = std::max(trace.num_steps(), 1);
  std::vector<std::vector<bool>> done(plan.ranks.size());
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) done[r].assign(plan.ranks[r].size(), false);
  for (const TraceRecord& rec : trace.records)
    if (rec.step == last && rec.rank >= 0 && static_cast<std::size_t>(rec.rank) < done.size() &&
        rec.index >= 0 &&
        static_cast<std::size_t>(rec.index) < done[static_cast<std::size_t>(rec.rank)].size())
      done[static_cast<std::size_t>(rec.rank)][static_cast<std::size_t>(rec.index)] = true;
  std::vector<RankObservation> obs(plan.ranks.size());
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    RankObservation& o = obs[r];
    o.present = true;
    o.record = source;
    const auto& list = plan.ranks[r];
    if (last > 1 && !list.empty())
      o.before = StepAction{last - 1, static_cast<int>(list.size()) - 1, list.back()};
    bool computes_done = true;  // every compute so far has a record: the rank got here
    for (std::size_t i = 0; i < list.size(); ++i) {
      Observed ob{StepAction{last, static_cast<int>(i), list[i]}, Seen::Unseen, false};
      if (done[r][i]) ob.seen = Seen::Done;
      else if (is_comm(list[i].type) && computes_done) ob.seen = Seen::Posted;
      if (!is_comm(list[i].type)) computes_done = computes_done && done[r][i];
      o.ops.push_back(ob);
    }
  }
  // A posted SEND/RECV whose partner (the same value, same step) the peer
  // reached too.
  for (std::size_t r = 0; r < obs.size(); ++r)
    for (Observed& ob : obs[r].ops) {
      if (ob.seen != Seen::Posted) continue;
      const auto peer = static_cast<std::size_t>(peer_rank(plan.meta, ob.at.action));
      const Action want = partner(ob.at.action);
      for (const Observed& other : obs[peer].ops)
        if (other.at.action.type == want.type && other.at.action.stage == want.stage &&
            other.at.action.microbatch == want.microbatch)
          ob.partner_posted = other.seen != Seen::Unseen;
    }
  return conclude(plan, obs, "trace", "all", {});
}

}  // namespace pipeplan
