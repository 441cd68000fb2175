// Internal: the execution core's paths for BATCH_P2P groups (run/core.h,
// "Batched P2P groups"): with use_groups() every posted op keeps a Link, and
// units (a single op or a whole group) go on streams, completing member by
// member when both partners' units head their streams. Out of the hot loop
// (PIPEPLAN_COLD on the entry points); included by run/core.h only.
#pragma once

#include "run/core.h"

namespace pipeplan::run {

template <class P, class Op>
void Core<P, Op>::note_posted(int rank, int end, const Op& op) {
  Link<Op>& l = this->links_[static_cast<std::size_t>(rank)][static_cast<std::size_t>(op.index)];
  l.op = op;
  l.end = end;
  l.unit = group_unit_ >= 0 ? group_unit_ : op.index;
  if (group_unit_ < 0) l.left = 1;
}

template <class P, class Op>
void Core<P, Op>::link_met(int xe, const Op& x, int ye, const Op& y) {
  Link<Op>& lx = link_of(this->ends_[static_cast<std::size_t>(xe)].rank, x.index);
  Link<Op>& ly = link_of(this->ends_[static_cast<std::size_t>(ye)].rank, y.index);
  lx.peer_rank = this->ends_[static_cast<std::size_t>(ye)].rank;
  lx.peer_index = y.index;
  ly.peer_rank = this->ends_[static_cast<std::size_t>(xe)].rank;
  ly.peer_index = x.index;
}

// One member of a unit completed at time t: a unit whose last member
// completed ends (and, on a stream, lets the next unit to its head).
template <class P, class Op>
void Core<P, Op>::member_done(int rank, std::int32_t index, double t) {
  Link<Op>& l = link_of(rank, index);
  l.done = true;
  Link<Op>& u = link_of(rank, l.unit);
  if (t > u.until) u.until = t;
  if (--u.left > 0) return;
  wake(rank);
  if (u.stream < 0) return;
  UnitStream& q = this->ustreams_[static_cast<std::size_t>(u.stream)];
  q.units.pop();  // a unit completes members only at its stream's head
  if (u.until > q.busy_until) q.busy_until = u.until;
  if (!q.units.empty()) unit_work_.push_back({rank, q.units.front()});
}

template <class P, class Op>
void Core<P, Op>::post_unit(int rank, int end, const Op& op, bool send) {
  ++this->ends_[static_cast<std::size_t>(end)].posted;
  note_posted(rank, end, op);
  End<Op>& ch = this->ends_[static_cast<std::size_t>(send ? end : end ^ 1)];
  if (ch.unmatched.empty() || ch.unmatched_recvs != send) {
    ch.unmatched.push(op);
    ch.unmatched_recvs = !send;
  } else {
    const Op other = ch.unmatched.front();
    ch.unmatched.pop();
    if (self().meet(end, op, end ^ 1, other)) link_met(end, op, end ^ 1, other);
  }
  if (group_unit_ >= 0) return;  // the group goes on its stream once all members are posted
  const std::size_t stream = one_stream_per_rank(model())
                                 ? this->ends_.size() + static_cast<std::size_t>(rank)
                                 : static_cast<std::size_t>(end);
  push_unit(rank, op.index, stream);
}

template <class P, class Op>
void Core<P, Op>::push_unit(int rank, std::int32_t unit, std::size_t stream) {
  link_of(rank, unit).stream = static_cast<std::int32_t>(stream);
  auto& q = this->ustreams_[stream].units;
  q.push(unit);
  if (q.size() > 1) return;
  unit_work_.push_back({rank, unit});
  while (!unit_work_.empty()) {
    const auto [r, u] = unit_work_.back();
    unit_work_.pop_back();
    match_unit(r, u);
  }
}

// The unit (r, u) is at the head of its stream: each member whose partner's
// unit is at the head of its own completes.
template <class P, class Op>
void Core<P, Op>::match_unit(int r, std::int32_t u) {
  const std::vector<Action>& list = (*programs_)[static_cast<std::size_t>(r)];
  for (std::int32_t j = u;; ++j) {
    Link<Op>& x = link_of(r, j);
    if (!x.done && x.met() && this->at_head(x.peer_rank, link_of(x.peer_rank, x.peer_index).unit))
      complete_met(r, j);
    if (!list[static_cast<std::size_t>(j)].batch_next) break;  // the unit's last member
  }
}

template <class P, class Op>
void Core<P, Op>::complete_met(int r, std::int32_t j) {
  Link<Op>& x = link_of(r, j);
  const int q = x.peer_rank;
  const std::int32_t k = x.peer_index;
  Link<Op>& y = link_of(q, k);
  const double bx = this->ustreams_[static_cast<std::size_t>(link_of(r, x.unit).stream)].busy_until;
  const double by = this->ustreams_[static_cast<std::size_t>(link_of(q, y.unit).stream)].busy_until;
  const double t = self().complete(x.end, x.op, y.end, y.op, bx > by ? bx : by);
  ++this->ends_[static_cast<std::size_t>(x.end)].done;
  ++this->ends_[static_cast<std::size_t>(y.end)].done;
  member_done(r, j, t);
  member_done(q, k, t);
  wake(r);
  wake(q);
}

// Role::Group with groups, at the group's first member i: posts every
// member (resuming after a member that had to wait), puts the group on
// its rank's stream, and passes it once it ended. A single waited where it
// stands (waits_singles()) comes here as a group of one.
template <class P, class Op>
Step Core<P, Op>::group(int r, std::size_t i) {
  auto& st = this->ranks_[static_cast<std::size_t>(r)];
  const std::vector<Action>& list = (*programs_)[static_cast<std::size_t>(r)];
  std::size_t n = 1;
  while (list[i + n - 1].batch_next && i + n < list.size()) ++n;
  if (!st.group_open) {
    if (st.group_posted == 0)
      link_of(r, static_cast<std::int32_t>(i)).left = static_cast<std::int32_t>(n);
    group_unit_ = static_cast<std::int32_t>(i);
    for (std::size_t j = i + st.group_posted; j < i + n; ++j) {
      Step s = j > i ? self().enter(r, j, list[j]) : Step::Next;
      if (s == Step::Next) s = self().transfer(r, j, list[j]);
      if (s != Step::Next) {
        group_unit_ = -1;
        return s;
      }
      ++st.group_posted;
    }
    group_unit_ = -1;
    st.group_open = true;
    if (!buffered_sends(model())) {
      // A group on its rank's stream for groups (serial: the rank's one
      // stream), a group of one (Action::waited) too: it is committed as a
      // batch; a single waited where it stands by the runtime's rule
      // (waits_singles()) on its pair's.
      const std::size_t rank_stream = this->ends_.size() + static_cast<std::size_t>(r);
      const auto own = static_cast<std::size_t>(link_of(r, static_cast<std::int32_t>(i)).end);
      const bool batch = n > 1 || list[i].waited;
      push_unit(r, static_cast<std::int32_t>(i),
                batch || one_stream_per_rank(model()) ? rank_stream : own);
    }
  }
  if (link_of(r, static_cast<std::int32_t>(i)).left > 0) return Step::Wait;
  st.group_open = false;
  st.group_posted = 0;
  self().group_ended(r, i, n);
  st.pc = i + n - 1;  // the caller steps past the last member
  return Step::Next;
}

}  // namespace pipeplan::run
