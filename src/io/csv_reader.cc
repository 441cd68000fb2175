// parse_csv_plan: torch.distributed.pipelining `_dump_csv` files, both the
// compute-only form (blank cells are idle slots) and the compute+comms form.
// The metadata a CSV lacks is inferred the way torch's `_load_csv` does.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "io/cell_text.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

// A parsed cell with the 1-based line/column of its first character.
struct Located {
  Action action;
  int line = 0;
  int column = 0;
};

// Names places in the input: "file:line:column" for CSV text, "rank R step S"
// for an in-memory table (line = rank + 1, column = step + 1).
class Locator {
 public:
  Locator(std::string source, bool table) : source_(std::move(source)), table_(table) {}

  [[noreturn]] void error(int line, int column, const std::string& what) const {
    if (table_) throw InputError(source_ + ": " + where(line, column) + ": " + what);
    throw InputError(source_ + ":" + where(line, column) + ": " + what);
  }
  [[noreturn]] void error(const std::string& what) const {
    throw InputError(source_ + ": " + what);
  }

  std::string where(int line, int column) const {
    if (table_) return "rank " + std::to_string(line - 1) + " step " + std::to_string(column - 1);
    return std::to_string(line) + ":" + std::to_string(column);
  }
  std::string where(const Located& l) const { return where(l.line, l.column); }

 private:
  std::string source_;
  bool table_;
};

class CsvReader {
 public:
  CsvReader(std::string_view text, std::string source)
      : text_(text), locator_(std::move(source), false) {}

  [[noreturn]] void error(int line, int column, const std::string& what) const {
    locator_.error(line, column, what);
  }

  // One vector of actions per row; trailing blank lines are not rows.
  std::vector<std::vector<Located>> read_rows() {
    std::vector<std::vector<Located>> rows;
    std::vector<bool> blank;
    std::size_t pos = 0;
    int line = 0;
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos = 3;  // byte order mark
    while (pos < text_.size()) {
      ++line;
      std::size_t end = text_.find('\n', pos);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view body = text_.substr(pos, end - pos);
      if (!body.empty() && body.back() == '\r') body.remove_suffix(1);
      if (line > limits::kMaxRanks)
        error(line, 1,
              "more than " + std::to_string(limits::kMaxRanks) +
                  " rows (the supported number of ranks)");
      rows.push_back(read_line(body, line));
      actions_ += rows.back().size();
      if (actions_ > limits::kMaxActions)
        error(line, 1,
              "more than the supported " + std::to_string(limits::kMaxActions) + " actions");
      blank.push_back(body.find_first_not_of(" \t") == std::string_view::npos);
      pos = end + 1;
    }
    while (!rows.empty() && blank.back()) {
      rows.pop_back();
      blank.pop_back();
    }
    return rows;
  }

 private:
  std::vector<Located> read_line(std::string_view body, int line) {
    std::vector<Located> out;
    std::size_t i = 0;
    while (true) {
      while (i < body.size() && (body[i] == ' ' || body[i] == '\t')) ++i;
      std::string cell;
      std::size_t cell_at = i;  // offset of the cell's first content character
      if (i < body.size() && body[i] == '"') {
        // RFC 4180 quoting, which torch's csv module would also accept.
        ++i;
        cell_at = i;
        bool closed = false;
        while (i < body.size()) {
          if (body[i] == '"') {
            if (i + 1 < body.size() && body[i + 1] == '"') {
              cell += '"';
              i += 2;
              continue;
            }
            closed = true;
            ++i;
            break;
          }
          cell += body[i++];
        }
        if (!closed) error(line, static_cast<int>(cell_at), "unterminated quoted cell");
        while (i < body.size() && (body[i] == ' ' || body[i] == '\t')) ++i;
        if (i < body.size() && body[i] != ',')
          error(line, static_cast<int>(i) + 1, "unexpected text after a quoted cell");
        // Spaces inside the quotes are tolerated like spaces outside.
        std::size_t lead = cell.find_first_not_of(" \t");
        if (lead == std::string::npos) {
          cell.clear();
        } else {
          cell = cell.substr(lead, cell.find_last_not_of(" \t") - lead + 1);
          cell_at += lead;
        }
      } else {
        std::size_t end = body.find(',', i);
        if (end == std::string_view::npos) end = body.size();
        std::string_view raw = body.substr(i, end - i);
        while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t')) raw.remove_suffix(1);
        cell.assign(raw);
        i = end;
      }
      if (!cell.empty()) {
        cell_.clear();
        io::CellError bad;
        if (!io::parse_cell(cell, cell_, bad))
          error(line, static_cast<int>(cell_at + bad.offset) + 1, bad.message);
        for (const Action& a : cell_)
          out.push_back(Located{a, line, static_cast<int>(cell_at) + 1});
      }
      if (i >= body.size()) break;
      ++i;  // the comma
    }
    return out;
  }

