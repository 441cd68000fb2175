#include "cli/common.h"

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "pipeplan/error.h"
#include "pipeplan/io.h"

namespace pipeplan::cli {

void add_problem_options(CLI::App& app, Problem& problem, bool required) {
  auto* s = app.add_option("-s,--schedule", problem.schedule, "Schedule name or alias (see 'pipeplan list')");
  auto* p = app.add_option("-p,--pp", problem.pp_degree, "Pipeline-parallel degree (ranks)");
  auto* m = app.add_option("-m,--microbatches", problem.num_microbatches, "Number of microbatches");
  app.add_option("-v,--stages-per-rank", problem.stages_per_rank,
                 "Stages per rank (default: the schedule's)");
  if (required) {
    s->required();
    p->required();
    m->required();
  }
}

std::string read_input(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open '" + path + "' for reading");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError("cannot read '" + path + "'");
  return text;
}

std::string error_text(const std::exception& e) {
  if (const auto* shape = dynamic_cast<const ShapeError*>(&e)) return shape->message("-p", "-m", "-v");
  return e.what();
}

Failure classify(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const PlanRejected& x) {
    return {kExitInvalid, "error", x.what()};
  } catch (const CommError& x) {
    return {kExitPeer, "error", x.what()};
  } catch (const InputError& x) {
    return {kExitUsage, "error", error_text(x)};
  } catch (const std::bad_alloc&) {
    return {kExitInternal, "internal error", "out of memory"};
  } catch (const std::exception& x) {
    return {kExitInternal, "internal error", x.what()};
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
    if (!*f) throw InputError("cannot open '" + path_ + "' for writing");
    file_ = std::move(f);
  }
  return *file_;
}

void Output::close() {
  std::ostream& s = stream();
  s.flush();
  if (!s) throw InputError("cannot write '" + (path_.empty() ? std::string("stdout") : path_) + "'");
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
      throw InputError(option + " " + given + " contradicts " + source + ", which says " + file);
    };
    if (csv.mapping && *csv.mapping != m.mapping)
      clash("--mapping", std::string(to_string(*csv.mapping)), "stage_to_rank " + std::string(to_string(m.mapping)));
    if (csv.num_microbatches && *csv.num_microbatches != m.num_microbatches)
      clash("--microbatches", std::to_string(*csv.num_microbatches),
            "num_microbatches " + std::to_string(m.num_microbatches));
    if (csv.schedule != CsvReadOptions{}.schedule && csv.schedule != m.schedule)
      clash("--schedule", csv.schedule, "schedule " + m.schedule);
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
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("--forward-only", csv.forward_only,
               "The plan is forward-only (inference: F, SEND_F, RECV_F); no backward is owed");
  if (with_schedule)
    app.add_option("-s,--schedule", csv.schedule,
                   "Schedule name recorded for a CSV file (a known name also selects its lowering)");
}

}  // namespace pipeplan::cli
