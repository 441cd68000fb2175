// parse_trace_json: strict reading of write_trace_json's document, or of a
// write_trace_chrome file (which embeds it as the member "pipeplan").
//
// The shared JSON rules apply (io/json_strict.h: duplicate keys, nesting).
// Records are converted as the parser finishes each one and dropped from the
// tree, and so are a Chrome trace's traceEvents: memory follows the records
// (about 56 bytes each), not a JSON tree of them. The checks still report in
// a fixed order (the document's fields, then the first bad record), whatever
// order the keys come in.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "io/json_strict.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"
#include "pipeplan/trace.h"

namespace pipeplan {
namespace {

using nlohmann::json;

constexpr double kMaxTraceMs = 1e15;
constexpr const char* kRecordShape =
    "expected [step, rank, index, action, start, end, wait, bytes, post] (and optionally held, "
    "peak)";

// What a container is to the trace, by where it sits.
enum class Role { Root, Wrapper, Records, TraceEvents, Other };

/// One "records" array as the parser hands over its rows.
struct RecordStream {
  std::vector<TraceRecord> records;
  std::size_t rows = 0;
  // The first bad row: its path and why, and its rank when the failure came
  // after the rank column (a rank beyond pp_degree still wins, as in a
  // reader that checks column by column).
  std::optional<std::pair<std::string, std::string>> failure;
  std::optional<long long> failure_rank;

  void take(const json& row) {
    const std::size_t k = rows++;
    if (failure) return;
    const std::string path = "records[" + std::to_string(k) + "]";
    std::optional<long long> rank;
    auto fail = [&](const std::string& what) {
      failure.emplace(path, what);
      failure_rank = rank;
    };
    if (!row.is_array() || (row.size() != 9 && row.size() != 11)) return fail(kRecordShape);
    auto integer = [&](std::size_t col, const char* name, long long min,
                       long long max) -> std::optional<long long> {
      const json& v = row[col];
      if (!v.is_number_integer() || v.get<long long>() < min || v.get<long long>() > max) {
        fail(std::string(name) + " must be an integer in " + std::to_string(min) + ".." +
             std::to_string(max));
        return std::nullopt;
      }
      return v.get<long long>();
    };
    // Times in ms, bounded so differences and sums over a trace stay finite.
    auto number = [&](std::size_t col, const char* name) -> std::optional<double> {
      const json& v = row[col];
      if (!v.is_number() || !std::isfinite(v.get<double>()) ||
          std::fabs(v.get<double>()) > kMaxTraceMs) {
        fail(std::string(name) + " must be a number of ms within +-1e15");
        return std::nullopt;
      }
      return v.get<double>();
    };
    TraceRecord r;
    const auto step = integer(0, "step", 1, 1 << 30);
    if (!step) return;
    // The range against pp_degree is checked once the plan is read.
    rank = integer(1, "rank", 0, limits::kMaxRanks - 1);
    if (!rank) return;
    const auto index = integer(2, "index", 0, static_cast<long long>(limits::kMaxActions));
    if (!index) return;
    if (!row[3].is_string()) return fail("action must be a string");
    const std::string& name = row[3].get_ref<const std::string&>();
    const auto a = parse_action(name);
    if (!a) return fail("unknown action '" + limits::excerpt(name) + "'");
    const auto start = number(4, "start");
    if (!start) return;
    const auto end = number(5, "end");
    if (!end) return;
    const auto wait = number(6, "wait");
    if (!wait) return;
    const auto bytes = integer(7, "bytes", 0, 1LL << 50);
    if (!bytes) return;
    const auto post = number(8, "post");
    if (!post) return;
    r.step = static_cast<int>(*step);
    r.rank = static_cast<int>(*rank);
    r.index = static_cast<int>(*index);
    r.action = *a;
    r.start = *start;
    r.end = *end;
    r.wait = *wait;
    r.bytes = *bytes;
    r.post = *post;
    if (row.size() == 11) {
      const auto held = integer(9, "held", -1, 1LL << 50);
      if (!held) return;
      const auto peak = integer(10, "peak", -1, 1LL << 50);
      if (!peak) return;
      r.held = *held;
      r.peak = *peak;
    }
    records.push_back(r);
  }

