// Internal: the cells of a plan's rows, shared by the plan writers (CSV,
// torch's CSV, JSON, text): one action each, a BATCH_P2P group one cell.
#pragma once

#include <string>

#include "pipeplan/error.h"
#include "pipeplan/ir.h"

namespace pipeplan::detail {

/// Throws InputError when a rank's group marks cannot be written in the
/// grammar (a plan built in code; the readers never make one), naming the
/// rank, the index and why; `format` names the writer.
inline void refuse_bad_groups(const Plan& plan, const char* format) {
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    std::string why;
    const long at = first_bad_group(plan.ranks[r], &why);
    if (at >= 0)
      throw InputError(std::string(format) + ": rank " + std::to_string(plan.rank_ids[r]) +
                       " index " + std::to_string(at) + ": " + why);
  }
}

/// Appends a rank's cells to `line`, each between `quote`s when given,
/// separated by `sep`.
inline void append_cells(std::string& line, const std::vector<Action>& actions, const char* sep,
                         char quote = '\0') {
  for (std::size_t i = 0; i < actions.size();) {
    if (i) line += sep;
    if (quote) line += quote;
    const std::size_t n = cell_size(actions, i);
    append_cell(line, &actions[i], n);
    if (quote) line += quote;
    i += n;
  }
}

}  // namespace pipeplan::detail
