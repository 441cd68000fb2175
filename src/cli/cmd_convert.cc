// pipeplan convert: a plan file from one format to another, unchanged.
#include <CLI/CLI.hpp>

#include <sstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/runtime_option.h"
#include "cli/torch_target.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan::cli {

namespace {

struct ConvertArgs {
  std::string input;
  std::string output;
  std::string format;
  std::string torch_version;
  std::string runtime;
  CsvReadOptions csv;
};

// "-f" may be left out when the output file's extension says it.
std::string format_from_extension(const std::string& path) {
  auto ends = [&](const std::string& ext) {
    return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends(".json")) return "json";
  if (ends(".csv")) return "csv";
  if (ends(".txt")) return "text";
  return "";
}

}  // namespace

std::function<int()> setup_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  app.add_option("input", args->input, "Plan file (JSON or CSV), or - for stdin")->required();
  app.add_option("-f,--format", args->format,
                 "Output format (default: from the -o extension .json/.csv/.txt; torch-csv: "
                 "strictly torch's dialect, no BATCH_P2P groups nor memory actions)")
      ->check(CLI::IsMember({"json", "csv", "torch-csv", "text"}));
  app.add_option("-o,--output", args->output, "Output file (default: stdout)");
  add_torch_version_option(app, args->torch_version, to_string(kTorchDefaultVersion));
  add_runtime_option(app, args->runtime,
                     "the plan is proved under it before it is written (exit 1 when it is not "
                     "deadlock-free there); a torch-csv is proved under torch's runtimes anyway");
  add_csv_options(app, args->csv);
  return [args]() {
    std::string format = args->format.empty() ? format_from_extension(args->output) : args->format;
    if (format.empty())
      throw InputError("convert: say which format to write with -f json|csv|torch-csv|text");
    const TorchTarget torch = torch_csv_target(format, args->torch_version, args->runtime);
    // No checks beyond the format's own: convert never judges the plan, so
    // a broken plan can be moved to whatever format a tool needs; torch-csv
    // is a runtime's input, so it is checked as that runtime will run it,
    // and so is any plan converted for the --runtime named.
    Plan plan = load_plan(args->input, args->csv);
    if (format != "torch-csv" && !args->runtime.empty())
      if (std::optional<RuntimeRefusal> r =
              first_refusal(plan, proof_runtimes(format, torch, args->runtime)))
        reject_under(*r, limits::excerpt(args->input));
    // Render first: a refused conversion (a partial plan to CSV) must not
    // leave a truncated output file behind.
    std::ostringstream text;
    write_plan(plan, format, text, torch.version);
    if (format == "torch-csv") check_torch_target(plan, torch);
    Output out(args->output);
    out.stream() << text.str();
    out.close();
    return kExitOk;
  };
}

}  // namespace pipeplan::cli