  std::string_view text_;
  Locator locator_;
  std::vector<Action> cell_;  // the current cell's actions (reused)
  std::size_t actions_ = 0;
};

// Stages an action touches (an overlap group touches two).
template <typename F>
void for_each_stage(const Action& a, F&& f) {
  f(a.stage);
  if (a.type == ActionType::OverlapFB) f(a.sub_stage);
}

// The metadata a table of actions lacks, inferred as torch's `_load_csv` does,
// and the plan; `reader` names the places of errors.
Plan build_plan(const std::vector<std::vector<Located>>& rows, const Locator& reader,
                const CsvReadOptions& options, const char* empty_what) {
  if (rows.empty()) reader.error(empty_what);

  const int pp = static_cast<int>(rows.size());
  const Located* max_stage_at = nullptr;
  const Located* max_mb_at = nullptr;
  int max_stage = -1, max_mb = -1;
  for (const auto& row : rows)
    for (const auto& l : row) {
      for_each_stage(l.action, [&](int s) {
        if (s > max_stage) {
          max_stage = s;
          max_stage_at = &l;
        }
      });
      if (std::max(l.action.microbatch, l.action.sub_microbatch) > max_mb) {
        max_mb = std::max(l.action.microbatch, l.action.sub_microbatch);
        max_mb_at = &l;
      }
    }
  if (max_stage < 0) reader.error("no actions in any row");
  if (options.schedule.empty()) reader.error("schedule: must not be empty");
  int num_stages = max_stage + 1;
  // A row without actions (an idle rank, as a JSON plan's empty entry is
  // written) owns stages no action names: round up to a multiple of the rows.
  const bool idle_row =
      std::any_of(rows.begin(), rows.end(), [](const auto& row) { return row.empty(); });
  if (idle_row && num_stages % pp != 0) num_stages += pp - num_stages % pp;
  if (num_stages > limits::kMaxStages)
    reader.error(max_stage_at->line, max_stage_at->column,
                 "stage " + std::to_string(max_stage) + " is beyond the supported " +
                     std::to_string(limits::kMaxStages) + " stages");
  if (num_stages % pp != 0)
    reader.error(max_stage_at->line, max_stage_at->column,
                 std::to_string(pp) + " rows (ranks) but stages 0.." + std::to_string(max_stage) +
                     ": the number of stages (" + std::to_string(num_stages) +
                     ") must be a multiple of the number of ranks");

  Plan plan;
  plan.meta.schedule = options.schedule;
  plan.meta.forward_only = options.forward_only;
  plan.meta.pp_degree = pp;
  plan.meta.stages_per_rank = num_stages / pp;
  if (options.num_microbatches) {
    const int m = *options.num_microbatches;
    if (m < 1 || m > limits::kMaxMicrobatches)
      reader.error("the microbatch count " + std::to_string(m) + " is outside the supported 1.." +
                   std::to_string(limits::kMaxMicrobatches));
    plan.meta.num_microbatches = m;
  } else {
    if (max_mb < 0) reader.error("no action names a microbatch; cannot tell the microbatch count");
    plan.meta.num_microbatches = max_mb + 1;
  }
  if (std::string why =
          limits::shape_problem(pp, plan.meta.stages_per_rank, plan.meta.num_microbatches);
      !why.empty()) {
    const Located* at = options.num_microbatches || !max_mb_at ? max_stage_at : max_mb_at;
    reader.error(at->line, at->column, why);
  }

  // Placement: each stage on one rank (like torch's _validate_schedule).
  struct Seen {
    int rank;
    const Located* at;
  };
  std::map<int, Seen> placement;
  for (int r = 0; r < pp; ++r)
    for (const auto& l : rows[static_cast<std::size_t>(r)])
      for_each_stage(l.action, [&](int s) {
        auto [it, inserted] = placement.emplace(s, Seen{r, &l});
        if (!inserted && it->second.rank != r)
          reader.error(l.line, l.column,
                       "stage " + std::to_string(s) + " is on rank " + std::to_string(r) +
                           " here but on rank " + std::to_string(it->second.rank) + " at " +
                           reader.where(*it->second.at) + "; a stage belongs to one rank");
      });

  // First stage whose observed rank disagrees with `mapping`, if any.
  auto mismatch = [&](StageMapping mapping) -> const std::pair<const int, Seen>* {
    PlanMeta m = plan.meta;
    m.mapping = mapping;
    for (const auto& entry : placement)
      if (m.rank_of(entry.first) != entry.second.rank) return &entry;
    return nullptr;
  };
  auto expected_rank = [&](StageMapping mapping, int stage) {
    PlanMeta m = plan.meta;
    m.mapping = mapping;
    return m.rank_of(stage);
  };
  auto runs = [&](const std::pair<const int, Seen>& e) {
    return "rank " + std::to_string(e.second.rank) + " runs stage " + std::to_string(e.first) +
           " (" + to_string(e.second.at->action) + ")";
  };

  if (options.mapping) {
    if (const auto* bad = mismatch(*options.mapping))
      reader.error(bad->second.at->line, bad->second.at->column,
                   runs(*bad) + ", but stage_to_rank " + std::string(to_string(*options.mapping)) +
                       " places stage " + std::to_string(bad->first) + " on rank " +
                       std::to_string(expected_rank(*options.mapping, bad->first)));
    plan.meta.mapping = *options.mapping;
  } else {
    const auto* loop_bad = mismatch(StageMapping::Loop);
    const auto* v_bad = loop_bad ? mismatch(StageMapping::V) : nullptr;
    if (!loop_bad) {
      plan.meta.mapping = StageMapping::Loop;
    } else if (!v_bad) {
      plan.meta.mapping = StageMapping::V;
    } else {
      const std::string loop_rank =
          std::to_string(expected_rank(StageMapping::Loop, loop_bad->first));
      const std::string v_rank = std::to_string(expected_rank(StageMapping::V, v_bad->first));
      std::string why = loop_bad == v_bad && loop_rank == v_rank
                            ? runs(*loop_bad) + ", which both place on rank " + loop_rank
                            : runs(*loop_bad) + ", which loop places on rank " + loop_rank + "; " +
                                  runs(*v_bad) + " at " + reader.where(*v_bad->second.at) +
                                  ", which v places on rank " + v_rank;
      reader.error(loop_bad->second.at->line, loop_bad->second.at->column,
                   "stage placement fits neither stage_to_rank loop nor v: " + why);
    }
  }

  for (int r = 0; r < pp; ++r) {
    std::vector<Action> list;
    list.reserve(rows[static_cast<std::size_t>(r)].size());
    for (const auto& l : rows[static_cast<std::size_t>(r)]) list.push_back(l.action);
    plan.rank_ids.push_back(r);
    plan.ranks.push_back(std::move(list));
  }
  return plan;
}

}  // namespace

