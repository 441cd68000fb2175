// pipeplan diagnose: hang replay. Reads a plan and the records of a stuck
// run (torch Flight Recorder dumps, one per rank, or pipeplan's own trace)
// and says per rank where it stopped and who waits for whom.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "pipeplan/diagnose.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/prove.h"
#include "pipeplan/trace.h"

namespace pipeplan::cli {

namespace {
struct DiagnoseArgs {
  std::string plan;
  std::vector<std::string> records;
  std::string format = "text";
  CsvReadOptions csv;
};
}  // namespace

std::function<int()> setup_diagnose(CLI::App& app) {
  auto args = std::make_shared<DiagnoseArgs>();
  app.add_option("plan", args->plan, "Plan file the run replayed (JSON or CSV), or - for stdin");
  app.add_option("records", args->records,
                 "Flight Recorder dumps, one per rank (torch names them <prefix><rank>), or one "
                 "pipeplan trace (train --trace / --trace-records)");
  app.add_option("-f,--format", args->format, "Report format")
      ->check(CLI::IsMember({"text", "json"}));
  add_csv_options(app, args->csv);
  app.footer(
      "Exit codes: 0 the records show a completed run, 1 a hang (the report names where), "
      "2 usage or input error.");
  return [args]() {
    if (args->plan.empty()) throw InputError("diagnose needs a plan file and the run's records");
    if (args->records.empty())
      throw InputError(
          "diagnose needs the run's records: Flight Recorder dumps (one per rank) "
          "or a pipeplan trace");
    Plan plan = load_plan(args->plan, args->csv);
    if (!plan.is_whole())
      throw InputError(limits::excerpt(args->plan) + ": the plan holds only some ranks; " +
                       "diagnose needs every rank");
    // The run replayed the lowered program: a compute-only file is lowered
    // as its schedule lowers it.
    if (plan.is_compute_only()) {
      Lowered lowered = lower_if_compute_only(plan);
      if (!lowered.plan)
        throw InputError(limits::excerpt(args->plan) +
                         ": the compute-only plan cannot be lowered; give the lowered plan the "
                         "run replayed");
      plan = std::move(*lowered.plan);
    }
    HangReport report;
    std::vector<std::string> texts;
    for (const std::string& path : args->records) texts.push_back(read_input(path));
    const bool pickle =
        !texts.front().empty() && static_cast<unsigned char>(texts.front()[0]) == 0x80;
    if (!pickle && detect_format(texts.front()) == PlanFormat::Json) {
      if (texts.size() != 1)
        throw InputError("give one pipeplan trace (it holds every rank), not " +
                         std::to_string(texts.size()) + " files");
      report = diagnose_trace(plan, parse_trace_json(texts.front(), args->records.front()),
                              args->records.front());
    } else {
      std::vector<FlightRecorderDump> dumps;
      for (std::size_t i = 0; i < texts.size(); ++i)
        dumps.push_back(read_flight_recorder(texts[i], args->records[i]));
      report = diagnose_flight_recorder(plan, dumps);
    }
    if (args->format == "json") write_hang_report_json(report, std::cout);
    else write_hang_report_text(report, std::cout);
    return report.completed ? kExitOk : kExitInvalid;
  };
}

}  // namespace pipeplan::cli
