// pipeplan_bench: the benchmark as a standalone program (the same code runs
// as `pipeplan bench`). Options mirror the subcommand's; see bench/bench.h.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace {

using pipeplan::bench::BenchOptions;

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "pipeplan_bench: " << why << "\n"
            << "usage: pipeplan_bench [-s SCHEDULE]... [-p PP] [-v V] [-m M[,M...]] [--repeat N]\n"
            << "                      [--min-time SECONDS] [--no-memory] [--csv]\n"
            << "defaults: interleaved-1f1b (v=4), zbv and dualpipev (v=2); p=64;\n"
            << "          m=128,256,512,1024,2048; each pass runs at least 3 times and until\n"
            << "          0.5 s went by (at most 200 runs); the minimum is reported\n";
  std::exit(2);
}

int to_int(const std::string& s, const char* what) {
  try {
    std::size_t used = 0;
    int v = std::stoi(s, &used);
    if (used == s.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  usage(std::string("bad ") + what + " '" + s + "'");
}

BenchOptions parse_args(int argc, char** argv) {
  BenchOptions o;
  std::vector<std::string> a(argv + 1, argv + argc);
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto value = [&]() -> const std::string& {
      if (i + 1 >= a.size()) usage(a[i] + " needs a value");
      return a[++i];
    };
    if (a[i] == "-s" || a[i] == "--schedule") o.schedules.push_back(value());
    else if (a[i] == "-p" || a[i] == "--pp") o.pp = to_int(value(), "pp");
    else if (a[i] == "-v" || a[i] == "--stages-per-rank") o.stages_per_rank = to_int(value(), "v");
    else if (a[i] == "-m" || a[i] == "--microbatches") {
      o.microbatches.clear();
      std::stringstream ss(value());
      for (std::string item; std::getline(ss, item, ',');)
        o.microbatches.push_back(to_int(item, "m"));
    } else if (a[i] == "--repeat") o.repeat = to_int(value(), "repeat");
    else if (a[i] == "--min-time") {
      try {
        o.min_time = std::stod(value());
      } catch (const std::exception&) {
        usage("bad --min-time");
      }
    } else if (a[i] == "--no-memory") {
      o.memory = false;
    } else if (a[i] == "--csv") o.csv = true;
    else if (a[i] == "-h" || a[i] == "--help") usage("help");
    else usage("unknown argument '" + a[i] + "'");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    pipeplan::bench::run_bench(parse_args(argc, argv), std::cout);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "pipeplan_bench: " << e.what() << "\n";
    return 1;
  }
}
