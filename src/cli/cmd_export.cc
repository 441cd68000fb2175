// pipeplan export torchtitan|megatron: a plan in the form the trainer reads
// (torchtitan: the schedule CSV torch's runtime loads and the config the
// torchtitan release loads; Megatron-LM: the --pipeline-model-parallel-layout and its flags).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <optional>
#include <sstream>

#include "bench/torch_lowering.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/export.h"
#include "cli/runtime_option.h"
#include "cli/torch_target.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/limits.h"
#include "pipeplan/torch_runtime.h"
#include "pipeplan/verify.h"

namespace pipeplan::cli {
namespace {

struct ExportArgs {
  std::string plan;
  std::string layers;
  std::string output;
  int microbatch_size = 1;
  std::string format = "args";
  TorchtitanTarget torchtitan;
};

// torch lowers the compute-only CSV itself (_add_send_recv): refuse an order
// whose lowering deadlocks under `torch`'s transport, and say under which
// transports it is deadlock-free.
void check_torch_lowering(const Plan& plan, const TorchTarget& torch) {
  std::optional<Plan> lowered;
  try {
    lowered = bench::torch_lowering(compute_actions(plan));
  } catch (const std::exception& e) {
    spdlog::warn("torch's lowering cannot place this order's transfers: {}", e.what());
    return;
  }
  try {
    require_torch_runs(*lowered, torch);
  } catch (const PlanRejected& e) {
    throw PlanRejected("torch lowers the CSV itself (_add_send_recv); " + std::string(e.what()),
                       e.diagnostics());
  }
  std::string verdicts;
  for (const TransportModel& t : kTransportModels) {
    const bool ok = verify(*lowered, VerifyOptions{t.id, 1}).ok();
    verdicts +=
        std::string(verdicts.empty() ? "" : ", ") + (ok ? "" : "NOT ") + std::string(t.name);
  }
  spdlog::info("torch lowers the CSV itself; its lowering of this order is deadlock-free under: {}",
               verdicts);
}

}  // namespace

TorchTarget torchtitan_torch_target(const TorchtitanTarget& target) {
  const TorchtitanRelease& release = torchtitan_release(target.version);
  TorchTarget t = torch_target(target.torch_version, target.runtime);
  if (target.torch_version.empty() && target.runtime.empty())
    t.version = release.torch.value_or(kTorchDefaultVersion);
  return t;
}

void write_torchtitan_dir(const Plan& plan, const LayerProfile& profile, const std::string& dir,
                          int microbatch_size, const TorchtitanTarget& target) {
  namespace fs = std::filesystem;
  TorchtitanOptions o;
  o.microbatch_size = microbatch_size;
  o.version = target.version;
  const TorchtitanRelease& release = torchtitan_release(target.version);
  const TorchTarget torch = torchtitan_torch_target(target);
  const fs::path csv = fs::path(dir) / "schedule.csv";
  const fs::path config_path = fs::path(dir) / std::string(release.file);
  std::error_code ec;
  o.csv_path = fs::absolute(csv, ec).string();
  if (ec) o.csv_path = csv.string();
  // Refusals come before any file or folder is made.
  std::ostringstream config, schedule;
  write_torchtitan_config(plan, profile, o, config);
  if (const std::string note = torchtitan_schedule(plan.meta).note; !note.empty())
    spdlog::warn("{}", note);
  write_torch_compute_csv(plan, schedule, torch.version);
  // What is written is verified as torch reads it: the CSV carries no
  // forward-only mark, so torch trains it (every forward owes a backward).
  Plan written = compute_actions(plan);
  written.meta.forward_only = false;
  check_torch_target(written, torch);  // the compile-guard warning
  check_torch_lowering(written, torch);
  fs::create_directories(dir, ec);
  if (ec) throw InputError(limits::excerpt(dir) + ": cannot create the folder: " + ec.message());
  write_all_or_none({{csv.string(), schedule.str()}, {config_path.string(), config.str()}});
  spdlog::info("wrote {} and {} (torchtitan {}, torch {})", csv.string(), config_path.string(),
               target.version, to_string(torch.version));
}

void add_torchtitan_options(CLI::App& app, TorchtitanTarget& target) {
  std::string known;
  for (std::string_view v : torchtitan_versions())
    known += (known.empty() ? "" : ", ") + std::string(v);
  app.add_option("--torchtitan-version", target.version,
                 "torchtitan release to write for: " + known + " (default " +
                     std::string(kTorchtitanDefaultVersion) +
                     "; 0.3.0 gets torchtitan.args, CLI overrides of its Python config; 0.2.x "
                     "gets torchtitan.toml)");
  std::string pins;
  for (std::string_view v : torchtitan_versions())
    if (const auto& torch = torchtitan_release(v).torch)
      pins += (pins.empty() ? "" : ", ") + to_string(*torch) + " for " + std::string(v);
  add_torch_version_option(app, target.torch_version,
                           "the torch the torchtitan release pins: " + pins + "; else " +
                               to_string(kTorchDefaultVersion));
  add_runtime_option(app, target.runtime,
                     "torch-2.11 or torch: torch's lowering of the order is proved under it "
                     "(default: under both, unless --torch-version names the release)");
}

std::function<int()> setup_export(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  app.require_subcommand(1);
  CLI::App* tt = app.add_subcommand(
      "torchtitan",
      "The schedule CSV torch's runtime loads and the config torchtitan loads (0.3.0: CLI "
      "overrides in torchtitan.args; 0.2.x: torchtitan.toml)");
  CLI::App* mg = app.add_subcommand(
      "megatron", "Megatron-LM's --pipeline-model-parallel-layout and the flags that go with it");
  for (CLI::App* sub : {tt, mg}) {
    sub->fallthrough();
    sub->add_option("plan", args->plan, "Plan file (JSON, or CSV with --layers' partition)")
        ->required();
    sub->add_option("--layers", args->layers,
                    "Layer profile the plan was made for (CSV; its names become module names)")
        ->required();
    add_count_option(*sub, "--microbatch-size", args->microbatch_size,
                     "Sequences per microbatch (default 1)", 1 << 20, " sequences")
        ->check(CLI::Range(1, 1 << 20));
  }
  tt->add_option("-o,--output", args->output,
                 "Folder to write schedule.csv and torchtitan.args (or torchtitan.toml)")
      ->required();
  add_torchtitan_options(*tt, args->torchtitan);
  mg->add_option("-f,--format", args->format,
                 "args: the flags on one line (default); layout: the layout string alone; json")
      ->check(CLI::IsMember({"args", "layout", "json"}));
  mg->add_option("-o,--output", args->output, "Write here instead of stdout");
  return [args, tt]() {
    const Plan plan = load_plan(args->plan);
    const LayerProfile profile = parse_layer_profile(read_input(args->layers), args->layers);
    if (tt->parsed()) {
      write_torchtitan_dir(plan, profile, args->output, args->microbatch_size, args->torchtitan);
      return kExitOk;
    }
    const MegatronExport e = megatron_export(plan, profile, args->microbatch_size);
    Output out(args->output);
    write_megatron_export(e, args->format, out.stream());
    out.close();
    for (const std::string& n : e.notes) spdlog::info("{}", n);
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
