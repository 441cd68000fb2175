// torch.profiler traces in: traces generated here in the format kineto
// writes for torch's schedule runtime (docs/torch-profiler.md lists the
// fields relied on), imported and calibrated back to the costs they were
// generated from, with and without device events.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/io.h"
#include "pipeplan/planner.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"
#include "pipeplan/trace.h"
#include "test_util.h"

using namespace pipeplan;
using nlohmann::json;
using pipeplan::test::run_cli;

namespace {

struct Gen {
  bool device = true;  // GPU kernels (else host spans and gloo ops only)
  bool flows = false;  // link half of the kernels by ac2g flows, not args.correlation
  bool profiler_steps = false;
  int steps = 3;
  double warmup = 1.5;  // step 1 this much slower
  // torch 2.15 records c10d's host P2P ops as user_annotation ("gloo:send");
  // NCCL titles them with the peers ("nccl:send 0->1", "nccl:recv 1<-0").
  std::string comm_cat = "user_annotation";
  bool nccl_titles = false;
  bool param_comms = false;  // a record_param_comms cpu_op with 256 floats in each P2P span
};

constexpr std::int64_t kBase = 1700000000000000000LL;  // ns
constexpr double kEps = 1e-6;                          // ms a host post takes

// One rank's trace as kineto writes it: X spans "PP:<action>" on the main
// thread (cat user_annotation), cuda_runtime launches with args.correlation,
// kernels on device streams, and, for the host run, gloo:send/recv ops
// (user_annotation, as torch 2.15.0 writes them; tests/interop/torch_traces).
std::vector<std::string> torch_traces(const Plan& plan, const CostModel& costs, const Gen& g) {
  const std::size_t ranks = plan.ranks.size();
  std::vector<json> events(ranks, json::array());
  std::int64_t corr = 1000;
  double origin = 5.0;  // ms since kBase
  // Rank r's clock base is r ms later: its ts are relative to its own base.
  auto us = [](std::size_t r, double ms) { return ms * 1000.0 - static_cast<double>(r) * 1000.0; };
  for (int k = 1; k <= g.steps; ++k) {
    SimOptions o;
    o.costs = costs;
    o.transport = Transport::Eager;
    if (k == 1)
      o.costs.f *= g.warmup, o.costs.b *= g.warmup, o.costs.i *= g.warmup, o.costs.w *= g.warmup;
    const SimResult sim = simulate(plan, o);
    REQUIRE(sim.ok());
    // Each SEND/RECV's transfer.
    std::map<std::pair<int, int>, Transfer> by_end;
    for (const Transfer& t : sim.transfers) {
      by_end[{t.src_rank, t.src_index}] = t;
      by_end[{t.dst_rank, t.dst_index}] = t;
    }
    const double dev = g.device ? 1.0 : 0.0;  // device work starts after the host queued it
    double step_end = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      json& ev = events[r];
      const auto& list = plan.ranks[r];
      double host = origin, first = 1e300, last = 0;
      auto span = [&](const std::string& name, double start, double end, const char* cat, int tid) {
        ev.push_back({{"ph", "X"},
                      {"cat", cat},
                      {"name", name},
                      {"pid", 4242 + r},
                      {"tid", tid},
                      {"ts", us(r, start)},
                      {"dur", (end - start) * 1000.0},
                      {"args", {{"External id", corr}}}});
        first = std::min(first, start), last = std::max(last, end);
      };
      auto kernel = [&](const std::string& name, double start, double end, double launch,
                        int stream, int tid) {
        const std::int64_t c = ++corr;
        const bool by_flow = g.flows && c % 2 == 0;
        json l = {{"ph", "X"},
                  {"cat", "cuda_runtime"},
                  {"name", "cudaLaunchKernel"},
                  {"pid", 4242 + r},
                  {"tid", tid},
                  {"ts", us(r, launch)},
                  {"dur", 0.5},
                  {"args", {{"cbid", 211}}}};
        json kv = {{"ph", "X"},
                   {"cat", "kernel"},
                   {"name", name},
                   {"pid", 0},
                   {"tid", stream},
                   {"ts", us(r, start)},
                   {"dur", (end - start) * 1000.0},
                   {"args", {{"device", 0}, {"stream", stream}, {"queued", 0}}}};
        if (by_flow) {
          ev.push_back({{"ph", "s"},
                        {"id", c},
                        {"pid", 4242 + r},
                        {"tid", tid},
                        {"ts", us(r, launch)},
                        {"cat", "ac2g"},
                        {"name", "ac2g"}});
          ev.push_back({{"ph", "f"},
                        {"id", c},
                        {"pid", 0},
                        {"tid", stream},
                        {"ts", us(r, start)},
                        {"cat", "ac2g"},
                        {"name", "ac2g"},
                        {"bp", "e"}});
        } else {
          l["args"]["correlation"] = c;
          kv["args"]["correlation"] = c;
        }
        ev.push_back(l);
        ev.push_back(kv);
      };
      double prev_end = origin;
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        const ActionTime t = sim.times[r][i];
        const std::string name = "PP:" + to_string(a);
        const bool backward = a.type != ActionType::F;
        if (g.device) {
          const double hs = host + 0.002 * static_cast<double>(i), he = hs + 0.001;
          span(name, hs, he, "user_annotation", 1);
          if (is_compute(a.type)) {
            const double s = origin + dev + t.start, d = t.end - t.start;
            // Backward kernels come from the autograd thread (tid 2).
            const int tid = backward ? 2 : 1;
            kernel("ampere_bf16_gemm", s, s + 0.3 * d, hs + 0.0002, 7, tid);
            kernel("vectorized_elementwise", s + 0.35 * d, s + 0.7 * d, hs + 0.0004, 7, tid);
            kernel("ampere_bf16_gemm", s + 0.72 * d, s + d, hs + 0.0006, 7, tid);
          } else if (is_comm(a.type)) {
            const Transfer& tr = by_end.at({static_cast<int>(r), static_cast<int>(i)});
            kernel("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
                   origin + dev + tr.start, origin + dev + tr.end, hs + 0.0005, 20, 1);
          }
          step_end = std::max(step_end, origin + dev + t.end);
        } else {
          // A CPU rank: one host thread runs everything in program order.
          double s = prev_end, e = prev_end + kEps;
          if (is_compute(a.type)) {
            e = std::max(prev_end, origin + t.end);
          } else if (is_comm(a.type)) {
            const Transfer& tr = by_end.at({static_cast<int>(r), static_cast<int>(i)});
            s = std::max(prev_end, is_send(a.type) ? origin + tr.start : prev_end);
            e = s + kEps;
            const std::string peer = std::to_string(r == 0 ? 1 : r - 1);
            const std::string title = !g.nccl_titles ? (is_send(a.type) ? "gloo:send" : "gloo:recv")
                                      : is_send(a.type)
                                          ? "nccl:send " + std::to_string(r) + "->" + peer
                                          : "nccl:recv " + std::to_string(r) + "<-" + peer;
            ev.push_back({{"ph", "X"},
                          {"cat", g.comm_cat},
                          {"name", title},
                          {"pid", 4242 + r},
                          {"tid", 1},
                          {"ts", us(r, s)},
                          {"dur", std::max(kEps, origin + tr.end - s) * 1000.0},
                          {"args", json::object()}});
          }
          if (g.param_comms && is_comm(a.type))
            ev.push_back(
                {{"ph", "X"},
                 {"cat", "cpu_op"},
                 {"name", "record_param_comms"},
                 {"pid", 4242 + r},
                 {"tid", 1},
                 {"ts", us(r, s)},
                 {"dur", kEps * 1000.0},
                 {"args", {{"In msg nelems", 256}, {"Out msg nelems", 256}, {"dtype", "Float"}}}});
          span(name, s, e, "user_annotation", 1);
          prev_end = e;
          step_end = std::max(step_end, e);
        }
        // Noise the import must skip.
        ev.push_back({{"ph", "X"},
                      {"cat", "cpu_op"},
                      {"name", "aten::mm"},
                      {"pid", 4242 + r},
                      {"tid", 1},
                      {"ts", us(r, host)},
                      {"dur", 0.1},
                      {"args", {{"Input Dims", {{2, 3}, {3, 4}}}}}});
      }
      if (g.profiler_steps)
        span("ProfilerStep#" + std::to_string(k), first - 0.0001, last + 0.0001, "user_annotation",
             1);
    }
    origin = step_end + 2.0;
  }
  std::vector<std::string> out;
  for (std::size_t r = 0; r < ranks; ++r) {
    json doc = {{"schemaVersion", 1},
                {"deviceProperties", json::array()},
                {"baseTimeNanoseconds", kBase + static_cast<std::int64_t>(r) * 1000000},
                {"displayTimeUnit", "ms"},
                {"traceEvents", events[r]}};
    if (r % 2 == 0)
      doc["distributedInfo"] = {{"backend", "nccl"}, {"rank", r}, {"world_size", ranks}};
    doc["traceEvents"].push_back({{"name", "process_name"},
                                  {"ph", "M"},
                                  {"pid", 4242 + r},
                                  {"tid", 0},
                                  {"args", {{"name", "python"}}}});
    out.push_back(doc.dump());
  }
  return out;
}

