#include "io/json_strict.h"

#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan::io {

using nlohmann::json;

std::string too_deep_text() {
  return "nested deeper than the supported " + std::to_string(limits::kMaxJsonDepth) + " levels";
}

std::string json_error_text(const std::string& message) {
  std::string what = message;
  // nlohmann quotes the whole offending token ("last read: '...'"): cap it.
  if (auto last = what.find("; last read: '"); last != std::string::npos) {
    const std::size_t from = last + 14;
    const std::size_t to = what.rfind('\'');
    if (to != std::string::npos && to >= from)
      what = what.substr(0, from) +
             limits::excerpt(std::string_view(what).substr(from, to - from)) + what.substr(to);
  }
  // ... and the number it could not hold ("number overflow parsing '1e+3096'").
  if (auto at = what.find("parsing '"); at != std::string::npos) {
    const std::size_t from = at + 9;
    const std::size_t to = what.rfind('\'');
    if (to != std::string::npos && to >= from)
      what = what.substr(0, from) +
             limits::excerpt(std::string_view(what).substr(from, to - from)) + what.substr(to);
  }
  // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep line/column.
  if (auto close = what.find("] ");
      what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
    what = what.substr(close + 2);
  return what;
}

json parse_json_strict(std::string_view text, const std::string& source, const JsonFilter& filter) {
  std::vector<KeySet> keys;  // per open object
  auto strict = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        // `depth` containers enclose this one.
        if (depth >= limits::kMaxJsonDepth) throw InputError(source + ": " + too_deep_text());
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get_ref<const std::string&>()))
          throw InputError(source + ": duplicate key '" +
                           limits::excerpt(parsed.get_ref<const std::string&>()) + "'");
        break;
      default: break;
    }
    return filter ? filter(depth, event, parsed) : true;
  };
  try {
    return json::parse(text.begin(), text.end(), strict);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for "1e+3096"
    throw InputError(source + ": not valid JSON: " + json_error_text(e.what()));
  }
}

}  // namespace pipeplan::io
