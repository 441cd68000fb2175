#include "cli/common.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "frontend/read_file.h"
#include "ir/numbers.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"

namespace pipeplan::cli {

namespace {

// An integer option at most `max` ("--pp: 99999999999 is more than the
// supported 65536 ranks"); lower bounds are the planner's to word.
CLI::Validator at_most(long long max, const std::string& unit) {
  return CLI::Validator(
      [max, unit](std::string& text) -> std::string {
        long long x = 0;
        const bool digits =
            !text.empty() &&
            text.find_first_not_of("0123456789", text[0] == '-' ? 1 : 0) == std::string::npos &&
            text != "-";
        if (digits && text[0] != '-' && (!CLI::detail::lexical_cast(text, x) || x > max))
          return limits::excerpt(text) + " is more than the supported " + std::to_string(max) +
                 unit;
        // Decimal only: CLI11 would also read 0x10, 0o20 and 0b10000.
        if (!digits || !CLI::detail::lexical_cast(text, x))
          return "'" + limits::excerpt(text) + "' is not an integer";
        return {};
      },
      "INT<=" + std::to_string(max));
}

}  // namespace

void write_plan(const Plan& plan, const std::string& format, std::ostream& out,
                TorchVersion torch) {
  if (format == "json") write_json(plan, out);
  else if (format == "csv") write_csv(plan, out);
  else if (format == "torch-csv") write_torch_csv(plan, out, torch);
  else if (format == "text") write_text(plan, out);
  else write_timeline(plan, out);
}

CLI::Validator integer_in(long long min, long long max, const std::string& unit) {
  return CLI::Validator(
      [min, max, unit](std::string& text) -> std::string {
        const bool negative = !text.empty() && text[0] == '-';
        const bool digits =
            text.size() > (negative ? 1u : 0u) &&
            text.find_first_not_of("0123456789", negative ? 1 : 0) == std::string::npos;
        if (!digits) return "'" + limits::excerpt(text) + "' is not an integer";
        long long x = 0;
        // Too many digits for 64 bits: beyond either bound.
        const bool fits = CLI::detail::lexical_cast(text, x);
        if ((!fits && !negative) || (fits && x > max))
          return limits::excerpt(text) + " is more than the supported " + std::to_string(max) +
                 unit;
        if (!fits || x < min)
          return limits::excerpt(text) + " is below the minimum " + std::to_string(min);
        return {};
      },
      "INT in " + std::to_string(min) + ".." + std::to_string(max));
}

CLI::Validator number_in(double min, double max, bool above_min) {
  return CLI::Validator(
      [min, max, above_min](std::string& text) -> std::string {
        double x = 0;
        const char* begin = text.c_str();
        char* end = nullptr;
        errno = 0;
        x = std::strtod(begin, &end);
        // Decimal only: strtod would also read hexadecimal (0x10, 0x1p4).
        if (text.empty() || end != begin + text.size() ||
            text.find_first_of("xXpP") != std::string::npos)
          return "'" + limits::excerpt(text) + "' is not a number";
        if (!std::isfinite(x)) return limits::excerpt(text) + " is not a finite number";
        if (x > max)
          return limits::excerpt(text) + " is more than the supported " +
                 detail::format_number(max);
        if (above_min ? !(x > min) : x < min)
          return limits::excerpt(text) +
                 (above_min ? " is not more than " : " is below the minimum ") +
                 detail::format_number(min);
        return {};
      },
      std::string("NUMBER in ") + (above_min ? "(" : "[") + detail::format_number(min) + ", " +
          detail::format_number(max) + "]");
}

void refuse_empty_values(CLI::App& app) {
  const CLI::Validator non_empty(
      [](std::string& text) -> std::string {
        return text.empty() ? "an empty value; give one or leave the option out" : "";
      },
      "");
  for (CLI::Option* opt : app.get_options())
    if (opt->get_expected_min() > 0 && opt->get_type_size_min() > 0)
      opt->transform(non_empty);  // first: an empty number reads as empty, not "not a number"
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_empty_values(*sub);
}

CLI::Option* add_count_option(CLI::App& app, const std::string& names, int& value,
                              const std::string& help, long long max, const std::string& unit) {
  return app.add_option(names, value, help)->check(at_most(max, unit));
}

CLI::Option* add_stages_per_rank_option(CLI::App& app, int& v, const std::string& help,
                                        const std::string* schedule) {
  // One rule: a given -v is a count of stages, at least 1; leaving it out
  // means the schedule's default (-v 0 used to mean the default silently).
  // Worded as the planner words a bad stages_per_rank, so the CLI and the
  // Python module say the same. CLI11 runs this after -s is stored.
  return app
      .add_option_function<int>(
          "-v,--stages-per-rank",
          [&v, schedule](const int& x) {
            if (x < 1) {
              const std::string who = schedule && !schedule->empty() ? *schedule + ": " : "";
              throw ShapeError(
                  who + "stages_per_rank must be positive, got " + std::to_string(x),
                  x == 0 ? "pass {v} 1 or more, or leave -v out for the schedule's default"
                         : "pass {v} 1 or more");
            }
            v = x;
          },
          help)
      ->check(at_most(limits::kMaxStagesPerRank, " stages per rank"));
}

void add_problem_options(CLI::App& app, Problem& problem, bool required) {
  auto* s = app.add_option("-s,--schedule", problem.schedule,
                           "Schedule name or alias (see 'pipeplan list')");
  auto* p = add_count_option(app, "-p,--pp", problem.pp_degree, "Pipeline-parallel degree (ranks)",
                             limits::kMaxRanks, " ranks");
  auto* m = add_count_option(app, "-m,--microbatches", problem.num_microbatches,
                             "Number of microbatches", limits::kMaxMicrobatches, " microbatches");
  add_stages_per_rank_option(app, problem.stages_per_rank,
                             "Stages per rank (default: the schedule's)", &problem.schedule);
  if (required) {
    s->required();
    p->required();
    m->required();
  }
}

std::string read_input(const std::string& path) {
  return path == "-" ? frontend::read_stdin() : frontend::read_file(path);
}

std::string error_text(const std::exception& e) {
  if (const auto* shape = dynamic_cast<const ShapeError*>(&e))
    return shape->message("-p", "-m", "-v");
  return e.what();
}

Failure classify(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    return {kExitInternal, "internal error", "out of memory"};
  } catch (const std::exception& x) {
    const int code = exit_code(x);
    return {code, code == kExitInternal ? "internal error" : "error", error_text(x)};
  } catch (...) {
    return {kExitInternal, "internal error", "unknown exception"};
  }
}

int guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (...) {
    const Failure f = classify(std::current_exception());
    std::cerr << "pipeplan: " << f.label << ": " << f.message << "\n";
    return f.code;
  }
}

namespace {
std::vector<std::string>& raw_args_store() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace

void set_raw_args(int argc, char** argv) { raw_args_store().assign(argv, argv + argc); }
const std::vector<std::string>& raw_args() { return raw_args_store(); }

Output::Output(const std::string& path) : path_(path) {}

std::ostream& Output::stream() {
  if (path_.empty() || path_ == "-") return std::cout;
  if (!file_) {
    auto f = std::make_unique<std::ofstream>(path_, std::ios::binary | std::ios::trunc);
    if (!*f) throw InputError("cannot open '" + limits::excerpt(path_) + "' for writing");
    file_ = std::move(f);
  }
  return *file_;
}

void Output::close() {
  std::ostream& s = stream();
  s.flush();
  if (!s)
    throw InputError("cannot write '" +
                     (path_.empty() ? std::string("stdout") : limits::excerpt(path_)) + "'");
}

void write_all_or_none(const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  std::vector<std::string> temps;
  try {
    for (const auto& [path, text] : files) {
      std::error_code ec;
      const fs::file_status st = fs::symlink_status(path, ec);
      if (fs::exists(st) && !fs::is_regular_file(st))
        throw InputError("cannot write '" + limits::excerpt(path) +
                         "': it exists and is not a file (nothing written)");
      temps.push_back(path + ".pipeplan-tmp");
      std::ofstream out(temps.back(), std::ios::binary | std::ios::trunc);
      out << text;
      out.flush();
      if (!out) throw InputError("cannot write '" + limits::excerpt(path) + "' (nothing written)");
    }
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::error_code ec;
      fs::rename(temps[i], files[i].first, ec);
      if (ec)
        throw InputError("cannot write '" + limits::excerpt(files[i].first) + "': " + ec.message() +
                         (i == 0 ? " (nothing written)" : ""));
    }
  } catch (...) {
    std::error_code ignored;
    for (const std::string& t : temps) fs::remove(t, ignored);
    throw;
  }
}

