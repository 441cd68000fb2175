// write_trace_json: a measured run as a JSON table, and the calibrated
// stage-costs file. Written by hand, one record per line, so long runs
// stream out without a JSON tree in memory.
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <string>

#include "ir/numbers.h"
#include "pipeplan/emit.h"
#include "pipeplan/render.h"
#include "pipeplan/trace.h"

namespace pipeplan {

using detail::format_number;

void write_trace_json(const Trace& trace, std::ostream& out) {
  std::ostringstream plan;
  write_json(trace.plan, plan);
  std::string plan_text = plan.str();
  // Indent the embedded plan document by two spaces.
  std::string indented;
  for (std::size_t i = 0; i < plan_text.size(); ++i) {
    indented += plan_text[i];
    if (plan_text[i] == '\n' && i + 1 < plan_text.size()) indented += "  ";
  }
  while (!indented.empty() && indented.back() == '\n') indented.pop_back();
  // Bytes held are two more columns, written when the run measured them.
  bool memory = false;
  for (const TraceRecord& r : trace.records) memory = memory || r.held >= 0;
  out << "{\n"
      << "  \"format\": \"" << kTraceFormatName << "\",\n"
      << "  \"version\": " << kTraceFormatVersion << ",\n"
      << "  \"time_unit\": \"ms\",\n"
      << "  \"source\": " << nlohmann::json(trace.source).dump() << ",\n"
      << "  \"plan\": " << indented << ",\n"
      << "  \"columns\": [\"step\", \"rank\", \"index\", \"action\", \"start\", \"end\", \"wait\", "
         "\"bytes\", \"post\""
      << (memory ? ", \"held\", \"peak\"" : "") << "],\n"
      << "  \"records\": [";
  std::string line;
  for (std::size_t k = 0; k < trace.records.size(); ++k) {
    const TraceRecord& r = trace.records[k];
    line.clear();
    line += k ? ",\n    [" : "\n    [";
    line += std::to_string(r.step) + ", " + std::to_string(r.rank) + ", " +
            std::to_string(r.index) + ", \"";
    append_to(line, r.action);
    line += "\", " + format_number(r.start, 6) + ", " + format_number(r.end, 6) + ", " +
            format_number(r.wait, 6) + ", " + std::to_string(r.bytes) + ", " +
            format_number(r.post, 6);
    if (memory) line += ", " + std::to_string(r.held) + ", " + std::to_string(r.peak);
    line += "]";
    out << line;
  }
  out << (trace.records.empty() ? "]\n}\n" : "\n  ]\n}\n");
}

void write_trace_chrome(const Trace& trace, std::ostream& out) {
  ChromeTraceInfo info;
  info.label = "measured";
  info.time_unit = "ms";
  std::ostringstream table;
  write_trace_json(trace, table);
  info.embedded = table.str();
  while (!info.embedded.empty() && info.embedded.back() == '\n') info.embedded.pop_back();
  write_chrome_trace(trace.plan, trace_timelines(trace), info, out);
}

namespace {

// `  "key": {"STAGE": "TEXT", ...},` (a calibration's per-stage type lists).
void write_stage_texts(std::ostream& out, const char* key, const std::map<int, std::string>& m) {
  out << "  \"" << key << "\": {";
  bool first = true;
  for (const auto& [stage, what] : m) {
    out << (first ? "" : ", ") << "\"" << stage << "\": " << nlohmann::json(what).dump();
    first = false;
  }
  out << "},\n";
}

}  // namespace

void write_calibration_json(const Calibration& c, std::ostream& out) {
  using nlohmann::json;
  out << "{\n"
      << "  \"format\": \"pipeplan.stage-costs\",\n"
      << "  \"version\": 1,\n"
      << "  \"absolute\": true,\n"
      << "  \"time_unit\": \"ms\",\n"
      << "  \"calibrated_from\": {\"schedule\": " << json(c.schedule).dump()
      << ", \"pp_degree\": " << c.pp_degree << ", \"stages_per_rank\": " << c.stages_per_rank
      << ", \"num_microbatches\": " << c.num_microbatches << ", \"steps_used\": " << c.steps_used
      << ", \"measured_step_ms\": " << format_number(c.measured_step_ms, 4)
      << ", \"transfers_used\": " << c.transfers_used << "},\n"
      << "  \"stages\": [";
  bool first = true;
  for (const auto& [stage, d] : c.stage_ms) {
    // A type the run did not measure is left out (named under "unmeasured").
    const auto it = c.unmeasured.find(stage);
    const std::string none = it == c.unmeasured.end() ? std::string() : it->second;
    out << (first ? "\n" : ",\n") << "    {\"stage\": " << stage;
    const std::pair<char, double> values[] = {{'F', d.f}, {'B', d.b}, {'I', d.i}, {'W', d.w}};
    for (const auto& [letter, v] : values)
      if (none.find(letter) == std::string::npos)
        out << ", \"" << letter << "\": " << format_number(v, 4);
    out << "}";
    first = false;
  }
  out << "\n  ],\n";
  if (!c.unmeasured.empty()) write_stage_texts(out, "unmeasured", c.unmeasured);
  write_stage_texts(out, "derived", c.derived);
  out << "  \"host_overhead\": {";
  first = true;
  for (const auto& [stage, ms] : c.host_overhead_ms) {
    out << (first ? "" : ", ") << "\"" << stage << "\": " << format_number(ms, 4);
    first = false;
  }
  out << "},\n"
      << "  \"comm\": {\"latency\": " << format_number(c.comm_latency_ms, 5)
      << ", \"bandwidth\": " << format_number(c.comm_bandwidth, 3)
      << ", \"bytes\": " << format_number(c.transfer_bytes, 0) << "}\n"
      << "}\n";
}

}  // namespace pipeplan
