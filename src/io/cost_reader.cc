// Reading costs: a cost spec ("F=1,B=2,...") and stage-costs files (CSV,
// or JSON, possibly calibrated by `pipeplan calibrate`).
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/json_strict.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A finite, non-negative number spelled completely ("1.5", "2e-3").
std::optional<double> to_cost(const std::string& s) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v) || v < 0)
    return std::nullopt;
  return v;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

// "unmeasured": {"STAGE": "B,I,W"}: the types a calibration could not
// measure on a stage (its entry leaves them out).
std::map<int, std::string> read_unmeasured(const nlohmann::json& v, const std::string& source) {
  const std::string bad =
      source + ": unmeasured must map stages (\"0\") to compute types (\"B,I,W\")";
  if (!v.is_object()) throw InputError(bad);
  std::map<int, std::string> out;
  for (const auto& item : v.items()) {
    const std::string& key = item.key();
    if (key.empty() || key.size() > 9 ||
        key.find_first_not_of("0123456789") != std::string::npos || !item.value().is_string())
      throw InputError(bad);
    const std::string types = item.value().get<std::string>();
    for (const std::string& t : split(types, ','))
      if (t.size() != 1 || std::string_view("FBIW").find(t[0]) == std::string_view::npos)
        throw InputError(bad);
    out[std::stoi(key)] = types;
  }
  return out;
}

// The fields `pipeplan calibrate` adds: "absolute", "time_unit",
// "calibrated_from" {stages_per_rank, ..} and "comm" {latency, bandwidth, bytes}.
void read_calibrated_fields(const nlohmann::json& doc, const std::string& source,
                            StageCosts& file) {
  auto non_negative = [&](const nlohmann::json& v, const std::string& what) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      throw InputError(source + ": " + what + " must be a non-negative number");
    return v.get<double>();
  };
  if (doc.contains("absolute")) {
    if (!doc["absolute"].is_boolean())
      throw InputError(source + ": absolute must be true or false");
    file.absolute = doc["absolute"].get<bool>();
  }
  if (doc.contains("time_unit")) {
    if (!doc["time_unit"].is_string()) throw InputError(source + ": time_unit must be a string");
    file.time_unit = doc["time_unit"].get<std::string>();
  }
  if (doc.contains("calibrated_from") && doc["calibrated_from"].is_object() &&
      doc["calibrated_from"].contains("stages_per_rank")) {
    const auto& v = doc["calibrated_from"]["stages_per_rank"];
    if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 4096)
      throw InputError(source + ": calibrated_from.stages_per_rank must be a positive integer");
    file.stages_per_rank = v.get<int>();
  }
  if (doc.contains("unmeasured")) file.unmeasured = read_unmeasured(doc["unmeasured"], source);
  if (doc.contains("host_overhead") && !doc["host_overhead"].is_object())
    throw InputError(source + ": host_overhead must be an object");
  if (doc.contains("comm")) {
    const auto& c = doc["comm"];
    if (!c.is_object()) throw InputError(source + ": comm must be an object");
    for (const auto& item : c.items())
      if (item.key() != "latency" && item.key() != "bandwidth" && item.key() != "bytes")
        throw InputError(source + ": comm: unknown key \"" + limits::excerpt(item.key()) +
                         "\" (use latency, bandwidth, bytes)");
    if (c.contains("latency")) file.comm_latency = non_negative(c["latency"], "comm.latency");
    if (c.contains("bandwidth"))
      file.comm_bandwidth = non_negative(c["bandwidth"], "comm.bandwidth");
    if (c.contains("bytes")) file.transfer_bytes = non_negative(c["bytes"], "comm.bytes");
  }
}

StageCosts parse_stage_costs_json(std::string_view text, const std::string& source) {
  // Duplicate keys, nesting and syntax errors as every JSON reader treats them.
  const nlohmann::json doc = io::parse_json_strict(text, source);
  if (!doc.is_object() || !doc.contains("stages") || !doc["stages"].is_array())
    throw InputError(source + ": expected an object with a \"stages\" array");
  StageCosts file;
  read_calibrated_fields(doc, source, file);
  std::map<int, StageScale>& out = file.stages;
  std::size_t n = 0;
  for (const auto& entry : doc["stages"]) {
    const std::string where = source + ": stages[" + std::to_string(n++) + "]";
    if (!entry.is_object() || !entry.contains("stage") || !entry["stage"].is_number_integer() ||
        entry["stage"].get<long long>() < 0)
      throw InputError(where + ": needs \"stage\": a non-negative integer");
    if (entry["stage"].get<long long>() >= limits::kMaxStages)
      throw InputError(where + ": stage " + std::to_string(entry["stage"].get<long long>()) +
                       " is larger than the supported " + std::to_string(limits::kMaxStages - 1));
    const int stage = entry["stage"].get<int>();
    auto number = [&](const char* key, double fallback) {
      if (!entry.contains(key)) return fallback;
      const auto& v = entry[key];
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        throw InputError(where + ": \"" + key + "\" must be a non-negative number");
      return v.get<double>();
    };
    for (const auto& item : entry.items())
      if (item.key() != "stage" && item.key() != "scale" && item.key() != "F" &&
          item.key() != "B" && item.key() != "I" && item.key() != "W")
        throw InputError(where + ": unknown key \"" + limits::excerpt(item.key()) +
                         "\" (use stage, scale, F, B, I, W)");
    const double all = number("scale", 1.0);
    StageScale s{number("F", all), number("B", all), number("I", all), number("W", all)};
    if (!out.emplace(stage, s).second)
      throw InputError(where + ": stage " + std::to_string(stage) + " is listed twice");
  }
  return file;
}

