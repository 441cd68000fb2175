#include "cli/runtime_option.h"

#include <spdlog/spdlog.h>

#include <sstream>

#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "pipeplan/prove.h"

namespace pipeplan::cli {

CLI::Option* add_runtime_option(CLI::App& app, std::string& name, const std::string& what,
                                bool allow_list) {
  auto check = [allow_list](const std::string& s) -> std::string {
    if ((allow_list && s == "list") || find_runtime(s)) return {};
    return "unknown runtime '" + limits::excerpt(s) + "' (runtimes: " + runtime_names() +
           (allow_list ? "; --runtime list describes them)" : ")");
  };
  return app
      .add_option("--runtime", name,
                  "The runtime that runs the plan (" + runtime_names() +
                      (allow_list ? "; 'list' describes them" : "") + "): " + what)
      ->check(CLI::Validator(check, "NAME", "runtime"));
}

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  for (const TransportModel& m : kTransportModels) out.emplace_back(m.name);
  return out;
}

std::string runtime_table_text() {
  std::ostringstream out;
  for (const Runtime& rt : runtimes()) {
    out << rt.name;
    for (std::string_view a : rt.aliases) out << " (also " << a << ")";
    out << ": " << describe_rules(rt) << "\n  " << rt.summary << "\n  source: " << rt.source
        << "\n";
  }
  out << "abstract models (--model): " << transport_names() << "\n";
  return out.str();
}

TorchTarget torch_csv_target(const std::string& format, const std::string& version,
                             const std::string& runtime) {
  if (!version.empty() && format != "torch-csv")
    throw InputError("--torch-version " + limits::excerpt(version) +
                     ": only -f torch-csv is written for a torch release (this writes " +
                     (format.empty() ? std::string("the input's format") : format) + ")");
  if (format != "torch-csv") return TorchTarget{};
  return torch_target(version, runtime);
}

std::vector<Runtime> proof_runtimes(const std::string& format, const TorchTarget& torch,
                                    const std::string& runtime) {
  if (format == "torch-csv") return torch.runtimes;
  if (!runtime.empty()) return {runtime_named(runtime)};
  return {};
}

Plan lower_for(const std::function<Plan(const LowerOptions&)>& lower_with,
               const LowerOptions& options, const std::vector<Runtime>& runtimes, bool may_retry,
               const std::string& what) {
  RuntimeLowering l = lower_for_runtimes(lower_with, options, runtimes, may_retry, what);
  if (!l.serial_safe_for.empty())
    spdlog::info(
        "lowered serial-safe: the schedule's own lowering is not deadlock-free under "
        "runtime '{}'",
        l.serial_safe_for);
  return std::move(l.plan);
}

}  // namespace pipeplan::cli
