// pipeplan verify: structural checks and a deadlock proof for a plan file.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "pipeplan/emit_diagnostics.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/prove.h"
#include "pipeplan/verify.h"

namespace pipeplan::cli {

namespace {
struct VerifyArgs {
  std::string file;
  std::string model = "rendezvous";
  std::string format = "text";
  CsvReadOptions csv;
};

}  // namespace

std::function<int()> setup_verify(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  app.add_option("file", args->file,
                 "Plan file (JSON or CSV, detected from content), or - for stdin")
      ->required();
  app.add_option("--model", args->model, "Transport model to prove progress under")
      ->check(CLI::IsMember({"rendezvous", "eager", "serial", "all"}));
  app.add_option("-f,--format", args->format, "Report format")
      ->check(CLI::IsMember({"text", "json"}));
  add_csv_options(app, args->csv);
  return [args]() {
    const Plan given = load_plan(args->file, args->csv);
    std::vector<Transport> models;
    if (args->model == "all") models = {Transport::Rendezvous, Transport::Eager, Transport::Serial};
    else models = {*parse_transport(args->model)};
    // A compute-only plan is proven through its lowering (as its schedule
    // lowers it), the program a runtime runs.
    const Proof proof = prove(given, models);
    const bool lowered = proof.lowered.has_value();
    if (lowered) spdlog::info("compute-only plan: lowered before verification");
    const Plan& plan = lowered ? *proof.lowered : given;
    std::vector<ModelResult> results;
    for (std::size_t i = 0; i < models.size(); ++i)
      results.push_back({models[i], proof.results[i]});

    bool ok = true;
    for (const auto& r : results) ok = ok && r.result.ok();
    if (args->format == "json") {
      write_diagnostics_json(plan.meta, plan.num_actions(), results, std::cout);
    } else {
      for (const auto& r : results) {
        if (r.result.ok()) {
          std::cout << "ok: " << limits::excerpt(plan.meta.schedule)
                    << " (pp=" << plan.meta.pp_degree << ", m=" << plan.meta.num_microbatches
                    << ", v=" << plan.meta.stages_per_rank
                    << (plan.meta.forward_only ? ", forward-only" : "") << ", "
                    << plan.num_actions() << " actions" << (lowered ? ", lowered" : "")
                    << ") is deadlock-free under " << to_string(r.transport) << " transport\n";
        } else {
          std::cout << "FAILED under " << to_string(r.transport)
                    << " transport: " << r.result.diagnostics.size() << " problem(s)\n"
                    << format_diagnostics(r.result.diagnostics) << "\n";
        }
      }
      if (!ok && !plan.meta.forward_only && !has_backward(plan))
        std::cout << "hint: the plan holds no backward action at all; pass --forward-only "
                     "if it is an inference plan\n";
    }
    return ok ? kExitOk : kExitInvalid;
  };
}

}  // namespace pipeplan::cli