std::map<int, StageScale> parse_stage_costs_csv(std::string_view text, const std::string& source) {
  std::map<int, StageScale> out;
  int line_no = 0;
  bool seen_row = false;
  for (const std::string& raw : split(text, '\n')) {
    ++line_no;
    std::string line = raw;
    if (auto hash = line.find('#'); hash != std::string::npos) line = trim(line.substr(0, hash));
    if (line.empty()) continue;
    const std::string where = source + ":" + std::to_string(line_no);
    std::vector<std::string> cells = split(line, ',');
    // The optional header names its first column "stage" ("stage,F,B,I,W",
    // "stage,scale"); any other first row is data, checked as such.
    const bool header = !seen_row && upper(cells[0]) == "STAGE";
    seen_row = true;
    if (header) continue;  // "stage,F,B,I,W"
    if (cells.size() != 2 && cells.size() != 5)
      throw InputError(where + ": expected \"stage,F,B,I,W\" or \"stage,SCALE\", got " +
                       std::to_string(cells.size()) + " fields");
    int stage = 0;
    auto [ptr, ec] = std::from_chars(cells[0].data(), cells[0].data() + cells[0].size(), stage);
    if (cells[0].empty() || ec != std::errc() || ptr != cells[0].data() + cells[0].size() ||
        stage < 0)
      throw InputError(where + ": stage '" + limits::excerpt(cells[0]) +
                       "' is not a non-negative integer");
    if (stage >= limits::kMaxStages)
      throw InputError(where + ": stage " + std::to_string(stage) +
                       " is larger than the supported " + std::to_string(limits::kMaxStages - 1));
    std::vector<double> v;
    for (std::size_t k = 1; k < cells.size(); ++k) {
      auto x = to_cost(cells[k]);
      if (!x)
        throw InputError(where + ": field " + std::to_string(k + 1) + " '" +
                         limits::excerpt(cells[k]) + "' is not a non-negative number");
      v.push_back(*x);
    }
    StageScale s =
        v.size() == 1 ? StageScale{v[0], v[0], v[0], v[0]} : StageScale{v[0], v[1], v[2], v[3]};
    if (!out.emplace(stage, s).second)
      throw InputError(where + ": stage " + std::to_string(stage) + " is listed twice");
  }
  return out;
}

}  // namespace

CostModel parse_cost_spec(std::string_view spec, CostModel base, const std::string& source) {
  bool has_b = false, has_i = false, has_w = false;
  unsigned given = 0;  // bit per field: a key given twice is refused, as in every reader
  for (const std::string& item : split(spec, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos)
      throw InputError(source + ": '" + limits::excerpt(item) +
                       "' is not KEY=VALUE (e.g. F=1,B=2,I=1,W=1)");
    const std::string name = trim(item.substr(0, eq));
    const std::string key = upper(name);
    const std::string value = trim(item.substr(eq + 1));
    auto v = to_cost(value);
    if (!v)
      throw InputError(source + ": " + limits::excerpt(key) + "='" + limits::excerpt(value) +
                       "' is not a non-negative number");
    unsigned bit = 0;
    if (key == "F") base.f = *v, bit = 1;
    else if (key == "B") base.b = *v, has_b = true, bit = 2;
    else if (key == "I") base.i = *v, has_i = true, bit = 4;
    else if (key == "W") base.w = *v, has_w = true, bit = 8;
    else if (key == "O" || key == "OVERLAP_F_B" || key == "OVERLAP") base.overlap = *v, bit = 16;
    else
      throw InputError(source + ": unknown action type '" + limits::excerpt(name) +
                       "' (use F, B, I, W or OVERLAP_F_B)");
    if (given & bit) throw InputError(source + ": " + limits::excerpt(name) + " is given twice");
    given |= bit;
  }
  // A full backward is an input-gradient plus a weight-gradient pass.
  if (!has_b && (has_i || has_w)) base.b = base.i + base.w;
  if (has_b && !has_i && !has_w) base.i = base.w = base.b / 2;
  return base;
}

StageCosts read_stage_costs(std::string_view text, const std::string& source) {
  std::size_t k = 0;
  while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
  if (k < text.size() && text[k] == '{') return parse_stage_costs_json(text, source);
  StageCosts file;
  file.stages = parse_stage_costs_csv(text, source);
  return file;
}

std::map<int, StageScale> parse_stage_costs(std::string_view text, const std::string& source) {
  return read_stage_costs(text, source).stages;
}

}  // namespace pipeplan
