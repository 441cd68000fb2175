// write_csv and write_text: the row-per-rank formats.
#include "pipeplan/emit.h"
#include "pipeplan/error.h"

namespace pipeplan {

// torch's `_dump_csv` writes rank rows 0..pp-1 with csv.writer; action
// strings never need quoting. A CSV row carries no rank id, so only whole
// plans can be written (a single-rank plan would read back as pp = 1).
void write_csv(const Plan& plan, std::ostream& out) {
  if (!plan.is_whole())
    throw InputError("CSV holds every rank of a plan (one row each); this plan holds " +
                     std::to_string(plan.ranks.size()) + " of " +
                     std::to_string(plan.meta.pp_degree) + " ranks: write it as json or text");
  // A reader drops trailing blank lines (editors add them), so an empty
  // rank at the end is written as one quoted empty cell: it reads back as a
  // rank with no actions (torch's csv reader sees one blank cell, an idle
  // slot), and JSON -> CSV -> JSON keeps pp_degree.
  std::size_t last_busy = 0;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    if (!plan.ranks[r].empty()) last_busy = r + 1;
  std::string line;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    const auto& actions = plan.ranks[r];
    if (r >= last_busy) {
      out << "\"\"\n";
      continue;
    }
    line.clear();
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (i) line += ',';
      append_to(line, actions[i]);
    }
    line += '\n';
    out << line;
  }
}

void write_text(const Plan& plan, std::ostream& out) {
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    out << "rank " << plan.rank_ids[r] << ':';
    if (!plan.ranks[r].empty()) out << ' ' << to_string(plan.ranks[r]);
    out << '\n';
  }
}

}  // namespace pipeplan
