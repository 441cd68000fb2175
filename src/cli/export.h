// Writing a plan for torchtitan, shared by `export torchtitan` and
// `search --emit torchtitan`.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "pipeplan/ir.h"
#include "pipeplan/profile.h"

namespace pipeplan::cli {

/// Writes DIR/schedule.csv (compute-only, as torch's _load_csv reads it) and
/// the config of torchtitan `version` (DIR/torchtitan.args for 0.3.0,
/// DIR/torchtitan.toml for 0.2.x; pointing at the CSV by absolute path),
/// creating DIR; nothing is written when the plan or profile is refused.
/// Logs whether torch's own lowering of the order is deadlock-free.
void write_torchtitan_dir(const Plan& plan, const LayerProfile& profile, const std::string& dir,
                          int microbatch_size, const std::string& version);

/// Adds --torchtitan-version to `app` (default: the current release).
void add_torchtitan_version_option(CLI::App& app, std::string& version);

}  // namespace pipeplan::cli
