// pipeplan bench: the performance benchmark (bench/bench.h, docs/performance.md).
#include <CLI/CLI.hpp>

#include <iostream>

#include "bench/bench.h"
#include "bench/latency.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace pipeplan::cli {

std::function<int()> setup_bench(CLI::App& app) {
  auto o = std::make_shared<bench::BenchOptions>();
  app.add_option("-s,--schedule", o->schedules,
                 "Schedule to measure (repeatable; default: interleaved-1f1b, zbv, dualpipev)");
  app.add_option("-p,--pp", o->pp, "Pipeline-parallel degree")->check(CLI::PositiveNumber);
  add_stages_per_rank_option(app, o->stages_per_rank,
                             "Stages per rank (default: 4 for loop-mapped schedules, 2 for V ones)");
  app.add_option("-m,--microbatches", o->microbatches, "Microbatch counts, e.g. -m 128,512,2048")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--repeat", o->repeat, "Runs per pass at least (the minimum time is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-time", o->min_time, "Seconds per pass at least (up to 200 runs)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-memory", [o](std::int64_t) { o->memory = false; },
               "Skip the per-pass peak-RSS measurement (one forked run per pass)");
  app.add_flag("--csv", o->csv, "One CSV row per case and pass instead of the tables");
  auto latency = std::make_shared<bool>(false);
  app.add_flag("--latency", *latency,
               "Instead: each lowering's rendezvous makespan against the eager bound and torch's "
               "lowering, every schedule (or -s) over p 2..8, m 1..32, v 1..4 and four transfer costs");
  return [o, latency]() {
    if (*latency) {
      bench::LatencyBenchOptions l;
      l.schedules = o->schedules;
      l.csv = o->csv;
      bench::run_latency_bench(l, std::cout);
      return kExitOk;
    }
    bench::run_bench(*o, std::cout);
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
