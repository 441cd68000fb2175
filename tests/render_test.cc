// Renderers: SVG geometry, Chrome trace structure (slices, flows), the scaled
// text timeline, and the docs pictures that must match the renderer.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/planner.h"
#include "pipeplan/render.h"
#include "pipeplan/simulate.h"
#include "test_util.h"

using namespace pipeplan;
using pipeplan::test::run_cli;

namespace {

SimOptions unit_costs() {
  SimOptions o;
  o.costs = parse_cost_spec("F=1,I=1,W=1");
  return o;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
  return n;
}

std::size_t computes(const Plan& p) {
  std::size_t n = 0;
  for (const auto& list : p.ranks)
    for (const auto& a : list) n += is_compute(a.type);
  return n;
}

// The docs pictures: every schedule at pp 4 with 8 microbatches (or the
// first shape it accepts), unit costs, zero transfer cost, lowered plan.
Plan docs_plan(const ScheduleInfo& info) {
  for (auto [p, m] : {std::pair{4, 8}, std::pair{4, 12}, std::pair{4, 16}, std::pair{2, 8}}) {
    try {
      return plan(Problem{info.name, p, m, 0});
    } catch (const ShapeError&) {
    }
  }
  FAIL("no docs shape for " << info.name);
  return {};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("render: SVG draws every compute to scale with labels and a legend", "[render]") {
  const Plan p = plan(Problem{"gpipe", 2, 2, 0});
  const SimResult r = simulate(p, unit_costs());
  SvgOptions o;
  o.px_per_unit = 10;
  std::ostringstream out;
  write_svg(p, r, o, out);
  const std::string svg = out.str();
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(count(svg, "<title>") == computes(p));
  // Rank 1's B1 runs 3..5: x = 64 + 3*10, width 2*10, second row y = 34 + 28.
  CHECK(svg.find("<rect x=\"94\" y=\"62\" width=\"20\" height=\"22\" fill=\"#59a14f\" "
                 "stroke=\"#fff\" stroke-width=\"0.5\"><title>1B1 3..5</title></rect>") !=
        std::string::npos);
  CHECK(svg.find(">gpipe: pp 2, microbatches 2, stages per rank 1; makespan 9, bubble "
                 "33.33%</text>") != std::string::npos);
  CHECK(svg.find(">B backward</text>") != std::string::npos);
  CHECK(svg.find(">W weight grad</text>") == std::string::npos);  // absent types stay out
  CHECK(count(svg, "<line x1=") == 11);                           // axis + ticks 0..9, no arrows
  o.arrows = true;
  std::ostringstream with_arrows;
  write_svg(p, r, o, with_arrows);
  CHECK(count(with_arrows.str(), "marker-end=\"url(#arrow)\"") == r.transfers.size());
}

TEST_CASE("render: SVG escapes names and refuses a failed simulation", "[render]") {
  Plan p = plan(Problem{"1f1b", 2, 2, 0});
  p.meta.schedule = "a<b&c";
  std::ostringstream out;
  write_svg(p, simulate(p, unit_costs()), {}, out);
  CHECK(out.str().find(">a&lt;b&amp;c: pp 2") != std::string::npos);
  SimResult failed;
  failed.problems.push_back({"sim-deadlock", 0, 0, "0F0", "stuck: test"});
  CHECK_THROWS_AS(write_svg(p, failed, {}, out), InputError);
}

TEST_CASE("render: Chrome trace has one track per rank and a flow per transfer", "[render]") {
  for (const char* name : {"1f1b", "zbv", "dualpipev"}) {
    INFO(name);
    const Plan p = plan(Problem{name, 4, 8, 0});
    SimOptions o = unit_costs();
    o.costs.comm_latency = 0.25;
    const SimResult r = simulate(p, o);
    REQUIRE(r.ok());
    std::ostringstream out;
    write_chrome_trace(p, r, out);
    std::ostringstream again;
    write_chrome_trace(p, r, again);
    CHECK(out.str() == again.str());  // deterministic
    const auto doc = nlohmann::json::parse(out.str());
    CHECK(doc["displayTimeUnit"] == "ms");
    struct Slice {
      double ts, dur;
    };
    std::vector<std::vector<Slice>> slices(4);
    std::size_t names = 0, starts = 0, finishes = 0;
    for (const auto& e : doc["traceEvents"]) {
      CHECK(e["pid"] == 0);
      if (e["ph"] == "M" && e["name"] == "thread_name") ++names;
      if (e["ph"] == "X") slices[e["tid"].get<std::size_t>()].push_back({e["ts"], e["dur"]});
    }
    CHECK(names == 4);
    std::size_t total = 0;
    for (const auto& s : slices) total += s.size();
    CHECK(total == computes(p));
    // Every flow end lies strictly inside a slice of its own track, so
    // Perfetto binds it to that slice.
    auto inside = [&](std::size_t tid, double ts) {
      for (const Slice& s : slices[tid])
        if (s.ts < ts && ts < s.ts + s.dur) return true;
      return false;
    };
    for (const auto& e : doc["traceEvents"]) {
      if (e["ph"] != "s" && e["ph"] != "f") continue;
      (e["ph"] == "s" ? starts : finishes) += 1;
      CHECK(e["cat"] == "p2p");
      if (e["ph"] == "f") CHECK(e["bp"] == "e");
      CHECK(inside(e["tid"].get<std::size_t>(), e["ts"].get<double>()));
    }
    CHECK(starts == r.transfers.size());
    CHECK(finishes == r.transfers.size());
  }
}

TEST_CASE("render: text timeline is scaled to time", "[render]") {
  const Plan p = plan(Problem{"gpipe", 2, 2, 0});
  const SimResult r = simulate(p, unit_costs());
  std::ostringstream out;
  write_text_timeline(p, r, {}, out);
  CHECK(out.str() ==
        "  time |0              5\n"
        "rank 0 |F0 F1 .........B1    B0    |\n"
        "rank 1 |...F0 F1 B1    B0    ......|\n"
        "scale: 1 column = 0.3333 time units; F forward, B backward, I input grad, W weight grad, "
        "F3/B1 overlapped, '.' idle\n"
        "makespan 9, bubble 33.33%\n");
  TextTimelineOptions narrow;
  narrow.max_columns = 9;  // one column per unit: labels shrink to letters
  std::ostringstream small;
  write_text_timeline(p, r, narrow, small);
  CHECK(small.str().find("rank 0 |FF...B1B0|\n") != std::string::npos);
}

TEST_CASE("render: text timeline marks the second local stage in lowercase", "[render]") {
  const Plan p = plan(Problem{"zbv", 2, 2, 0});
  const SimResult r = simulate(p, unit_costs());
  std::ostringstream out;
  write_text_timeline(p, r, {}, out);
  CHECK(out.str().find("rank 0 |F0 F1 ...f0 i0 w0 f1 i1 w1 I0 W0 ...I1 W1 |\n") !=
        std::string::npos);
  CHECK(out.str().find("rank 1 |...F0 f0 F1 f1 i0 w0 I0 W0 i1 w1 I1 W1 ...|\n") !=
        std::string::npos);
  CHECK(out.str().find("; lowercase: odd local stage\n") != std::string::npos);
}

TEST_CASE("render: CLI writes SVG, Chrome trace and text", "[render][cli]") {
  const std::string dir = pipeplan::test::temp_file("render.keep", "");
  const std::string svg = dir + ".svg", trace = dir + ".json";
  auto r = run_cli({"render", "-s", "1f1b", "-p", "4", "-m", "8", "--svg", svg, "--chrome-trace",
                    trace, "--text", "--cost", "F=1,B=2"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("makespan 33, bubble 27.27%\n") != std::string::npos);
  CHECK(read_file(svg).find("</svg>") != std::string::npos);
  CHECK(nlohmann::json::parse(read_file(trace))["otherData"]["makespan"] == 33);
  r = run_cli({"render", "-s", "1f1b", "-p", "4", "-m", "8"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("nothing to render: give --svg FILE, --chrome-trace FILE and/or --text") !=
        std::string::npos);
}

TEST_CASE("render: docs/img holds each schedule's current SVG timeline", "[render][docs]") {
  // Regenerate after changing a schedule, the lowering or the renderer:
  //   PIPEPLAN_UPDATE_DOCS=1 <build>/tests/render_test '[docs]'
  const char* update = std::getenv("PIPEPLAN_UPDATE_DOCS");
  const bool write = update != nullptr && std::string(update) == "1";
  const std::string gallery = read_file(std::string(PIPEPLAN_SOURCE_DIR) + "/docs/simulator.md");
  for (const ScheduleInfo& info : schedules()) {
    INFO(info.name);
    const Plan p = docs_plan(info);
    const SimResult r = simulate(p, unit_costs());
    REQUIRE(r.ok());
    std::ostringstream out;
    write_svg(p, r, {}, out);
    const std::string path = std::string(PIPEPLAN_SOURCE_DIR) + "/docs/img/" + info.name + ".svg";
    if (write) {
      std::ofstream(path, std::ios::binary) << out.str();
      continue;
    }
    const std::string committed = read_file(path);
    if (committed != out.str())
      FAIL("docs/img/" << info.name << ".svg is " << (committed.empty() ? "missing" : "stale")
                       << "; regenerate it with PIPEPLAN_UPDATE_DOCS=1 "
                          "<build>/tests/render_test '[docs]' and commit the result");
    CHECK(gallery.find("](img/" + info.name + ".svg)") != std::string::npos);
  }
}
