// Internal: helpers shared by the SVG, Chrome-trace and text renderers.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ir/numbers.h"
#include "pipeplan/error.h"
#include "pipeplan/ir.h"
#include "pipeplan/limits.h"
#include "pipeplan/simulate.h"

namespace pipeplan::detail {

/// Position of `stage` among a rank's local stages (meta.stages_of(rank)).
inline int local_chunk(const std::vector<int>& stages, int stage) {
  for (std::size_t c = 0; c < stages.size(); ++c)
    if (stages[c] == stage) return static_cast<int>(c);
  return 0;
}

/// A BATCH_P2P group as drawn: its members' indices [first, first + n) on
/// the rank, from when the rank reached it (its first member posted, and the
/// compute before it ended) to its last member's completion, and its cell,
/// "(0SEND_F1;0RECV_B0)BATCH_P2P".
struct GroupSpan {
  std::size_t first = 0, n = 0;
  double start = 0.0, end = 0.0;
  std::string label;
};

/// The groups of one rank's list, in order, timed by `times` (the rank's row
/// of a timeline of this plan).
inline std::vector<GroupSpan> group_spans(const std::vector<Action>& list,
                                          const std::vector<ActionTime>& times) {
  std::vector<GroupSpan> out;
  double compute_end = 0.0;  // of the last compute before i
  for (std::size_t i = 0; i < list.size();) {
    const std::size_t n = cell_size(list, i);
    if (n > 1) {
      GroupSpan g;
      g.first = i;
      g.n = n;
      g.start = times[i].start;
      g.end = times[i].end;
      for (std::size_t k = i; k < i + n; ++k) {
        g.start = std::min(g.start, times[k].start);
        g.end = std::max(g.end, times[k].end);
      }
      g.start = std::max(g.start, compute_end);
      g.end = std::max(g.end, g.start);
      append_cell(g.label, &list[i], n);
      out.push_back(std::move(g));
    } else if (is_compute(list[i].type)) {
      compute_end = times[i].end;
    }
    i += n;
  }
  return out;
}

/// Whether some rank has OFFLOAD/RELOAD: renderers then draw copy lanes.
inline bool has_copies(const Plan& plan) {
  for (const auto& list : plan.ranks)
    for (const Action& a : list)
      if (is_copy(a.type)) return true;
  return false;
}

/// Renderers draw a timeline of this very plan.
inline void require_timeline(const Plan& plan, const Timeline& t) {
  bool fits = t.times.size() == plan.ranks.size();
  for (std::size_t r = 0; fits && r < plan.ranks.size(); ++r)
    fits = t.times[r].size() == plan.ranks[r].size();
  for (const Transfer& tr : t.transfers)
    fits =
        fits && tr.src_rank >= 0 && tr.dst_rank >= 0 &&
        static_cast<std::size_t>(tr.src_rank) < plan.ranks.size() &&
        static_cast<std::size_t>(tr.dst_rank) < plan.ranks.size() && tr.src_index >= 0 &&
        static_cast<std::size_t>(tr.src_index) <
            plan.ranks[static_cast<std::size_t>(tr.src_rank)].size() &&
        tr.producer < static_cast<int>(plan.ranks[static_cast<std::size_t>(tr.src_rank)].size()) &&
        tr.consumer < static_cast<int>(plan.ranks[static_cast<std::size_t>(tr.dst_rank)].size());
  if (!fits) throw InternalError("render: the timeline does not belong to this plan");
}

/// Refuses a text picture of `rows` lines `columns` wide beyond the limits
/// (limits::kMaxTextColumns wide, limits::kMaxTextChars in all); `at_least`
/// when `columns` is a lower bound, known before the picture is laid out.
inline void check_text_size(std::size_t rows, double columns, const std::string& what,
                            bool at_least = false) {
  const double chars = static_cast<double>(rows) * columns;
  const std::string would = at_least ? " would be at least " : " would be ";
  if (columns > limits::kMaxTextColumns)
    throw InputError(what + would + format_number(columns, 4) +
                     " columns wide, more than the supported " +
                     std::to_string(limits::kMaxTextColumns));
  if (chars > limits::kMaxTextChars)
    throw InputError(what + would + std::to_string(rows) + " rows x " + format_number(columns, 4) +
                     " columns = " + format_number(chars, 4) +
                     " characters, more than the supported " +
                     format_number(limits::kMaxTextChars));
}

/// Renderers draw a finished simulation of this very plan.
inline void require_rendered(const Plan& plan, const SimResult& result) {
  if (!result.ok())
    throw InputError("cannot draw a plan whose simulation failed (" +
                     result.problems.front().message + ")");
  require_timeline(plan, result);
}

}  // namespace pipeplan::detail