std::vector<TorchRankTrace> parsed(const std::vector<std::string>& texts) {
  std::vector<TorchRankTrace> out;
  for (std::size_t r = 0; r < texts.size(); ++r) {
    out.push_back(parse_torch_trace(texts[r], "rank" + std::to_string(r) + "_trace.json"));
    if (out.back().rank < 0) out.back().rank = static_cast<int>(r);
  }
  return out;
}

CostModel stage_costs_known(int stages) {
  CostModel c;
  c.f = 1.0, c.b = 2.2, c.i = 1.3, c.w = 0.9;
  for (int s = 0; s < stages; ++s) {
    const double k = 1.0 + 0.25 * s;
    c.stage_scales[s] = StageScale{k, k * 1.1, k * 1.2, k * 0.8};
  }
  c.comm_latency = 0.3;
  return c;
}

void check_recovered(const Plan& p, const Gen& g) {
  const CostModel costs = stage_costs_known(p.meta.num_stages());
  TorchImportReport rep;
  const Trace t = import_torch_traces(parsed(torch_traces(p, costs, g)), {}, &rep);
  CHECK(rep.steps == g.steps);
  CHECK(rep.ranks == p.meta.pp_degree);
  CHECK(t.plan.ranks == p.ranks);
  CHECK(t.plan.meta.mapping == p.meta.mapping);
  CHECK(check_trace(t).empty());
  const Calibration c = calibrate(t);
  CHECK(c.steps_used == g.steps - 1);
  const bool split = p.meta.schedule == "zbv";
  for (int s = 0; s < p.meta.num_stages(); ++s) {
    const StageScale k = costs.stage_scales.at(s);
    INFO("stage " << s);
    CHECK(c.stage_ms.at(s).f == Approx(costs.f * k.f).epsilon(1e-4));
    if (split) {
      CHECK(c.stage_ms.at(s).i == Approx(costs.i * k.i).epsilon(1e-4));
      CHECK(c.stage_ms.at(s).w == Approx(costs.w * k.w).epsilon(1e-4));
    } else {
      CHECK(c.stage_ms.at(s).b == Approx(costs.b * k.b).epsilon(1e-4));
    }
  }
  CHECK(c.transfers_used > 0);
  CHECK(c.comm_latency_ms == Approx(0.3).epsilon(1e-3));
}

}  // namespace

