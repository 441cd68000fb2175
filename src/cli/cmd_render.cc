// pipeplan render: draw a simulated plan as SVG, Chrome trace or text.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sim_options.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/render.h"
#include "pipeplan/trace.h"

namespace pipeplan::cli {
namespace {
struct RenderArgs {
  PlanSource source;
  CostArgs costs;
  std::string svg, chrome_trace;
  bool text = false;
  SvgOptions svg_options;
  TextTimelineOptions text_options;
  bool no_title = false;
  std::string trace;
  int step = 0;
};

// Draws a measured run (pipeplan train --trace) instead of a simulation.
int render_trace(const RenderArgs& args) {
  const std::string source = args.trace == "-" ? "<stdin>" : args.trace;
  const Trace trace = parse_trace_json(read_input(args.trace), source);
  const std::vector<std::string> problems = check_trace(trace);
  if (!problems.empty()) {
    std::string list;
    for (const std::string& p : problems) list += "\n  " + p;
    throw InputError(source + ": the trace is not consistent with its plan:" + list);
  }
  const int steps = trace.num_steps();
  const int step = args.step > 0 ? args.step : steps;
  if (step > steps)
    throw InputError("--step " + std::to_string(step) + ": the trace has steps 1.." +
                     std::to_string(steps));
  const Timeline one = step_timeline(trace, step);
  if (!args.svg.empty()) {
    SvgOptions o = args.svg_options;
    o.title = !args.no_title;
    o.note = "measured step " + std::to_string(step) + " of " + std::to_string(steps) + ", ms";
    Output out(args.svg);
    write_svg(trace.plan, one, o, out.stream());
    out.close();
  }
  if (!args.chrome_trace.empty()) {
    Output out(args.chrome_trace);
    write_trace_chrome(trace, out.stream());
    out.close();
  }
  if (args.text) {
    write_text_timeline(trace.plan, one, args.text_options, std::cout);
    std::cout.flush();
  }
  return kExitOk;
}
}  // namespace

std::function<int()> setup_render(CLI::App& app) {
  auto args = std::make_shared<RenderArgs>();
  add_plan_source(app, args->source);
  add_cost_options(app, args->costs);
  app.add_option("--svg", args->svg, "Write an SVG timeline to this file ('-': stdout)");
  app.add_option("--chrome-trace", args->chrome_trace,
                 "Write a Chrome trace (Perfetto, chrome://tracing) to this file ('-': stdout)");
  app.add_flag("--text", args->text, "Print a text timeline scaled to time on stdout");
  app.add_flag("--arrows", args->svg_options.arrows, "SVG: draw an arrow for every transfer");
  app.add_option("--px-per-unit", args->svg_options.px_per_unit,
                 "SVG: horizontal scale (default: about 960 px wide)")
      ->check(number_in(0, limits::kMaxSvgWidth, /*above_min=*/true));
  app.add_flag("--no-title", args->no_title, "SVG: leave out the title line");
  app.add_option("--columns", args->text_options.max_columns,
                 "Text: widest timeline the automatic scale may produce")
      ->check(integer_in(1, limits::kMaxTextColumns, " columns"));
  app.add_option("--columns-per-unit", args->text_options.columns_per_unit,
                 "Text: fixed scale instead of the automatic one")
      ->check(number_in(0, limits::kMaxTextColumns, /*above_min=*/true));
  app.add_option("--trace", args->trace,
                 "Draw a measured run (pipeplan train --trace FILE) instead of a simulation");
  app.add_option("--step", args->step, "With --trace: the step to draw (default: the last)")
      ->check(integer_in(1, 1 << 30));
  return [args, &app]() {
    if (args->svg.empty() && args->chrome_trace.empty() && !args->text)
      throw InputError("nothing to render: give --svg FILE, --chrome-trace FILE and/or --text");
    if (args->svg == "-" && args->chrome_trace == "-")
      throw InputError("--svg and --chrome-trace cannot both write to stdout");
    if (!args->trace.empty()) {
      if (!args->source.file.empty() || app.count("--schedule") > 0)
        throw InputError("give either --trace FILE or a plan (FILE or -s ...), not both");
      return render_trace(*args);
    }
    // A picture too large to load anywhere is refused before simulating.
    const bool picture = !args->svg.empty() || !args->chrome_trace.empty();
    const Simulated sim =
        load_and_simulate(args->source, args->costs, app, [picture](const Plan& p) {
          if (std::string why = picture ? picture_problem(p) : ""; !why.empty())
            throw InputError(why);
        });
    if (sim.exit_code != 0) return sim.exit_code;
    const Plan& plan = sim.plan;
    const SimResult& result = sim.result;
    if (!result.ok()) return report_invalid("cannot draw: the simulation failed", result.problems);
    args->svg_options.title = !args->no_title;
    if (!args->svg.empty()) {
      Output out(args->svg);
      write_svg(plan, result, args->svg_options, out.stream());
      out.close();
    }
    if (!args->chrome_trace.empty()) {
      Output out(args->chrome_trace);
      write_chrome_trace(plan, result, out.stream());
      out.close();
    }
    if (args->text) {
      write_text_timeline(plan, result, args->text_options, std::cout);
      std::cout.flush();
    }
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
