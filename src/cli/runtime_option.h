// The CLI's --runtime NAME (pipeplan/transport.h's runtimes table): the
// option, the targets a command proves its result under, and the refusal
// that names the runtime and the chain. Apart from common.h: it logs.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/ir.h"
#include "pipeplan/lower.h"
#include "pipeplan/prove.h"
#include "pipeplan/torch_runtime.h"
#include "pipeplan/transport.h"
#include "pipeplan/verify.h"

namespace pipeplan::cli {

/// --runtime NAME, checked against the runtimes table (its names and
/// aliases; "list" too when `allow_list`). `what` ends the help: what the
/// runtime does for this command.
CLI::Option* add_runtime_option(CLI::App& app, std::string& name, const std::string& what,
                                bool allow_list = false);

/// The transport models' names (`--model`'s choices), in table order.
std::vector<std::string> model_names();

/// The runtimes table as `--runtime list` prints it.
std::string runtime_table_text();

/// What a torch CSV export targets from --torch-version and --runtime
/// (torch_target; both "" for the default: both torch runtimes). Refuses
/// --torch-version for another format; --runtime for another format is the
/// command's own proof (proof_runtimes).
TorchTarget torch_csv_target(const std::string& format, const std::string& version,
                             const std::string& runtime);

/// The runtimes a command proves what it writes under: a torch CSV's
/// (`torch`), else --runtime's; empty when neither (the bare rendezvous model).
std::vector<Runtime> proof_runtimes(const std::string& format, const TorchTarget& torch,
                                    const std::string& runtime);

/// lower_for_runtimes() (pipeplan/prove.h), logging when it kept the
/// serial-safe lowering.
Plan lower_for(const std::function<Plan(const LowerOptions&)>& lower_with,
               const LowerOptions& options, const std::vector<Runtime>& runtimes, bool may_retry,
               const std::string& what);

}  // namespace pipeplan::cli