TEST_CASE("torch trace: calibrate recovers generated costs with GPU kernels",
          "[torch][calibrate]") {
  for (const Problem& pr :
       {Problem{"1f1b", 3, 6, 1}, Problem{"interleaved-1f1b", 2, 4, 2}, Problem{"zbv", 2, 4, 2}}) {
    INFO(pr.schedule);
    Gen g;
    check_recovered(plan(pr), g);
    g.flows = true;  // half the kernels linked by ac2g flows
    check_recovered(plan(pr), g);
    g.profiler_steps = true;
    check_recovered(plan(pr), g);
  }
}

TEST_CASE("torch trace: calibrate recovers generated costs from host spans alone",
          "[torch][calibrate]") {
  for (const Problem& pr :
       {Problem{"1f1b", 3, 6, 1}, Problem{"interleaved-1f1b", 2, 4, 2}, Problem{"zbv", 2, 4, 2}}) {
    INFO(pr.schedule);
    Gen g;
    g.device = false;
    check_recovered(plan(pr), g);
    g.comm_cat = "cpu_op";  // some builds record them as cpu_op
    check_recovered(plan(pr), g);
    g.comm_cat = "user_annotation", g.nccl_titles = true;
    check_recovered(plan(pr), g);
  }
}

TEST_CASE("torch trace: message sizes come from record_param_comms", "[torch][io]") {
  const Plan p = plan(Problem{"1f1b", 2, 4, 1});
  Gen g;
  g.device = false, g.param_comms = true;
  const auto texts = torch_traces(p, stage_costs_known(2), g);
  std::vector<TorchRankTrace> files;
  for (std::size_t r = 0; r < texts.size(); ++r)
    files.push_back(parse_torch_trace(texts[r], "rank" + std::to_string(r) + "_trace.json")),
        files.back().rank = static_cast<int>(r);
  const Trace t = import_torch_traces(files);
  int comms = 0;
  for (const TraceRecord& rec : t.records)
    if (is_comm(rec.action.type)) {
      ++comms;
      CHECK(rec.bytes == 1024);  // 256 x float32
    }
  CHECK(comms == 3 * 2 * 2 * 4);  // 3 steps, 2 ranks, 4 microbatches, a SEND and a RECV
}

