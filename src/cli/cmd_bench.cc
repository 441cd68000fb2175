// pipeplan bench: the performance benchmark (bench/bench.h, docs/performance.md).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "bench/bench.h"
#include "bench/latency.h"
#include "bench/search_bench.h"
#include "bench/step_bench.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "pipeplan/analytic.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/profile.h"

namespace pipeplan::cli {

namespace {

// Every *.csv layer profile in `dir`, by file stem, in name order.
std::vector<std::pair<std::string, LayerProfile>> profiles_in(const std::string& dir,
                                                              const std::string& option) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".csv") files.push_back(e.path());
  if (ec) throw InputError(option + " " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError(option + " " + dir + ": no *.csv layer profiles");
  std::vector<std::pair<std::string, LayerProfile>> profiles;
  for (const auto& f : files)
    profiles.emplace_back(f.stem().string(),
                          parse_layer_profile(read_input(f.string()), f.string()));
  return profiles;
}

}  // namespace

std::function<int()> setup_bench(CLI::App& app) {
  auto o = std::make_shared<bench::BenchOptions>();
  app.add_option("-s,--schedule", o->schedules,
                 "Schedule to measure (repeatable; default: interleaved-1f1b, zbv, dualpipev)");
  app.add_option("-p,--pp", o->pp, "Pipeline-parallel degree")
      ->check(integer_in(1, limits::kMaxRanks, " ranks"));
  add_stages_per_rank_option(
      app, o->stages_per_rank,
      "Stages per rank (default: 4 for loop-mapped schedules, 2 for V ones)");
  app.add_option("-m,--microbatches", o->microbatches, "Microbatch counts, e.g. -m 128,512,2048")
      ->delimiter(',')
      ->check(integer_in(1, limits::kMaxMicrobatches, " microbatches"));
  app.add_option("--repeat", o->repeat, "Runs per pass at least (the minimum time is reported)")
      ->check(integer_in(1, 1000000));
  app.add_option("--min-time", o->min_time, "Seconds per pass at least (up to 200 runs)")
      ->check(number_in(0, 3600));
  app.add_flag(
      "--no-memory", [o](std::int64_t) { o->memory = false; },
      "Skip the per-pass peak-RSS measurement (one forked run per pass)");
  app.add_flag("--csv", o->csv, "One CSV row per case and pass instead of the tables");
  auto search_dir = std::make_shared<std::string>();
  auto so = std::make_shared<bench::SearchBenchOptions>();
  app.add_option(
      "--search", *search_dir,
      "Instead: benchmark `pipeplan search` on every *.csv layer profile in this "
      "directory (-p, -m; default 8 and 32) at --budgets x 1F1B's peak (docs/search.md)");
  app.add_option("--budgets", so->budgets, "--search: memory budgets as multiples of 1F1B's peak")
      ->delimiter(',')
      ->check(number_in(0, 1e6, /*above_min=*/true));
  app.add_option("--comm", so->comm, "--search: transfer times to try, e.g. --comm 0,0.5")
      ->delimiter(',')
      ->check(number_in(0, limits::kMaxCost));
  app.add_option("--time-limit", so->time_limit, "--search: each search's time limit in seconds")
      ->check(number_in(0, limits::kMaxTimeLimit, /*above_min=*/true));
  auto step = std::make_shared<bool>(false);
  auto step_profiles = std::make_shared<std::string>();
  app.add_flag("--step", *step,
               "Instead: the per-step path for variable-length microbatches (docs/lengths.md) "
               "on an analytic llama profile (and --profiles DIR): -p, -m (default 8 and 64), "
               "--comm (first value), --time-limit; seeded lognormal and uniform lengths");
  app.add_option("--profiles", *step_profiles, "--step: also every *.csv layer profile in DIR");
  auto latency = std::make_shared<bool>(false);
  app.add_flag("--latency", *latency,
               "Instead: each lowering's rendezvous makespan against the eager bound and torch's "
               "lowering, every schedule (or -s) over p 2..8, m 1..32, v 1..4, transfer latencies "
               "0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3 and three compute cost sets; per schedule the "
               "shapes at the bound, proved out of reach, and neither");
  return [o, so, search_dir, latency, step, step_profiles, &app]() {
    if (*step) {
      bench::StepBenchOptions s;
      if (app.count("--pp") > 0) s.pp = o->pp;
      if (app.count("--microbatches") > 0 && !o->microbatches.empty())
        s.microbatches = o->microbatches.front();
      if (app.count("--comm") > 0 && !so->comm.empty()) s.comm = so->comm.front();
      if (app.count("--time-limit") > 0) s.time_limit = so->time_limit;
      // Llama-3-8B-like: 32 layers, hidden 4096, GQA 8, 4096-token sequences,
      // on an H100-class device (times in ms).
      ModelShape llama;
      llama.arch = Arch::Llama;
      llama.layers = 32;
      llama.hidden = 4096;
      llama.heads = 32;
      llama.kv_heads = 8;
      llama.ffn = 14336;
      llama.vocab = 128256;
      llama.seq = 4096;
      llama.micro_batch = 1;
      DeviceSpec device;
      device.tflops = 400;
      device.mem_bw = 3350;
      std::vector<std::pair<std::string, LayerProfile>> profiles = {
          {"llama-8b (analytic)", analytic_profile(llama, device)}};
      if (!step_profiles->empty())
        for (auto& p : profiles_in(*step_profiles, "--profiles")) profiles.push_back(std::move(p));
      bench::run_step_bench(profiles, s, std::cout);
      return kExitOk;
    }
    if (*latency) {
      bench::LatencyBenchOptions l;
      l.schedules = o->schedules;
      l.csv = o->csv;
      bench::run_latency_bench(l, std::cout);
      return kExitOk;
    }
    if (!search_dir->empty()) {
      const auto profiles = profiles_in(*search_dir, "--search");
      if (app.count("--pp") > 0) so->pp = o->pp;
      if (app.count("--microbatches") > 0 && !o->microbatches.empty())
        so->microbatches = o->microbatches.front();
      bench::run_search_bench(profiles, *so, std::cout);
      return kExitOk;
    }
    bench::run_bench(*o, std::cout);
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
