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
                     ", refuses actions it lacks, proves the plan under its P2P transport (" +
                     std::string(to_string(Transport::Serial)) + " before " + pairs + ")");
}

TorchVersion torch_version_or(const std::string& text, TorchVersion fallback) {
  return text.empty() ? fallback : parse_torch_version(text);
}

TorchVersion torch_csv_target(const std::string& format, const std::string& text) {
  if (!text.empty() && format != "torch-csv")
    throw InputError("--torch-version " + limits::excerpt(text) +
                     ": only -f torch-csv is written for a torch release (this writes " +
                     (format.empty() ? std::string("the input's format") : format) + ")");
  return torch_version_or(text, kTorchDefaultVersion);
}

void check_torch_target(const Plan& plan, TorchVersion version) {
  require_torch_runs(plan, version);
  if (std::string warning = torch_compile_guard_warning(plan, version); !warning.empty())
    spdlog::warn("{}", warning);
}

}  // namespace pipeplan::cli