// Traces torch 2.15.0 wrote (Gloo, 2 CPU processes; tests/interop/
// torch_traces/README.md): .json.gz in torchtitan's folder layout, gloo ops
// as user_annotation, PP:...WAIT_* spans. The costs simulate the step within 10%.
TEST_CASE("cli: calibrate reads real torch 2.15.0 Gloo traces as torch wrote them",
          "[torch][cli]") {
  for (const auto& [folder, schedule] :
       {std::pair<std::string, std::string>{"gloo_1f1b_p2_m4", "1f1b"},
        {"gloo_interleaved-1f1b_p2_m4_v2", "interleaved-1f1b"}}) {
    const std::string dir =
        std::string(PIPEPLAN_SOURCE_DIR) + "/tests/interop/torch_traces/" + folder;
    const auto c = run_cli({"calibrate", dir, "-s", schedule, "-o", "-"});
    INFO(c.err);
    REQUIRE(c.exit_code == 0);
    CHECK(c.err.find("torch traces: 2 file(s), 2 ranks, 1 step(s) (ProfilerStep spans)") !=
          std::string::npos);
    const json costs = json::parse(c.out);
    const double measured = costs["calibrated_from"]["measured_step_ms"].get<double>();
    const auto at = c.err.find("simulated with these costs ");
    REQUIRE(at != std::string::npos);
    const double simulated = std::stod(c.err.substr(at + 27));
    CHECK(std::fabs(simulated - measured) <= 0.10 * measured);
  }
}

TEST_CASE("torch trace: a plan given must match the traces", "[torch]") {
  const Plan p = plan(Problem{"1f1b", 2, 4, 1});
  const auto files = parsed(torch_traces(p, stage_costs_known(2), Gen{}));
  TorchImportOptions o;
  o.plan = p;
  CHECK(import_torch_traces(files, o).plan == p);
  Plan other = p;
  std::swap(other.ranks[0][0], other.ranks[0][1]);
  o.plan = other;
  CHECK_THROWS_WITH(import_torch_traces(files, o),
                    Catch::Contains("rank 0 step 1 index 0: the trace has 0F0, the plan 0SEND_F0"));
  // A rank missing, and a file whose rank cannot be told.
  std::vector<TorchRankTrace> one = {files[0]};
  one[0].rank = 1;
  CHECK_THROWS_WITH(import_torch_traces(one), Catch::Contains("no trace of rank 0"));
  one[0].rank = -1;
  CHECK_THROWS_WITH(import_torch_traces(one), Catch::Contains("cannot tell the rank"));
}

