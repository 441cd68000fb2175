// parse_json_plan: strict reading of schemas/plan.schema.json documents.
#include <nlohmann/json.hpp>

#include <set>

#include "io/action_text.h"
#include "io/limits.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"

namespace pipeplan {
namespace {

using nlohmann::json;

constexpr const char* kTopFields[] = {"format",          "version",        "schedule",
                                      "pp_degree",       "num_microbatches", "stages_per_rank",
                                      "stage_to_rank",   "compute_only",   "ranks"};
constexpr const char* kRankFields[] = {"rank", "actions"};

// Every error names the source and the JSON path of the offending field.
class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void error(const std::string& path, const std::string& what) const {
    throw InputError(source_ + ": " + (path.empty() ? "" : path + ": ") + what);
  }

  const json& field(const json& obj, const std::string& parent, const char* name) const {
    auto it = obj.find(name);
    if (it == obj.end())
      error(parent, std::string("missing field '") + name + "'");
    return *it;
  }

  template <std::size_t N>
  void reject_unknown(const json& obj, const std::string& path, const char* const (&known)[N]) const {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* k : known) ok = ok || it.key() == k;
      if (!ok) error(path, "unknown field '" + it.key() + "'");
    }
  }

  void expect(const json& v, json::value_t type, const std::string& path, const char* what) const {
    bool ok = v.type() == type ||
              (type == json::value_t::number_integer && v.is_number_integer());
    if (!ok) error(path, std::string("expected ") + what + ", got " + describe(v));
  }

  int integer(const json& v, const std::string& path, long long min, long long max) const {
    expect(v, json::value_t::number_integer, path, "an integer");
    if (v.is_number_unsigned()) {
      auto u = v.get<unsigned long long>();
      if (min > 0 && u < static_cast<unsigned long long>(min))
        error(path, std::to_string(u) + " is below the minimum " + std::to_string(min));
      if (u > static_cast<unsigned long long>(max))
        error(path, std::to_string(u) + " is larger than the supported " + std::to_string(max));
      return static_cast<int>(u);
    }
    long long x = v.get<long long>();
    if (x < min) error(path, std::to_string(x) + " is below the minimum " + std::to_string(min));
    if (x > max)
      error(path, std::to_string(x) + " is larger than the supported " + std::to_string(max));
    return static_cast<int>(x);
  }

  std::string string(const json& v, const std::string& path) const {
    expect(v, json::value_t::string, path, "a string");
    return v.get<std::string>();
  }

  static std::string describe(const json& v) {
    if (v.is_number_float()) return "a fractional number " + v.dump();
    if (v.is_string()) return "string " + v.dump();
    return v.type_name();
  }

 private:
  std::string source_;
};

}  // namespace

