// Pictures of a simulated plan: SVG, Chrome trace (Perfetto) and a text
// timeline scaled to time. Renderers write to a stream; they never open files.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/simulate.h"

namespace pipeplan {

struct SvgOptions {
  double px_per_unit = 0.0;  ///< horizontal scale; 0 picks one (~960 px wide)
  bool arrows = false;       ///< draw an arrow for every transfer
  bool title = true;         ///< schedule, shape, makespan and bubble on top
  std::string note;          ///< appended to the title, e.g. "measured step 3, ms"
};

/// Why a picture of a simulated `plan` is refused, or "" when it is not:
/// more than limits::kMaxDrawnActions compute actions to draw (an SVG or a
/// Chrome trace that large loads in no viewer). write_svg and
/// write_chrome_trace of a SimResult refuse it (InputError); callers may ask
/// first, before simulating. Measured traces are drawn whatever their size
/// (their output follows the input file).
std::string picture_problem(const Plan& plan);

/// One row per rank, time to scale, one colour per action type (lighter for
/// later local stages), microbatch labels, a time axis and a legend.
/// Precondition: `result` is simulate(plan, ...) and ok().
void write_svg(const Plan& plan, const SimResult& result, const SvgOptions& options,
               std::ostream& out);
/// The same for any timeline (a measured step); the title says "measured".
void write_svg(const Plan& plan, const Timeline& timeline, const SvgOptions& options,
               std::ostream& out);

/// Chrome trace JSON (loads in Perfetto and chrome://tracing): one track per
/// rank (pid 0, tid = rank), an "X" slice per compute action named in the
/// torch grammar ("2F5"; 1 time unit = 1 ms; args.step = 1), and an "s"/"f"
/// flow from each value's producer to its consumer.
void write_chrome_trace(const Plan& plan, const SimResult& result, std::ostream& out);
void write_chrome_trace(const Plan& plan, const Timeline& timeline, std::ostream& out);

/// What a multi-step trace says about itself.
struct ChromeTraceInfo {
  std::string label = "pipeplan";                ///< process name prefix
  std::string time_unit = "1 cost unit = 1 ms";  ///< otherData.time_unit
  /// Raw JSON value written as the top-level member "pipeplan" (viewers
  /// ignore it; a measured trace keeps its records there). Empty: none.
  std::string embedded;
};
/// Several steps of one plan on one clock (a measured run, trace.h): the same
/// layout, every slice and flow with args.step = its step number from 1.
void write_chrome_trace(const Plan& plan, const std::vector<Timeline>& steps,
                        const ChromeTraceInfo& info, std::ostream& out);

struct TextTimelineOptions {
  double columns_per_unit = 0.0;  ///< 0 picks one so labels fit, within max_columns
  int max_columns = 160;          ///< width limit of the automatic scale
};

/// One line per rank; each compute action spans columns proportional to its
/// duration and starts with its label ("F3", "B0", "F3/B1"); idle is '.'.
void write_text_timeline(const Plan& plan, const SimResult& result,
                         const TextTimelineOptions& options, std::ostream& out);
void write_text_timeline(const Plan& plan, const Timeline& timeline,
                         const TextTimelineOptions& options, std::ostream& out);

}  // namespace pipeplan
