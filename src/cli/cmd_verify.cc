// pipeplan verify: structural checks and a deadlock proof for a plan file.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/runtime_option.h"
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
  std::string runtime;
  std::string format = "text";
  CsvReadOptions csv;
};

}  // namespace

std::function<int()> setup_verify(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  app.add_option("file", args->file,
                 "Plan file (JSON or CSV, detected from content), or - for stdin");
  std::vector<std::string> models = model_names();
  models.emplace_back("all");
  app.add_option("--model", args->model,
                 "Abstract transport model to prove progress under (" + transport_names() +
                     ", or all of them; docs/semantics.md)")
      ->check(CLI::IsMember(models));
  add_runtime_option(app, args->runtime,
                     "proves the plan as that runtime runs it: its transport model and where "
                     "it waits (not with --model)",
                     /*allow_list=*/true);
  app.add_option("-f,--format", args->format, "Report format")
      ->check(CLI::IsMember({"text", "json"}));
  add_csv_options(app, args->csv);
  return [args, &app]() {
    refuse_together(app, "--model", "--runtime",
                    "a runtime names its model: `verify --runtime list` shows which");
    if (args->runtime == "list") {
      if (!args->file.empty())
        throw InputError(
            "--runtime list describes the runtimes; give a runtime's name to "
            "verify " +
            limits::excerpt(args->file));
      std::cout << runtime_table_text();
      return kExitOk;
    }
    if (args->file.empty()) throw InputError("verify needs a plan file (or - for stdin)");
    const Plan given = load_plan(args->file, args->csv);
    std::vector<VerifyOptions> targets;
    std::vector<ModelResult> results;
    if (!args->runtime.empty()) {
      const Runtime& rt = runtime_named(args->runtime);
      targets.push_back(verify_options(rt));
      results.push_back({rt.model, {}, std::string(rt.name)});
    } else {
      for (const TransportModel& m : kTransportModels)
        if (args->model == "all" || args->model == m.name) {
          targets.push_back(VerifyOptions{m.id});
          results.push_back({m.id, {}, {}});
        }
    }
    // A compute-only plan is proven through its lowering (as its schedule
    // lowers it), the program a runtime runs.
    Proof proof = prove(given, targets);
    const bool lowered = proof.lowered.has_value();
    if (lowered) spdlog::info("compute-only plan: lowered before verification");
    const Plan& plan = lowered ? *proof.lowered : given;
    for (std::size_t i = 0; i < results.size(); ++i)
      results[i].result = std::move(proof.results[i]);

    // "rendezvous transport", or "runtime torch-2.11 (serial transport)".
    auto under = [](const ModelResult& r) {
      const std::string model = std::string(to_string(r.transport)) + " transport";
      return r.runtime.empty() ? model : "runtime " + r.runtime + " (" + model + ")";
    };
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
                    << ") is deadlock-free under " << under(r) << "\n";
        } else {
          std::cout << "FAILED under " << under(r) << ": " << r.result.diagnostics.size()
                    << " problem(s)\n"
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