Plan parse_json_plan(std::string_view text, const std::string& source) {
  JsonReader r(source);
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep line/column.
    if (auto close = what.find("] "); what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
      what = what.substr(close + 2);
    r.error("", "not valid JSON: " + what);
  }
  if (!doc.is_object()) r.error("", "expected a JSON object at the top level, got " + JsonReader::describe(doc));
  r.reject_unknown(doc, "", kTopFields);

  const std::string format = r.string(r.field(doc, "", "format"), "format");
  if (format != kPlanFormatName)
    r.error("format", "expected \"" + std::string(kPlanFormatName) + "\", got \"" + format +
                          "\" (not a pipeplan plan)");
  const json& version = r.field(doc, "", "version");
  r.expect(version, json::value_t::number_integer, "version", "an integer");
  if (!(version == kPlanFormatVersion))
    r.error("version", version.dump() + " is not supported (this pipeplan reads version " +
                           std::to_string(kPlanFormatVersion) + ")");

  Plan plan;
  PlanMeta& meta = plan.meta;
  meta.schedule = r.string(r.field(doc, "", "schedule"), "schedule");
  if (meta.schedule.empty()) r.error("schedule", "must not be empty");
  meta.pp_degree = r.integer(r.field(doc, "", "pp_degree"), "pp_degree", 1, io::kMaxRanks);
  meta.num_microbatches =
      r.integer(r.field(doc, "", "num_microbatches"), "num_microbatches", 1, io::kMaxMicrobatches);
  meta.stages_per_rank =
      r.integer(r.field(doc, "", "stages_per_rank"), "stages_per_rank", 1, io::kMaxStagesPerRank);
  if (static_cast<long long>(meta.pp_degree) * meta.stages_per_rank > io::kMaxStages)
    r.error("stages_per_rank", "pp_degree * stages_per_rank = " +
                                   std::to_string(static_cast<long long>(meta.pp_degree) *
                                                  meta.stages_per_rank) +
                                   " stages is more than the supported " +
                                   std::to_string(io::kMaxStages));
  const std::string mapping = r.string(r.field(doc, "", "stage_to_rank"), "stage_to_rank");
  auto parsed_mapping = parse_stage_mapping(mapping);
  if (!parsed_mapping)
    r.error("stage_to_rank", "expected \"loop\" or \"v\", got \"" + mapping + "\"");
  meta.mapping = *parsed_mapping;

  const json& compute_only = r.field(doc, "", "compute_only");
  r.expect(compute_only, json::value_t::boolean, "compute_only", "true or false");

  const json& ranks = r.field(doc, "", "ranks");
  r.expect(ranks, json::value_t::array, "ranks", "an array");
  if (ranks.empty()) r.error("ranks", "must hold at least one rank");
  if (ranks.size() > static_cast<std::size_t>(meta.pp_degree))
    r.error("ranks", std::to_string(ranks.size()) + " entries for pp_degree " +
                         std::to_string(meta.pp_degree));

  std::vector<long long> listed_at(static_cast<std::size_t>(meta.pp_degree), -1);  // rank id -> entry
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string path = "ranks[" + std::to_string(i) + "]";
    const json& entry = ranks[i];
    r.expect(entry, json::value_t::object, path, "an object {\"rank\": .., \"actions\": [..]}");
    r.reject_unknown(entry, path, kRankFields);
    const int id = r.integer(r.field(entry, path, "rank"), path + ".rank", 0, io::kMaxRanks);
    if (id >= meta.pp_degree)
      r.error(path + ".rank", "rank " + std::to_string(id) + " is out of range 0.." +
                                  std::to_string(meta.pp_degree - 1));
    if (const long long j = listed_at[static_cast<std::size_t>(id)]; j >= 0)  // no scan per rank
      r.error(path + ".rank", "rank " + std::to_string(id) + " appears twice (also ranks[" +
                                  std::to_string(j) + "])");
    listed_at[static_cast<std::size_t>(id)] = static_cast<long long>(i);
    if (!plan.rank_ids.empty() && id < plan.rank_ids.back())
      r.error(path + ".rank", "rank " + std::to_string(id) + " listed after rank " +
                                  std::to_string(plan.rank_ids.back()) +
                                  " (ranks are listed in ascending order)");
    const json& actions = r.field(entry, path, "actions");
    r.expect(actions, json::value_t::array, path + ".actions", "an array of action strings");
    std::vector<Action> list;
    list.reserve(actions.size());
    for (std::size_t k = 0; k < actions.size(); ++k) {
      // The path is spelled only for an error: building it per action cost
      // more than parsing the action.
      auto apath = [&] { return path + ".actions[" + std::to_string(k) + "]"; };
      const json& cell = actions[k];
      if (!cell.is_string()) r.expect(cell, json::value_t::string, apath(), "a string");
      const std::string& s = cell.get_ref<const std::string&>();
      io::ActionParse parsed = io::parse_action_located(s);
      if (!parsed.action) r.error(apath(), io::describe_bad_action(s, parsed));
      list.push_back(*parsed.action);
    }
    plan.rank_ids.push_back(id);
    plan.ranks.push_back(std::move(list));
  }

  // The flag is redundant with the actions; a disagreement means a hand edit
  // went wrong, so say where.
  const bool declared = compute_only.get<bool>();
  if (declared) {
    for (std::size_t i = 0; i < plan.ranks.size(); ++i)
      for (std::size_t k = 0; k < plan.ranks[i].size(); ++k)
        if (is_comm(plan.ranks[i][k].type))
          r.error("compute_only", "true, but ranks[" + std::to_string(i) + "].actions[" +
                                      std::to_string(k) + "] is " + to_string(plan.ranks[i][k]));
  } else if (plan.is_compute_only()) {
    r.error("compute_only", "false, but the plan holds no SEND/RECV action");
  }
  return plan;
}

PlanFormat detect_format(std::string_view text) {
  std::size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 byte order mark
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
    ++i;
  return i < text.size() && text[i] == '{' ? PlanFormat::Json : PlanFormat::Csv;
}

Plan parse_plan(std::string_view text, const std::string& source, const CsvReadOptions& csv_options) {
  if (detect_format(text) == PlanFormat::Json) return parse_json_plan(text, source);
  return parse_csv_plan(text, source, csv_options);
}

}  // namespace pipeplan
