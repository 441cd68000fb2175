// Writing a plan for torchtitan, shared by `export torchtitan` and
// `search --emit torchtitan`.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "pipeplan/interop.h"
#include "pipeplan/ir.h"
#include "pipeplan/profile.h"
#include "pipeplan/torch_runtime.h"

namespace pipeplan::cli {

/// Which torchtitan, and which torch under it, an export writes for.
struct TorchtitanTarget {
  std::string version{kTorchtitanDefaultVersion};  ///< --torchtitan-version
  std::string torch_version;                       ///< --torch-version; "" = the release's pin
};

/// The torch release the CSV is for: --torch-version, else the one the
/// torchtitan release pins (kTorchDefaultVersion when it pins a nightly).
/// Throws InputError on either version's text.
TorchVersion torchtitan_torch_version(const TorchtitanTarget& target);

/// Writes DIR/schedule.csv (compute-only, as torch's _load_csv reads it) and
/// the config of torchtitan `version` (DIR/torchtitan.args for 0.3.0,
/// DIR/torchtitan.toml for 0.2.x; pointing at the CSV by absolute path),
/// creating DIR; nothing is written when the plan or profile is refused,
/// or when torch (torchtitan_torch_version) cannot run the order: an action
/// it lacks (exit 2), or torch's own lowering of the order (restated,
/// bench/torch_lowering.h) deadlocking under its transport (exit 1).
/// Logs under which transports that lowering is deadlock-free.
void write_torchtitan_dir(const Plan& plan, const LayerProfile& profile, const std::string& dir,
                          int microbatch_size, const TorchtitanTarget& target);

/// Adds --torchtitan-version (default: the current release) and
/// --torch-version to `app`.
void add_torchtitan_options(CLI::App& app, TorchtitanTarget& target);

}  // namespace pipeplan::cli
