// The CLI's torch targets: --torch-version and what every torch CSV export
// checks before writing. Apart from common.h: it logs (spdlog), and
// pipeplan-train, which shares common.cc, compiles against LibTorch, whose
// own {fmt} spdlog's headers must not meet.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "pipeplan/ir.h"
#include "pipeplan/torch_runtime.h"

namespace pipeplan::cli {

/// --torch-version V: the torch release a torch export targets ("" when not
/// given: `default_help` says what then).
void add_torch_version_option(CLI::App& app, std::string& version, const std::string& default_help);
/// The release `text` names, or `fallback` for "".
TorchVersion torch_version_or(const std::string& text, TorchVersion fallback);
/// What every torch CSV export does before writing: refuses a plan
/// `target`'s release or runtimes cannot run (require_torch_runs: exit 2 or
/// 1) and warns when its split backward escapes torch's torch.compile guard.
void check_torch_target(const Plan& plan, const TorchTarget& target);

}  // namespace pipeplan::cli
