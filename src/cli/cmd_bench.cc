// pipeplan bench: the performance benchmark (bench/bench.h, docs/performance.md).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "bench/bench.h"
#include "bench/latency.h"
#include "bench/search_bench.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/profile.h"

namespace pipeplan::cli {

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
  auto latency = std::make_shared<bool>(false);
  app.add_flag("--latency", *latency,
               "Instead: each lowering's rendezvous makespan against the eager bound and torch's "
               "lowering, every schedule (or -s) over p 2..8, m 1..32, v 1..4, transfer latencies "
               "0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3 and three compute cost sets; per schedule the "
               "shapes at the bound, proved out of reach, and neither");
  return [o, so, search_dir, latency, &app]() {
    if (*latency) {
      bench::LatencyBenchOptions l;
      l.schedules = o->schedules;
      l.csv = o->csv;
      bench::run_latency_bench(l, std::cout);
      return kExitOk;
    }
    if (!search_dir->empty()) {
      namespace fs = std::filesystem;
      std::vector<fs::path> files;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(*search_dir, ec))
        if (e.path().extension() == ".csv") files.push_back(e.path());
      if (ec) throw InputError("--search " + *search_dir + ": " + ec.message());
      std::sort(files.begin(), files.end());
      if (files.empty()) throw InputError("--search " + *search_dir + ": no *.csv layer profiles");
      std::vector<std::pair<std::string, LayerProfile>> profiles;
      for (const auto& f : files)
        profiles.emplace_back(f.stem().string(),
                              parse_layer_profile(read_input(f.string()), f.string()));
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