std::string given_option(const CLI::App& app, const std::vector<std::string>& names) {
  for (const std::string& name : names)
    if (app.count(name) > 0) return name;
  return {};
}

void refuse_together(const CLI::App& app, const std::string& option, const std::string& other,
                     const std::string& why) {
  if (option.empty() || other.empty() || app.count(option) == 0 || app.count(other) == 0) return;
  throw InputError("give " + option + " or " + other + ", not both (" + why + ")");
}

Plan load_plan(const std::string& path, const CsvReadOptions& csv, PlanFormat* format) {
  std::string text = read_input(path);
  const std::string source = path == "-" ? "<stdin>" : path;
  Plan plan = parse_plan(text, source, csv);
  const PlanFormat detected = detect_format(text);
  if (format) *format = detected;
  if (detected == PlanFormat::Json) {
    // JSON states its metadata; CSV options given with it must agree.
    const PlanMeta& m = plan.meta;
    auto clash = [&](const std::string& option, const std::string& given, const std::string& file) {
      throw InputError(option + " " + limits::excerpt(given) + " contradicts " + source +
                       ", which says " + file);
    };
    if (csv.mapping && *csv.mapping != m.mapping)
      clash("--mapping", std::string(to_string(*csv.mapping)),
            "stage_to_rank " + std::string(to_string(m.mapping)));
    if (csv.num_microbatches && *csv.num_microbatches != m.num_microbatches)
      clash("--microbatches", std::to_string(*csv.num_microbatches),
            "num_microbatches " + std::to_string(m.num_microbatches));
    if (csv.schedule != CsvReadOptions{}.schedule && csv.schedule != m.schedule)
      clash("--schedule", csv.schedule, "schedule " + limits::excerpt(m.schedule));
    // --forward-only states what the plan is for; a file that says so
    // already needs no flag, and one that does not (older or hand-written
    // JSON) is taken at the flag's word.
    if (csv.forward_only) plan.meta.forward_only = true;
  }
  return plan;
}

void add_csv_options(CLI::App& app, CsvReadOptions& csv, bool with_schedule) {
  app.add_option_function<std::string>(
         "--mapping", [&csv](const std::string& s) { csv.mapping = parse_stage_mapping(s); },
         "Stage placement of a CSV file (default: inferred from who runs which stage)")
      ->check(CLI::IsMember({"loop", "v"}));
  app.add_option_function<int>(
         "-m,--microbatches", [&csv](int m) { csv.num_microbatches = m; },
         "Microbatch count of a CSV file (default: largest microbatch + 1)")
      ->check(integer_in(1, limits::kMaxMicrobatches, " microbatches"));
  app.add_flag("--forward-only", csv.forward_only,
               "The plan is forward-only (inference: F, SEND_F, RECV_F); no backward is owed");
  if (with_schedule)
    app.add_option(
        "-s,--schedule", csv.schedule,
        "Schedule name recorded for a CSV file (a known name also selects its lowering)");
}

}  // namespace pipeplan::cli
