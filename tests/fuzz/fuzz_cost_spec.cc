// libFuzzer target: the cost spec ("F=1,B=2,...", --cost and cost=) and the
// transfer cost ("LATENCY[,BANDWIDTH]", --comm). Properties: what is
// accepted is finite and non-negative; the model written back as a spec
// (exact numbers) reads to the same model; errors stay short (quoted text
// is capped) and carry no control character.
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "pipeplan/cost_options.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"

namespace {

using namespace pipeplan;

std::string exact(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

void check_message(const InputError& e) {
  const std::string m = e.what();
  fuzz::check(m.size() <= 600, "an error message of " + std::to_string(m.size()) + " bytes");
  for (char c : m)
    fuzz::check(static_cast<unsigned char>(c) >= 0x20 || c == '\n',
                "an error message carries a control character");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const CostModel c = parse_cost_spec(text, CostModel{}, "fuzz");
    for (double x : {c.f, c.b, c.i, c.w, c.overlap.value_or(0)})
      fuzz::check(std::isfinite(x) && x >= 0, "a non-finite or negative cost was accepted");
    std::string spec =
        "F=" + exact(c.f) + ",B=" + exact(c.b) + ",I=" + exact(c.i) + ",W=" + exact(c.w);
    if (c.overlap) spec += ",OVERLAP_F_B=" + exact(*c.overlap);
    const CostModel again = parse_cost_spec(spec, CostModel{}, "written");
    fuzz::check(again.f == c.f && again.b == c.b && again.i == c.i && again.w == c.w &&
                    again.overlap == c.overlap,
                "a cost model written as a spec reads back different");
  } catch (const InputError& e) {
    check_message(e);
  }
  CostOptions given;
  given.comm = text;
  try {
    const SimOptions o = make_sim_options(given);
    fuzz::check(std::isfinite(o.costs.comm_latency) && o.costs.comm_latency >= 0 &&
                    std::isfinite(o.costs.comm_bandwidth) && o.costs.comm_bandwidth >= 0,
                "a non-finite or negative transfer cost was accepted");
  } catch (const InputError& e) {
    check_message(e);
  }
  return 0;
}
