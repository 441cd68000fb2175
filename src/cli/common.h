// Helpers shared by the subcommands: options, input, output, exit codes.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/ir.h"
#include "pipeplan/problem.h"
#include "pipeplan/torch_runtime.h"

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI

namespace pipeplan::cli {

// The exit codes and exit_code(): pipeplan/error.h, the one mapping.
using pipeplan::kExitInternal;
using pipeplan::kExitInvalid;
using pipeplan::kExitOk;
using pipeplan::kExitPeer;
using pipeplan::kExitUsage;

/// What a failure means for the user: its exit code and the stderr label
/// ("error" or "internal error").
struct Failure {
  int code = kExitInternal;
  const char* label = "internal error";
  std::string message;
};
/// An exception as a Failure: its code from exit_code() (pipeplan/error.h:
/// PlanRejected 1, InputError 2, InternalError and anything unexpected 3,
/// CommError 4), its label and message.
Failure classify(std::exception_ptr e);
/// An error's text as the CLI words it: shape fixes name -p, -m and -v.
std::string error_text(const std::exception& e);

/// The one check of an integer option, where it is parsed: an integer in
/// [min, max] ("--dp: 1073741824 is more than the supported 65536",
/// "'1.5' is not an integer"). `unit` follows the maximum in the message.
CLI::Validator integer_in(long long min, long long max, const std::string& unit = "");
/// The one check of a number option, where it is parsed: finite and in
/// [min, max] (above `min` when `above_min`): "--lr: nan is not a finite
/// number", "--timeout: 1e308 is more than the supported 1000000".
CLI::Validator number_in(double min, double max, bool above_min = false);

/// The one rule for empty values: every option of `app` and its subcommands
/// that takes a value refuses "" ("--recompute: an empty value; give one or
/// leave the option out"), so no option reads '' as if it were absent. Call
/// once, after every option is added.
void refuse_empty_values(CLI::App& app);

/// An integer option whose value may not exceed `max` (a limits.h limit):
/// "--pp: 99999999999 is more than the supported 65536 ranks".
CLI::Option* add_count_option(CLI::App& app, const std::string& names, int& value,
                              const std::string& help, long long max, const std::string& unit);
/// -v/--stages-per-rank: when given, an integer in 1..limits::kMaxStagesPerRank
/// (ShapeError below 1, named as the planner names it, prefixed with
/// `*schedule` when given and set).
CLI::Option* add_stages_per_rank_option(CLI::App& app, int& v, const std::string& help,
                                        const std::string* schedule = nullptr);

/// -s/--schedule, -p/--pp, -m/--microbatches, -v/--stages-per-rank.
/// `required`: whether -s/-p/-m must be given.
void add_problem_options(CLI::App& app, Problem& problem, bool required);

/// The first of `names` given on `app` ("" when none).
std::string given_option(const CLI::App& app, const std::vector<std::string>& names);
/// The one exclusive-flag rule: when `option` and `other` were both given on
/// `app`, throws InputError "give A or B, not both (why)". Empty names pass.
void refuse_together(const CLI::App& app, const std::string& option, const std::string& other,
                     const std::string& why);

/// The one catch point: runs `body`; an exception is reported on stderr
/// ("pipeplan: error: ...") and mapped to its exit code by classify().
int guarded(const std::function<int()>& body);

/// The process arguments, recorded by main() (for commands that re-exec).
void set_raw_args(int argc, char** argv);
const std::vector<std::string>& raw_args();

/// Reads a whole file, or stdin for "-". Throws InputError when unreadable.
std::string read_input(const std::string& path);

/// Output target: stdout for "" or "-", else the file (opened on first use,
/// error on failure). Keep the object alive while writing.
class Output {
 public:
  explicit Output(const std::string& path);
  std::ostream& stream();
  /// Flushes and reports a write failure as InputError.
  void close();

 private:
  std::string path_;
  std::unique_ptr<std::ostream> file_;
};

/// Writes every file (path, text) or none: each into a temporary file beside
/// it, then renamed into place. A target that exists and is not a regular
/// file, or a temporary file that cannot be written, is refused (InputError)
/// before any target changes; the temporary files are removed on failure.
void write_all_or_none(const std::vector<std::pair<std::string, std::string>>& files);

/// Writes `plan` as `format`: json, csv, torch-csv, text or timeline (the
/// plan formats' names in every -f option that writes a plan); torch-csv for
/// torch `torch`.
void write_plan(const Plan& plan, const std::string& format, std::ostream& out,
                TorchVersion torch = kTorchDefaultVersion);

/// Reads a plan file (JSON or CSV, detected from content) or "-". `csv`
/// supplies what a CSV lacks; for JSON its set fields must agree with the file.
/// `format`, when given, receives the detected format.
Plan load_plan(const std::string& path, const CsvReadOptions& csv = {},
               PlanFormat* format = nullptr);

/// --mapping loop|v, -m/--microbatches and, when `with_schedule`,
/// -s/--schedule: the metadata of CSV input (torch files carry none).
void add_csv_options(CLI::App& app, CsvReadOptions& csv, bool with_schedule = true);

}  // namespace pipeplan::cli