TEST_CASE("torch trace: the reader refuses what it cannot trust", "[torch][io]") {
  auto fails = [](const std::string& text, const std::string& what) {
    INFO(text.substr(0, 200));
    CHECK_THROWS_WITH(parse_torch_trace(text, "t.json"), Catch::Contains(what));
  };
  fails("{\"traceEvents\": [", "not valid JSON");
  fails("{\"a\": 1, \"a\": 2, \"traceEvents\": []}", "duplicate key 'a'");
  fails("{\"traceEvents\": [{\"ph\": \"X\", \"ph\": \"X\"}]}",
        "traceEvents[0]: duplicate key 'ph'");
  fails("{\"schemaVersion\": 1}", "no 'traceEvents' array");
  fails(
      "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"PP:0F0\", "
      "\"ts\": \"soon\", \"dur\": 1}]}",
      "traceEvents[0] (PP:0F0): 'ts' must be a finite number");
  fails(
      "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, "
      "\"dur\": -4}]}",
      "'dur' must be a finite non-negative number");
  // Deep nesting is refused without recursion, however deep.
  std::string deep = "{\"traceEvents\": [], \"x\": ";
  deep += std::string(200000, '[') + std::string(200000, ']') + "}";
  fails(deep, "nested deeper than the supported 64 levels");
  // An object with many keys stays linear (hash set past 16 keys).
  std::string wide = "{\"traceEvents\": [], \"o\": {";
  for (int k = 0; k < 100000; ++k) wide += (k ? ",\"" : "\"") + std::to_string(k) + "\":0";
  wide += ",\"7\":1}}";
  fails(wide, "duplicate key '7'");
  // Unknown action names in PP: spans are named.
  const std::string bad =
      "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"PP:0Q0\", "
      "\"ts\": 1, \"dur\": 1}], \"distributedInfo\": {\"rank\": 0}}";
  CHECK_THROWS_WITH(import_torch_traces({parse_torch_trace(bad, "r.json")}),
                    Catch::Contains("span 'PP:0Q0' does not name an action"));
  // Other events and fields are skipped; the rank and base time are read.
  const TorchRankTrace t = parse_torch_trace(
      "{\"distributedInfo\": {\"rank\": 3}, \"baseTimeNanoseconds\": 12, \"traceEvents\": ["
      "{\"ph\": \"M\", \"name\": \"thread_name\", \"args\": {\"name\": \"x\"}},"
      "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_SendRecv\", \"pid\": 0, "
      "\"tid\": \"stream 9\", \"ts\": 5.5, \"dur\": 2, \"args\": {\"correlation\": 77, "
      "\"In msg nelems\": 1024, \"dtype\": \"BFloat16\"}}]}",
      "t.json");
  CHECK(t.rank == 3);
  CHECK(t.base_time_ns == 12);
  REQUIRE(t.events.size() == 1);
  CHECK(t.events[0].kind == TorchEvent::Kind::Device);
  CHECK(t.events[0].nccl);
  CHECK(t.events[0].correlation == 77);
  CHECK(t.events[0].bytes == 2048);
}

TEST_CASE("torch trace: ids no integer holds and odd base times", "[torch][io]") {
  // Found by fuzz_torch_trace: a pid given as 3.3e93 was cast to an integer
  // (undefined). Any number is an id: a whole one in range is itself, others
  // the hash of their bits; equal numbers give equal ids.
  auto kernel = [](const std::string& pid, const std::string& tid) {
    return "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": " + pid +
           ", \"tid\": " + tid + ", \"ts\": 1, \"dur\": 1}";
  };
  const TorchRankTrace t = parse_torch_trace(
      "{\"baseTimeNanoseconds\": -5, \"traceEvents\": [" + kernel("3.3e93", "-1.5") + "," +
          kernel("3.3e93", "-1.5") + "," + kernel("7.0", "1e300") + "]}",
      "t.json");
  REQUIRE(t.events.size() == 3);
  CHECK(t.events[0].pid == t.events[1].pid);
  CHECK(t.events[0].tid == t.events[1].tid);
  CHECK(t.events[2].pid == 7);
  CHECK(t.events[0].pid != t.events[2].pid);
  // A negative base time is not a time: read as absent, so offsets between
  // files are differences that fit.
  CHECK(t.base_time_ns == 0);
}