  /// The records, or the first failure (rank against pp_degree included).
  std::vector<TraceRecord> finish(const std::string& source, int pp_degree) && {
    auto fail = [&](const std::string& path, const std::string& what) {
      throw InputError(source + ": " + path + ": " + what);
    };
    const std::string rank_range = "rank must be an integer in 0.." + std::to_string(pp_degree - 1);
    for (std::size_t k = 0; k < records.size(); ++k)
      if (records[k].rank >= pp_degree) fail("records[" + std::to_string(k) + "]", rank_range);
    if (failure) {
      if (failure_rank && *failure_rank >= pp_degree) fail(failure->first, rank_range);
      fail(failure->first, failure->second);
    }
    return std::move(records);
  }
};

// Follows the parser's containers to tell records and trace events apart;
// converts rows and drops both from the tree.
class TraceFilter {
 public:
  RecordStream top, wrapped;  // "records" at the top, inside "pipeplan"

  bool operator()(int depth, json::parse_event_t event, json& value) {
    switch (event) {
      case json::parse_event_t::key:
        frames_.back().key = value.get_ref<const std::string&>();
        return true;
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        frames_.push_back({role_of(event == json::parse_event_t::object_start), {}});
        return true;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end: {
        frames_.pop_back();
        return keep(depth, value);
      }
      case json::parse_event_t::value: return keep(depth, value);
    }
    return true;
  }

 private:
  struct Frame {
    Role role;
    std::string key;  // objects: the key whose value comes next
  };

  Role role_of(bool object) const {
    if (frames_.empty()) return object ? Role::Root : Role::Other;
    const Frame& parent = frames_.back();
    if (parent.role == Role::Root) {
      if (parent.key == "records" && !object) return Role::Records;
      if (parent.key == "traceEvents" && !object) return Role::TraceEvents;
      if (parent.key == "pipeplan" && object) return Role::Wrapper;
    }
    if (parent.role == Role::Wrapper && parent.key == "records" && !object) return Role::Records;
    return Role::Other;
  }

  // A finished value whose parent is frames_.back(): rows of records are
  // converted and dropped, trace events dropped, the rest kept.
  bool keep(int /*depth*/, const json& value) {
    if (frames_.empty()) return true;
    const Role parent = frames_.back().role;
    if (parent == Role::TraceEvents) return false;
    if (parent != Role::Records) return true;
    const bool in_wrapper =
        frames_.size() >= 2 && frames_[frames_.size() - 2].role == Role::Wrapper;
    (in_wrapper ? wrapped : top).take(value);
    return false;
  }

  std::vector<Frame> frames_;
};

}  // namespace

Trace parse_trace_json(std::string_view text, const std::string& source) {
  auto fail = [&](const std::string& path, const std::string& what) -> void {
    throw InputError(source + ": " + (path.empty() ? "" : path + ": ") + what);
  };
  TraceFilter filter;
  json doc = io::parse_json_strict(text, source,
                                   [&filter](int depth, json::parse_event_t event, json& value) {
                                     return filter(depth, event, value);
                                   });
  if (!doc.is_object()) fail("", "expected a JSON object at the top level");
  RecordStream* stream = &filter.top;
  if (doc.contains("traceEvents")) {
    // A Chrome trace: measured ones carry their records as "pipeplan".
    if (!doc.contains("pipeplan") || !doc["pipeplan"].is_object())
      fail("",
           "a Chrome trace without pipeplan records (a simulated one from render "
           "--chrome-trace?); use the trace `pipeplan train --trace FILE` writes");
    json inner = std::move(doc["pipeplan"]);
    doc = std::move(inner);
    stream = &filter.wrapped;
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
  // Nesting is capped, so writing the plan back out cannot recurse deeply.
  t.plan = parse_json_plan(doc["plan"].dump(), source + ": plan");
  const json expected_columns = {"step", "rank", "index", "action", "start",
                                 "end",  "wait", "bytes", "post"};
  json with_memory = expected_columns;
  with_memory.push_back("held");
  with_memory.push_back("peak");
  if (doc.contains("columns") && doc["columns"] != expected_columns &&
      doc["columns"] != with_memory)
    fail("columns", "expected " + expected_columns.dump() + " or " + with_memory.dump());
  if (!doc.contains("records") || !doc["records"].is_array()) fail("records", "expected an array");
  t.records = std::move(*stream).finish(source, t.plan.meta.pp_degree);
  return t;
}

}  // namespace pipeplan
