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
  std::string runtime;                             ///< --runtime; "" = both torch runtimes
};

/// The torch the CSV is for: the release --torch-version names, else the
/// one the torchtitan release pins (kTorchDefaultVersion when it pins a
/// nightly; with --runtime alone, the runtime's newest release); proved
/// under --runtime, else under --torch-version's runtime, else under both
/// torch runtimes (torch_target). Throws InputError on a bad version,
/// runtime, or a pair that disagrees.
TorchTarget torchtitan_torch_target(const TorchtitanTarget& target);

/// Writes DIR/schedule.csv (compute-only, as torch's _load_csv reads it) and
/// the config of torchtitan `version` (DIR/torchtitan.args for 0.3.0,
/// DIR/torchtitan.toml for 0.2.x; pointing at the CSV by absolute path),
/// creating DIR; nothing is written when the plan or profile is refused,
/// or when torch (torchtitan_torch_version) cannot run the order: an action
/// it lacks (exit 2), or torch's own lowering of the order (restated,
/// bench/torch_lowering.h) deadlocking under one of the target's runtimes
/// (exit 1). Logs under which transports that lowering is deadlock-free.
void write_torchtitan_dir(const Plan& plan, const LayerProfile& profile, const std::string& dir,
                          int microbatch_size, const TorchtitanTarget& target);

/// Adds --torchtitan-version (default: the current release), --torch-version
/// and --runtime to `app`.
void add_torchtitan_options(CLI::App& app, TorchtitanTarget& target);

}  // namespace pipeplan::cli
