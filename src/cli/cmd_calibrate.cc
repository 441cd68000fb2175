// pipeplan calibrate: per-stage durations and the transfer cost of a
// measured run (pipeplan train --trace), as a stage-costs file that
// `pipeplan simulate --stage-costs FILE` reads in milliseconds.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "ir/numbers.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/simulate.h"
#include "pipeplan/trace.h"

namespace pipeplan::cli {
namespace {

struct CalibrateArgs {
  std::string trace;
  std::string output;
  std::string model = "rendezvous";
};

std::string ms(double v) { return detail::format_number(v, 3) + " ms"; }

}  // namespace

std::function<int()> setup_calibrate(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  app.add_option("trace", args->trace,
                 "Trace of a measured run (pipeplan train --trace FILE, Chrome trace or the "
                 "JSON table), or - for stdin")
      ->required();
  app.add_option("-o,--output", args->output, "Stage-costs file to write (default: stdout)");
  app.add_option("--model", args->model, "Transport model of the check simulation")
      ->check(CLI::IsMember({"rendezvous", "eager", "serial"}));
  return [args]() {
    const std::string source = args->trace == "-" ? "<stdin>" : args->trace;
    const Trace trace = parse_trace_json(read_input(args->trace), source);
    const Calibration c = calibrate(trace);

    std::ostringstream file;
    write_calibration_json(c, file);
    Output out(args->output);
    out.stream() << file.str();
    out.close();

    // The check: the measured plan simulated with exactly these costs.
    SimOptions options;
    options.costs = cost_model_of(read_stage_costs(file.str(), "calibration"));
    options.transport = *parse_transport(args->model);
    const SimResult sim = simulate(trace.plan, options);
    spdlog::info(
        "calibrated {} (pp {}, {} microbatches, {} stages per rank) from {} step(s){}",
        limits::excerpt(c.schedule), c.pp_degree, c.num_microbatches, c.stages_per_rank,
        c.steps_used,
        trace.num_steps() > 1 ? " (step 1 dropped)" : " (only one step: warm-up included)");
    for (const auto& [stage, d] : c.stage_ms) {
      auto it = c.derived.find(stage);
      spdlog::info("  stage {}: F {}  B {}  I {}  W {}{}; posts before a compute {}", stage,
                   ms(d.f), ms(d.b), ms(d.i), ms(d.w),
                   it == c.derived.end() ? "" : "  (derived: " + it->second + ")",
                   ms(c.host_overhead_ms.at(stage)));
    }
    if (c.transfers_used == 0)
      spdlog::warn("no transfer had its receiver waiting for it: transfer cost left at 0");
    else
      spdlog::info(
          "  transfer: latency {}{} ({} transfers, median {} bytes)", ms(c.comm_latency_ms),
          c.comm_bandwidth > 0
              ? ", bandwidth " + detail::format_number(c.comm_bandwidth * 1e-3, 1) + " MB/s"
              : std::string(" (payloads of one size: latency only)"),
          c.transfers_used, detail::format_number(c.transfer_bytes, 0));
    if (sim.ok() && c.measured_step_ms > 0) {
      auto rel = [&](double t) {
        const double err = (t - c.measured_step_ms) / c.measured_step_ms;
        return std::string(err >= 0 ? "+" : "") + detail::format_number(err * 100, 1) + "%";
      };
      // The same without the host time of posts: what the computes alone predict.
      SimOptions bare = options;
      bare.costs.stage_scales = c.compute_only_ms;
      const SimResult sim_bare = simulate(trace.plan, bare);
      spdlog::info(
          "measured step {} (median), simulated with these costs {} ({}); computes "
          "alone, posts free: {} ({})",
          ms(c.measured_step_ms), ms(sim.makespan), rel(sim.makespan), ms(sim_bare.makespan),
          rel(sim_bare.makespan));
    } else if (!sim.ok()) {
      spdlog::warn("the check simulation failed under {}: {}", args->model,
                   sim.problems.front().message);
    }
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
