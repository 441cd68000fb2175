// pipeplan verify: structural checks and a deadlock proof for a plan file.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "pipeplan/emit_diagnostics.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/verify.h"

namespace pipeplan::cli {

namespace {
struct VerifyArgs {
  std::string file;
  std::string model = "rendezvous";
  std::string format = "text";
  CsvReadOptions csv;
};

bool no_backward(const Plan& plan) {
  for (const auto& list : plan.ranks)
    for (const Action& a : list)
      if (a.type == ActionType::B || a.type == ActionType::I || a.type == ActionType::W ||
          a.type == ActionType::OverlapFB)
        return false;
  return true;
}
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
    Plan plan = load_plan(args->file, args->csv);
    std::vector<ModelResult> results;
    std::vector<Transport> models;
    if (args->model == "all") models = {Transport::Rendezvous, Transport::Eager, Transport::Serial};
    else models = {*parse_transport(args->model)};

    bool lowered = false;
    if (plan.is_whole() && plan.is_compute_only()) {
      std::vector<Diagnostic> structure = check_structure(plan);
      if (!structure.empty()) {
        for (Transport t : models) results.push_back({t, VerifyResult{structure}});
      } else {
        spdlog::info("compute-only plan: lowering it before verification");
        try {
          plan = lower(plan, schedule_lowering(plan.meta));
          lowered = true;
        } catch (const PlanRejected& e) {
          // Ranks that wait on each other: the plan cannot run (exit 1, as
          // `lower` says), whatever the transport.
          for (Transport t : models) results.push_back({t, VerifyResult{e.diagnostics()}});
        }
      }
    }
    if (results.empty())
      for (Transport t : models) results.push_back({t, verify(plan, {t})});

    bool ok = true;
    for (const auto& r : results) ok = ok && r.result.ok();
    if (args->format == "json") {
      write_diagnostics_json(plan.meta, plan.num_actions(), results, std::cout);
    } else {
      for (const auto& r : results) {
        if (r.result.ok()) {
          std::cout << "ok: " << plan.meta.schedule << " (pp=" << plan.meta.pp_degree
                    << ", m=" << plan.meta.num_microbatches << ", v=" << plan.meta.stages_per_rank
                    << (plan.meta.forward_only ? ", forward-only" : "") << ", "
                    << plan.num_actions() << " actions" << (lowered ? ", lowered" : "")
                    << ") is deadlock-free under " << to_string(r.transport) << " transport\n";
        } else {
          std::cout << "FAILED under " << to_string(r.transport)
                    << " transport: " << r.result.diagnostics.size() << " problem(s)\n"
                    << format_diagnostics(r.result.diagnostics) << "\n";
        }
      }
      if (!ok && !plan.meta.forward_only && no_backward(plan))
        std::cout << "hint: the plan holds no backward action at all; pass --forward-only "
                     "if it is an inference plan\n";
    }
    return ok ? kExitOk : kExitInvalid;
  };
}

}  // namespace pipeplan::cli
