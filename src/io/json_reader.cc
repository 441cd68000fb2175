// parse_json_plan: strict reading of schemas/plan.schema.json documents.
//
// The document is streamed through nlohmann's SAX interface and never built:
// each "actions" array becomes a std::vector<Action> as it is read (a DOM
// cost about 60 bytes per action on top of the plan). Keys may come in any
// order and a syntax error anywhere outranks every other complaint, so the
// events are only recorded while reading; the checks run afterwards, in a
// fixed order, and report what the first failing one finds (json_plan_events.h: the events;
// json_plan_events.cc: reading; json_plan_checks.cc: the checks).
#include <nlohmann/json.hpp>

#include <string>

#include "io/json_plan_events.h"
#include "io/json_strict.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"

namespace pipeplan {

using io::json_plan::json;
using io::json_plan::PlanEvents;

Plan parse_json_plan(std::string_view text, const std::string& source) {
  PlanEvents events;
  if (!json::sax_parse(text.begin(), text.end(), &events)) {
    if (events.too_many_actions())
      throw InputError(source + ": more than the supported " + std::to_string(limits::kMaxActions) +
                       " actions");
    if (events.too_deep()) throw InputError(source + ": " + io::too_deep_text());
    throw InputError(source + ": not valid JSON: " + io::json_error_text(events.syntax_error()));
  }
  return std::move(events).finish(source);
}

PlanFormat detect_format(std::string_view text) {
  std::size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 byte order mark
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
    ++i;
  return i < text.size() && text[i] == '{' ? PlanFormat::Json : PlanFormat::Csv;
}

Plan parse_plan(std::string_view text, const std::string& source,
                const CsvReadOptions& csv_options) {
  if (detect_format(text) == PlanFormat::Json) return parse_json_plan(text, source);
  return parse_csv_plan(text, source, csv_options);
}

}  // namespace pipeplan
