// pipeplan export torchtitan|megatron: a plan in the form the trainer reads
// (torchtitan: the schedule CSV torch's runtime loads and the config the
// torchtitan release loads; Megatron-LM: the --pipeline-model-parallel-layout and its flags).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <sstream>

#include "bench/torch_lowering.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/export.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/limits.h"
#include "pipeplan/verify.h"

namespace pipeplan::cli {
namespace {

struct ExportArgs {
  std::string plan;
  std::string layers;
  std::string output;
  int microbatch_size = 1;
  std::string format = "args";
  std::string torchtitan_version{kTorchtitanDefaultVersion};
};

// torch lowers the compute-only CSV itself (_add_send_recv): say whether
// that lowering of this order is deadlock-free.
void check_torch_lowering(const Plan& plan) {
  std::string verdicts;
  try {
    const Plan lowered = bench::torch_lowering(compute_actions(plan));
    for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
      const bool ok = verify(lowered, VerifyOptions{t, 1}).ok();
      verdicts += std::string(verdicts.empty() ? "" : ", ") + (ok ? "" : "NOT ") +
                  std::string(to_string(t));
    }
  } catch (const std::exception& e) {
    spdlog::warn("torch's lowering cannot place this order's transfers: {}", e.what());
    return;
  }
  spdlog::info("torch lowers the CSV itself; its lowering of this order is deadlock-free under: {}",
               verdicts);
}

}  // namespace

void write_torchtitan_dir(const Plan& plan, const LayerProfile& profile, const std::string& dir,
                          int microbatch_size, const std::string& version) {
  namespace fs = std::filesystem;
  TorchtitanOptions o;
  o.microbatch_size = microbatch_size;
  o.version = version;
  const TorchtitanRelease& release = torchtitan_release(version);
  const fs::path csv = fs::path(dir) / "schedule.csv";
  const fs::path config_path = fs::path(dir) / std::string(release.file);
  std::error_code ec;
  o.csv_path = fs::absolute(csv, ec).string();
  if (ec) o.csv_path = csv.string();
  std::ostringstream config;  // refusals come before any file or folder is made
  write_torchtitan_config(plan, profile, o, config);
  fs::create_directories(dir, ec);
  if (ec) throw InputError(limits::excerpt(dir) + ": cannot create the folder: " + ec.message());
  Output csv_out(csv.string());
  write_torch_compute_csv(plan, csv_out.stream());
  csv_out.close();
  Output config_out(config_path.string());
  config_out.stream() << config.str();
  config_out.close();
  spdlog::info("wrote {} and {} (torchtitan {})", csv.string(), config_path.string(), version);
  check_torch_lowering(plan);
}

void add_torchtitan_version_option(CLI::App& app, std::string& version) {
  std::string known;
  for (std::string_view v : torchtitan_versions())
    known += (known.empty() ? "" : ", ") + std::string(v);
  app.add_option("--torchtitan-version", version,
                 "torchtitan release to write for: " + known + " (default " +
                     std::string(kTorchtitanDefaultVersion) +
                     "; 0.3.0 gets torchtitan.args, CLI overrides of its Python config; 0.2.x "
                     "gets torchtitan.toml)");
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
  add_torchtitan_version_option(*tt, args->torchtitan_version);
  mg->add_option("-f,--format", args->format,
                 "args: the flags on one line (default); layout: the layout string alone; json")
      ->check(CLI::IsMember({"args", "layout", "json"}));
  mg->add_option("-o,--output", args->output, "Write here instead of stdout");
  return [args, tt]() {
    const Plan plan = load_plan(args->plan);
    const LayerProfile profile = parse_layer_profile(read_input(args->layers), args->layers);
    if (tt->parsed()) {
      write_torchtitan_dir(plan, profile, args->output, args->microbatch_size,
                           args->torchtitan_version);
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
