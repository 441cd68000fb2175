// Internal: helpers shared by the SVG, Chrome-trace and text renderers.
#pragma once

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