TEST_CASE("cli: calibrate reads a folder of torch traces and simulate replays them",
          "[torch][cli]") {
  namespace fs = std::filesystem;
  const Plan p = plan(Problem{"interleaved-1f1b", 2, 4, 2});
  const auto texts = torch_traces(p, stage_costs_known(4), Gen{});
  const fs::path dir = fs::temp_directory_path() / "pipeplan_torch_traces" / "iteration_10";
  fs::create_directories(dir);
  for (std::size_t r = 0; r < texts.size(); ++r)
    std::ofstream(dir / ("rank" + std::to_string(r) + "_trace.json")) << texts[r];
  const std::string costs = (dir.parent_path() / "costs.json").string();
  const auto c = run_cli({"calibrate", dir.parent_path().string(), "-o", costs});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(c.err.find("torch traces: 2 file(s), 2 ranks, 3 step(s)") != std::string::npos);
  CHECK(c.err.find("calibrated custom (pp 2, 4 microbatches, 2 stages per rank)") !=
        std::string::npos);
  const auto s = run_cli({"simulate", "-s", "interleaved-1f1b", "-p", "2", "-m", "4", "-v", "2",
                          "--stage-costs", costs});
  INFO(s.err);
  CHECK(s.exit_code == 0);
  // A pipeplan trace and torch traces do not mix; an unreadable folder is named.
  const auto e = run_cli({"calibrate", (dir.parent_path() / "nothing").string()});
  CHECK(e.exit_code == 2);
  fs::remove_all(dir.parent_path());
}

// The run behind docs/torch-profiler.md's picture: 1f1b on examples/layers/
// llama35.csv (balanced over 4 ranks, 0.3 ms per transfer), as torch traces.
// PIPEPLAN_DOCS_TRACES=DIR keeps them there.
TEST_CASE("torch trace: the documented example calibrates to its profile's stage costs",
          "[torch][calibrate]") {
  namespace fs = std::filesystem;
  const LayerProfile profile =
      parse_layer_profile(pipeplan::test::read_source_file("examples/layers/llama35.csv"));
  const Plan p = plan(Problem{"1f1b", 4, 8, 1});
  CostModel base;
  base.comm_latency = 0.3;
  const CostModel costs = stage_costs(profile, balanced_partition(profile, 4), base);
  const auto texts = torch_traces(p, costs, Gen{});
  const char* keep = std::getenv("PIPEPLAN_DOCS_TRACES");
  const fs::path dir = keep ? fs::path(keep) : fs::temp_directory_path() / "pipeplan_docs_traces";
  fs::create_directories(dir);
  for (std::size_t r = 0; r < texts.size(); ++r)
    std::ofstream(dir / ("rank" + std::to_string(r) + "_trace.json")) << texts[r];
  std::vector<TorchRankTrace> files;
  for (std::size_t r = 0; r < texts.size(); ++r)
    files.push_back(parse_torch_trace(texts[r], "rank" + std::to_string(r) + "_trace.json")),
        files.back().rank = static_cast<int>(r);
  const Calibration c = calibrate(import_torch_traces(files));
  for (int s = 0; s < 4; ++s) {
    CHECK(c.stage_ms.at(s).f == Approx(costs.f * costs.stage_scales.at(s).f).epsilon(1e-4));
    CHECK(c.stage_ms.at(s).b == Approx(costs.b * costs.stage_scales.at(s).b).epsilon(1e-4));
  }
  CHECK(c.comm_latency_ms == Approx(0.3).epsilon(1e-3));
  if (!keep) fs::remove_all(dir);
}
