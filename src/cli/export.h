// Writing a plan for torchtitan, shared by `export torchtitan` and
// `search --emit torchtitan`.
#pragma once

#include <string>

#include "pipeplan/ir.h"
#include "pipeplan/profile.h"

namespace pipeplan::cli {

/// Writes DIR/schedule.csv (compute-only, as torch's _load_csv reads it) and
/// DIR/torchtitan.toml (pointing at the CSV by absolute path), creating DIR;
/// logs whether torch's own lowering of the order is deadlock-free.
void write_torchtitan_dir(const Plan& plan, const LayerProfile& profile, const std::string& dir,
                          int microbatch_size);

}  // namespace pipeplan::cli
