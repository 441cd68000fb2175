// write_csv, write_torch_csv and write_text: the row-per-rank formats.
#include "emit/plan_cells.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/torch_runtime.h"

namespace pipeplan {
namespace {

// A CSV row carries no rank id, so only whole plans can be written (a
// single-rank plan would read back as pp = 1).
void refuse_partial(const Plan& plan, const char* format) {
  if (!plan.is_whole())
    throw InputError(std::string(format) +
                     " holds every rank of a plan (one row each); this plan holds " +
                     std::to_string(plan.ranks.size()) + " of " +
                     std::to_string(plan.meta.pp_degree) + " ranks: write it as json or text");
}

// The first cell torch's `_load_csv` cannot read, refused with what to do
// instead: torch's `_Action.from_str` knows single actions and the
// (F;B)OVERLAP_F_B pair, not a group of sends and receives.
void refuse_what_torch_cannot_read(const Plan& plan) {
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    const auto& list = plan.ranks[r];
    for (std::size_t i = 0; i < list.size();) {
      const std::size_t n = cell_size(list, i);
      if (n > 1 || list[i].waited) {
        std::string cell;
        append_cell(cell, &list[i], n);
        throw InputError("torch-csv: rank " + std::to_string(r) + " index " + std::to_string(i) +
                         ": " + cell +
                         " is a batched P2P group, which torch's _load_csv cannot read; a plan "
                         "with groups is written as pipeplan's CSV (-f csv) or JSON");
      }
      i += n;
    }
  }
}

// One rank's row in torch's compute_comms dialect. torch 2.15's runtime
// (`_validate_send_waits`, `_prepare_schedule_with_comms` in
// torch/distributed/pipelining/schedules.py) retires a send only at its
// `<s>WAIT_SEND_F<mb>` / `<s>WAIT_SEND_B<mb>` and refuses a `REDUCE_GRAD`
// without its `WAIT_REDUCE_GRAD`, so a row with sends gets the waits where
// torch's own `_add_wait_send` puts them: a forward send's wait right after
// the local backward of that stage and microbatch (the peer has consumed the
// activation by then), every other send's wait at the end of the row, and
// each REDUCE_GRAD's wait right after it. A compute-only row has none, and
// so does every row for a runtime without the waits (`waits` false: torch
// before 2.15 retires sends itself and refuses the tokens).
void append_torch_row(std::string& line, const std::vector<Action>& actions, bool waits) {
  std::vector<std::pair<std::int32_t, std::int32_t>> pending_f;  // SEND_F (stage, mb)
  std::vector<std::pair<std::int32_t, std::int32_t>> pending_b;  // SEND_B (stage, mb)
  auto cell = [&](const std::string& text) {
    if (!line.empty()) line += ',';
    line += text;
  };
  auto wait_f_after_backward = [&](std::int32_t stage, std::int32_t mb) {
    for (auto it = pending_f.begin(); it != pending_f.end(); ++it)
      if (it->first == stage && it->second == mb) {
        cell(std::to_string(stage) + "WAIT_SEND_F" + std::to_string(mb));
        pending_f.erase(it);
        return;
      }
  };
  for (std::size_t i = 0; i < actions.size();) {
    const std::size_t n = cell_size(actions, i);
    std::string text;
    append_cell(text, &actions[i], n);
    cell(text);
    const Action& a = actions[i];
    i += n;
    if (!waits) continue;
    switch (a.type) {
      case ActionType::SendF: pending_f.emplace_back(a.stage, a.microbatch); break;
      case ActionType::SendB: pending_b.emplace_back(a.stage, a.microbatch); break;
      case ActionType::B:
      case ActionType::I: wait_f_after_backward(a.stage, a.microbatch); break;
      case ActionType::OverlapFB: wait_f_after_backward(a.sub_stage, a.sub_microbatch); break;
      case ActionType::ReduceGrad: cell(std::to_string(a.stage) + "WAIT_REDUCE_GRAD"); break;
      default: break;
    }
  }
  for (const auto& [s, mb] : pending_f)
    cell(std::to_string(s) + "WAIT_SEND_F" + std::to_string(mb));
  for (const auto& [s, mb] : pending_b)
    cell(std::to_string(s) + "WAIT_SEND_B" + std::to_string(mb));
}

}  // namespace

// torch's `_dump_csv` writes rank rows 0..pp-1 with csv.writer; action
// strings never need quoting.
void write_csv(const Plan& plan, std::ostream& out) {
  refuse_partial(plan, "CSV");
  // A row holds actions only: nowhere to say which stages a microbatch crosses.
  if (plan.meta.has_routes())
    throw InputError("CSV cannot carry microbatch routes (the " + plan.meta.schedule +
                     " plan routes its microbatches over part of the stages): write it as json");
  detail::refuse_bad_groups(plan, "csv");
  // A reader drops trailing blank lines (editors add them), so an empty
  // rank at the end is written as one quoted empty cell: it reads back as a
  // rank with no actions (torch's csv reader sees one blank cell, an idle
  // slot), and JSON -> CSV -> JSON keeps pp_degree.
  std::size_t last_busy = 0;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    if (!plan.ranks[r].empty()) last_busy = r + 1;
  std::string line;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    if (r >= last_busy) {
      out << "\"\"\n";
      continue;
    }
    line.clear();
    detail::append_cells(line, plan.ranks[r], ",");
    line += '\n';
    out << line;
  }
}

// What torch's `_dump_csv` writes for the same order: Python's csv.writer
// ends rows with "\r\n" and writes an empty rank as an empty row; rows with
// sends carry the target's WAIT_SEND_* / WAIT_REDUCE_GRAD when it has them
// (append_torch_row). Nothing the target cannot read gets out.
void write_torch_csv(const Plan& plan, std::ostream& out, TorchVersion target) {
  refuse_partial(plan, "torch-csv");
  detail::refuse_bad_groups(plan, "torch-csv");
  refuse_what_torch_cannot_read(plan);
  if (std::string why = torch_dialect_refusal(plan); !why.empty())
    throw InputError("torch-csv: " + why);
  if (std::string why = torch_version_refusal(plan, target); !why.empty())
    throw InputError("torch-csv: " + why);
  const bool waits = torch_runtime(target).send_waits;
  std::string line;
  for (const auto& actions : plan.ranks) {
    line.clear();
    append_torch_row(line, actions, waits);
    line += "\r\n";
    out << line;
  }
}

void write_text(const Plan& plan, std::ostream& out) {
  detail::refuse_bad_groups(plan, "text");
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    out << "rank " << plan.rank_ids[r] << ':';
    if (!plan.ranks[r].empty()) out << ' ' << to_string(plan.ranks[r]);
    out << '\n';
  }
}

}  // namespace pipeplan
