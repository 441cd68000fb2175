// Text timeline scaled to simulated time (the unit-step view is
// write_timeline in plan_timeline.cc).
#include <algorithm>
#include <cmath>
#include <string>

#include "emit/render_util.h"
#include "ir/numbers.h"
#include "pipeplan/limits.h"
#include "pipeplan/render.h"

namespace pipeplan {
namespace {

using detail::format_number;

// "F3"; lowercase for a rank's odd-numbered local stage so interleaved
// chunks stay apart; overlapped groups read "F3/B1".
std::string label(const Action& a, const std::vector<int>& stages) {
  auto letter = [&](char upper, int stage) {
    return detail::local_chunk(stages, stage) % 2 == 1 ? static_cast<char>(upper - 'A' + 'a')
                                                       : upper;
  };
  if (a.type == ActionType::OverlapFB)
    return letter('F', a.stage) + std::to_string(a.microbatch) + "/" + letter('B', a.sub_stage) +
           std::to_string(a.sub_microbatch);
  const char type = a.type == ActionType::Reload ? 'L' : to_string(a.type)[0];  // R: RECOMPUTE
  return letter(type, a.stage) + std::to_string(a.microbatch);
}

// Columns per time unit: the shortest action fits its label (+1 space),
// unless that would exceed the width limit.
double pick_scale(const Plan& plan, const Timeline& result, const TextTimelineOptions& options) {
  if (options.columns_per_unit > 0) return options.columns_per_unit;
  double shortest = 0;
  std::size_t longest_label = 2;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    const std::vector<int> stages = plan.meta.stages_of(plan.rank_ids[r]);
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
      const Action& a = plan.ranks[r][i];
      if (!is_compute(a.type)) continue;
      const double d = result.times[r][i].end - result.times[r][i].start;
      if (d > 0 && (shortest == 0 || d < shortest)) shortest = d;
      longest_label = std::max(longest_label, label(a, stages).size());
    }
  }
  if (shortest == 0 || result.makespan <= 0) return 1;
  double scale = std::ceil(static_cast<double>(longest_label + 1) / shortest);
  const double limit = std::max(1, options.max_columns) / result.makespan;
  return std::min(scale, limit);
}

}  // namespace

void write_text_timeline(const Plan& plan, const SimResult& result,
                         const TextTimelineOptions& options, std::ostream& out) {
  detail::require_rendered(plan, result);
  write_text_timeline(plan, static_cast<const Timeline&>(result), options, out);
}

void write_text_timeline(const Plan& plan, const Timeline& result,
                         const TextTimelineOptions& options, std::ostream& out) {
  detail::require_timeline(plan, result);
  if (options.max_columns > limits::kMaxTextColumns)
    throw InputError("a text timeline " + std::to_string(options.max_columns) +
                     " columns wide is more than the supported " +
                     std::to_string(limits::kMaxTextColumns));
  const double scale = pick_scale(plan, result, options);
  if (!(scale > 0) || !(result.makespan * scale <= limits::kMaxTextColumns))
    throw InputError(
        "a text timeline at " + format_number(scale, 4) + " columns per time unit would be " +
        format_number(result.makespan * scale, 4) + " columns wide, more than the supported " +
        std::to_string(limits::kMaxTextColumns));
  const auto col = [&](double t) { return static_cast<std::size_t>(std::llround(t * scale)); };
  const std::size_t width = col(result.makespan);
  detail::check_text_size(
      plan.ranks.size() + 1, static_cast<double>(width),
      "a text timeline at " + format_number(scale, 4) + " columns per time unit");
  const std::string pad = "rank " + std::to_string(plan.meta.pp_degree - 1) + " |";

  // Time axis: a tick label every few columns, at round times.
  double step = 1;
  for (double m : {1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
                   1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6}) {
    step = m;
    if (m * scale >= 8) break;
  }
  std::string axis(width + 8, ' ');
  for (double t = 0; t <= result.makespan + 1e-9; t += step) {
    const std::string s = format_number(t, 3);
    const std::size_t c = col(t);
    if (c + s.size() <= axis.size()) axis.replace(c, s.size(), s);
  }
  while (!axis.empty() && axis.back() == ' ') axis.pop_back();
  out << std::string(pad.size() - 6, ' ') << "time |" << axis << "\n";

  bool any_group = false;
  // A rank's compute stream, and (plans with OFFLOAD/RELOAD) its copy stream.
  const bool copies = detail::has_copies(plan);
  const auto lane = [&](std::size_t r, bool copy) {
    std::string line(width, copy ? ' ' : '.');
    const std::vector<int> stages = plan.meta.stages_of(plan.rank_ids[r]);
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
      const Action& a = plan.ranks[r][i];
      if (copy ? !is_copy(a.type) : !is_compute(a.type)) continue;
      std::size_t c0 = col(result.times[r][i].start), c1 = col(result.times[r][i].end);
      if (c0 >= width) continue;
      if (c1 <= c0) c1 = c0 + 1;  // keep very short actions visible
      c1 = std::min(c1, width);
      const std::string l = label(a, stages);
      // A label that does not fit shrinks to its type letter.
      const std::string shown = l.size() <= c1 - c0 ? l : l.substr(0, 1);
      line.replace(c0, c1 - c0, std::string(c1 - c0, copy ? '-' : ' '));
      line.replace(c0, shown.size(), shown);
    }
    // Idle inside a BATCH_P2P group (posted, not yet ended): '='.
    if (!copy) {
      for (const detail::GroupSpan& g : detail::group_spans(plan.ranks[r], result.times[r])) {
        const std::size_t g1 = std::min(col(g.end), width);
        for (std::size_t c = col(g.start); c < g1; ++c)
          if (line[c] == '.') line[c] = '=';
        any_group = true;
      }
    }
    return line;
  };
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    std::string head = "rank " + std::to_string(plan.rank_ids[r]) + " |";
    out << std::string(pad.size() - head.size(), ' ') << head << lane(r, false) << "|\n";
    if (copies) out << std::string(pad.size() - 6, ' ') << "copy |" << lane(r, true) << "|\n";
  }
  out << "scale: 1 column = " << format_number(1 / scale, 4)
      << " time units; F forward, B backward, I input grad, W weight grad, F3/B1 overlapped,"
         " '.' idle";
  if (plan.has_memory_actions()) out << "; R recompute, O offload, L reload (copy stream)";
  if (plan.meta.stages_per_rank > 1) out << "; lowercase: odd local stage";
  if (any_group) out << "; '=' in a BATCH_P2P group";
  out << "\nmakespan " << format_number(result.makespan) << ", bubble "
      << detail::percent(result.bubble_fraction) << "\n";
}

}  // namespace pipeplan
