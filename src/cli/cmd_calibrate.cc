// pipeplan calibrate: per-stage durations and the transfer cost of a
// measured run (pipeplan train --trace, or torch.profiler traces of torch's
// schedule runtime), as a stage-costs file that `pipeplan simulate
// --stage-costs FILE` reads in milliseconds.
#include <spdlog/spdlog.h>
#include <zlib.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/runtime_option.h"
#include "ir/numbers.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/simulate.h"
#include "pipeplan/trace.h"

namespace pipeplan::cli {
namespace {

struct CalibrateArgs {
  std::vector<std::string> traces;
  std::string output;
  std::string model = "rendezvous";
  std::string plan;
  CsvReadOptions csv;
};

std::string ms(double v) { return detail::format_number(v, 3) + " ms"; }

// The files behind the arguments: a folder stands for the .json files
// under it (torchtitan's save_traces_folder/iteration_N/rankR_trace.json).
std::vector<std::string> trace_files(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::error_code ec;
    if (a == "-" || !fs::is_directory(a, ec)) {
      out.push_back(a);
      continue;
    }
    std::vector<std::string> found;
    for (auto it = fs::recursive_directory_iterator(a, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      auto ends = [&name](const char* tail) {
        const std::size_t n = std::char_traits<char>::length(tail);
        return name.size() > n && name.compare(name.size() - n, n, tail) == 0;
      };
      if (it->is_regular_file(ec) && (ends(".json") || ends(".json.gz")))
        found.push_back(it->path().string());
    }
    if (ec) throw InputError(a + ": cannot list the folder: " + ec.message());
    if (found.empty()) throw InputError(a + ": no .json trace under this folder");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

// torch.profiler's traces as torchtitan keeps them (rankR_trace.json.gz):
// a gzip stream (magic 1f 8b, whatever the name) is inflated here, bounded
// by the input limit; anything else is returned as it is.
std::string gunzip_if_compressed(std::string data, const std::string& source) {
  if (data.size() < 2 || static_cast<unsigned char>(data[0]) != 0x1f ||
      static_cast<unsigned char>(data[1]) != 0x8b)
    return data;
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
    throw InputError(source + ": cannot start decompressing the gzip trace");
  z.next_in = reinterpret_cast<Bytef*>(data.data());
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      throw InputError(source + ": a damaged gzip trace (" + (z.msg ? z.msg : "inflate failed") +
                       ")");
    }
    out.append(buf, sizeof buf - z.avail_out);
    if (out.size() > limits::kMaxInputBytes) {
      inflateEnd(&z);
      throw InputError(source + ": the decompressed trace is larger than the supported " +
                       std::to_string(limits::kMaxInputBytes) + " bytes");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      throw InputError(source + ": a truncated gzip trace");
    }
  }
  inflateEnd(&z);
  return out;
}

// "rank3_trace.json" -> 3 (the last "rank<digits>" in the file name); -1.
int rank_from_name(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  int rank = -1;
  for (std::size_t at = name.find("rank"); at != std::string::npos;
       at = name.find("rank", at + 1)) {
    std::size_t i = at + 4, n = 0;
    long long v = 0;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9' && n < 7)
      v = v * 10 + (name[i++] - '0'), ++n;
    if (n > 0) rank = static_cast<int>(v);
  }
  return rank;
}

bool is_pipeplan_trace(const std::string& text) {
  return text.find(std::string("\"") + kTraceFormatName + "\"") != std::string::npos;
}

// The measured run: pipeplan's own trace, or torch.profiler traces.
Trace load_trace(const CalibrateArgs& args) {
  const std::vector<std::string> files = trace_files(args.traces);
  std::vector<TorchRankTrace> torch;
  for (const std::string& f : files) {
    const std::string source = f == "-" ? "<stdin>" : f;
    const std::string text = gunzip_if_compressed(read_input(f), source);
    if (is_pipeplan_trace(text)) {
      if (files.size() != 1)
        throw InputError(source + ": a pipeplan trace holds every rank; give it alone");
      if (!args.plan.empty())
        throw InputError("--plan is for torch traces (a pipeplan trace carries its plan)");
      return parse_trace_json(text, source);
    }
    TorchRankTrace t = parse_torch_trace(text, source);
    if (t.rank < 0) t.rank = rank_from_name(f);
    torch.push_back(std::move(t));
  }
  TorchImportOptions options;
  options.csv = args.csv;
  if (!args.plan.empty()) options.plan = load_plan(args.plan, args.csv);
  TorchImportReport rep;
  Trace trace = import_torch_traces(torch, options, &rep);
  spdlog::info(
      "torch traces: {} file(s), {} ranks, {} step(s){}, {} action spans, {} timed by their GPU "
      "kernels ({} kernels linked){}",
      torch.size(), rep.ranks, rep.steps, rep.used_profiler_steps ? " (ProfilerStep spans)" : "",
      rep.actions, rep.device_timed, rep.kernels_linked,
      rep.device_timed == 0 ? "; no device events: host spans used" : "");
  return trace;
}

}  // namespace

std::function<int()> setup_calibrate(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  app.add_option("traces", args->traces,
                 "Trace of a measured run: pipeplan train --trace FILE (Chrome trace or the JSON "
                 "table), or torch.profiler traces of torch's schedule runtime, one per rank "
                 "(files or folders of them, e.g. torchtitan's save_traces_folder); - for stdin")
      ->required();
  app.add_option("--plan", args->plan,
                 "torch traces: the plan the run executed (JSON or CSV; default: the order in "
                 "the traces)");
  add_csv_options(app, args->csv);
  app.add_option("-o,--output", args->output, "Stage-costs file to write (default: stdout)");
  app.add_option("--model", args->model, "Transport model of the check simulation")
      ->check(CLI::IsMember(model_names()));
  return [args]() {
    const Trace trace = load_trace(*args);
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
      const auto missing = c.unmeasured.find(stage);
      const auto shown = [&](char letter, double v) {
        const bool none =
            missing != c.unmeasured.end() && missing->second.find(letter) != std::string::npos;
        return none ? std::string("not measured") : ms(v);
      };
      spdlog::info("  stage {}: F {}  B {}  I {}  W {}{}; posts before a compute {}", stage,
                   shown('F', d.f), shown('B', d.b), shown('I', d.i), shown('W', d.w),
                   it == c.derived.end() ? "" : "  (derived: " + it->second + ")",
                   ms(c.host_overhead_ms.at(stage)));
    }
    for (const auto& [stage, what] : c.unmeasured)
      spdlog::warn(
          "stage {}: {} not measured (the run had none to time): left out of the file, "
          "named under \"unmeasured\"; simulate refuses a plan that runs them",
          stage, what);
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
