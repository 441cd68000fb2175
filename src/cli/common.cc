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

Plan load_plan(const std::string& path) {
  std::string text = read_input(path);
  return parse_plan(text, path == "-" ? "<stdin>" : path);
}

}  // namespace pipeplan::cli
