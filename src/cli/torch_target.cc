#include "cli/torch_target.h"

#include <spdlog/spdlog.h>

#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan::cli {

void add_torch_version_option(CLI::App& app, std::string& version,
                              const std::string& default_help) {
  // The help reads the table: where its columns change.
  const auto& rows = torch_runtime_versions();
  auto first = [&](auto&& has) {
    for (const TorchRuntimeVersion& row : rows)
      if (has(row)) return to_string(row.since);
    return to_string(rows.back().since);
  };
  const std::string waits = first([](const auto& r) { return r.send_waits; });
  const std::string pairs = first([](const auto& r) { return r.transport != Transport::Serial; });
  app.add_option("--torch-version", version,
                 "torch release the schedule is for, MAJOR.MINOR[.PATCH] (" +
                     to_string(rows.front().since) + " on; default " + default_help +
                     "): no WAIT_* cells before " + waits +
                     ", refuses actions it lacks, proves the plan under its runtime (torch-2.11 "
                     "before " +
                     pairs +
                     ", torch from it; without --torch-version and "
                     "--runtime: under both)");
}

TorchVersion torch_version_or(const std::string& text, TorchVersion fallback) {
  return text.empty() ? fallback : parse_torch_version(text);
}

void check_torch_target(const Plan& plan, const TorchTarget& target) {
  require_torch_runs(plan, target);
  if (std::string warning = torch_compile_guard_warning(plan, target.version); !warning.empty())
    spdlog::warn("{}", warning);
}

}  // namespace pipeplan::cli