Plan parse_csv_plan(std::string_view text, const std::string& source,
                    const CsvReadOptions& options) {
  CsvReader reader(text, source);
  return build_plan(reader.read_rows(), Locator(source, false), options,
                    "empty file: expected one row of actions per rank");
}

Plan parse_action_table(const std::vector<std::vector<std::optional<std::string>>>& rows,
                        const std::string& source, const CsvReadOptions& options) {
  const Locator locator(source, true);
  if (rows.size() > static_cast<std::size_t>(limits::kMaxRanks))
    locator.error("more than " + std::to_string(limits::kMaxRanks) + " ranks");
  std::vector<std::vector<Located>> located(rows.size());
  std::vector<Action> cell;  // one cell's actions (reused)
  for (std::size_t r = 0; r < rows.size(); ++r) {
    located[r].reserve(rows[r].size());
    for (std::size_t k = 0; k < rows[r].size(); ++k) {
      if (!rows[r][k]) continue;  // an idle step
      const std::string& text = *rows[r][k];
      const int line = static_cast<int>(r) + 1, column = static_cast<int>(k) + 1;
      cell.clear();
      io::CellError bad;
      if (!io::parse_cell(text, cell, bad)) locator.error(line, column, bad.message);
      for (const Action& a : cell) located[r].push_back(Located{a, line, column});
    }
  }
  return build_plan(located, locator, options, "no ranks: expected one list of actions per rank");
}

}  // namespace pipeplan
