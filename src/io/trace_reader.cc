// parse_trace_json: strict reading of write_trace_json's document.
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/trace.h"

namespace pipeplan {
namespace {

constexpr double kMaxTraceMs = 1e15;

}  // namespace

Trace parse_trace_json(std::string_view text, const std::string& source) {
  using nlohmann::json;
  auto fail = [&](const std::string& path, const std::string& what) -> void {
    throw InputError(source + ": " + (path.empty() ? "" : path + ": ") + what);
  };
  // As the plan reader: a key given twice in one object is refused (nlohmann
  // keeps the last one silently), at any depth (the plan inside included).
  std::vector<std::set<std::string>> keys;  // per open object
  auto strict = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second)
      throw InputError(source + ": duplicate key '" + limits::excerpt(parsed.get<std::string>()) +
                       "'");
    return true;
  };
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), strict);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (auto close = what.find("] ");
        what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
      what = what.substr(close + 2);
    throw InputError(source + ": not valid JSON: " + what);
  }
  if (!doc.is_object()) fail("", "expected a JSON object at the top level");
  if (doc.contains("traceEvents")) {
    // A Chrome trace: measured ones carry their records as "pipeplan".
    if (!doc.contains("pipeplan") || !doc["pipeplan"].is_object())
      fail("",
           "a Chrome trace without pipeplan records (a simulated one from render "
           "--chrome-trace?); use the trace `pipeplan train --trace FILE` writes");
    json inner = std::move(doc["pipeplan"]);
    doc = std::move(inner);
  }
  for (const auto& item : doc.items())
    if (item.key() != "format" && item.key() != "version" && item.key() != "time_unit" &&
        item.key() != "source" && item.key() != "plan" && item.key() != "columns" &&
        item.key() != "records")
      fail("", "unknown field '" + limits::excerpt(item.key()) + "'");
  if (!doc.contains("format") || doc["format"] != kTraceFormatName)
    fail("format", std::string("expected \"") + kTraceFormatName + "\" (not a pipeplan trace)");
  if (!doc.contains("version") || !doc["version"].is_number_integer() ||
      doc["version"].get<long long>() != kTraceFormatVersion)
    fail("version", "this pipeplan reads version " + std::to_string(kTraceFormatVersion));
  if (doc.contains("time_unit") && doc["time_unit"] != "ms") fail("time_unit", "expected \"ms\"");
  Trace t;
  if (doc.contains("source")) {
    if (!doc["source"].is_string()) fail("source", "expected a string");
    t.source = doc["source"].get<std::string>();
  }
  if (!doc.contains("plan") || !doc["plan"].is_object()) fail("plan", "expected the plan document");
  t.plan = parse_json_plan(doc["plan"].dump(), source + ": plan");
  const json expected_columns = {"step", "rank", "index", "action", "start",
                                 "end",  "wait", "bytes", "post"};
  if (doc.contains("columns") && doc["columns"] != expected_columns)
    fail("columns", "expected " + expected_columns.dump());
  if (!doc.contains("records") || !doc["records"].is_array()) fail("records", "expected an array");
  const auto& records = doc["records"];
  t.records.reserve(records.size());
  for (std::size_t k = 0; k < records.size(); ++k) {
    const std::string path = "records[" + std::to_string(k) + "]";
    const json& row = records[k];
    if (!row.is_array() || row.size() != 9)
      fail(path, "expected [step, rank, index, action, start, end, wait, bytes, post]");
    auto integer = [&](std::size_t col, const char* name, long long min, long long max) {
      if (!row[col].is_number_integer() || row[col].get<long long>() < min ||
          row[col].get<long long>() > max)
        fail(path, std::string(name) + " must be an integer in " + std::to_string(min) + ".." +
                       std::to_string(max));
      return row[col].get<long long>();
    };
    // Times in ms, bounded so differences and sums over a trace stay finite.
    auto number = [&](std::size_t col, const char* name) {
      if (!row[col].is_number() || !std::isfinite(row[col].get<double>()) ||
          std::fabs(row[col].get<double>()) > kMaxTraceMs)
        fail(path, std::string(name) + " must be a number of ms within +-1e15");
      return row[col].get<double>();
    };
    TraceRecord r;
    r.step = static_cast<int>(integer(0, "step", 1, 1 << 30));
    r.rank = static_cast<int>(integer(1, "rank", 0, t.plan.meta.pp_degree - 1));
    r.index = static_cast<int>(integer(2, "index", 0, static_cast<long long>(limits::kMaxActions)));
    if (!row[3].is_string()) fail(path, "action must be a string");
    const std::string name = row[3].get<std::string>();
    auto a = parse_action(name);
    if (!a) fail(path, "unknown action '" + limits::excerpt(name) + "'");
    r.action = *a;
    r.start = number(4, "start");
    r.end = number(5, "end");
    r.wait = number(6, "wait");
    r.bytes = integer(7, "bytes", 0, 1LL << 50);
    r.post = number(8, "post");
    t.records.push_back(r);
  }
  return t;
}

}  // namespace pipeplan
