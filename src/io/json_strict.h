// Internal to src/io: the rules every JSON reader shares. A key given twice
// in one object is refused (nlohmann keeps the last one silently), nesting
// deeper than limits::kMaxJsonDepth is refused while reading (so nothing
// recurses over a hostile tree later: dump(), comparisons), and a syntax
// error is worded without nlohmann's tag, its quoted token capped.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <string_view>

namespace pipeplan::io {

/// nlohmann's parser callback: (depth, event, value) -> keep the value.
using JsonFilter =
    std::function<bool(int depth, nlohmann::json::parse_event_t event, nlohmann::json& value)>;

/// Parses `text` into a tree under the shared rules. `filter`, when given,
/// sees every event after the checks (return false to drop a finished value
/// from the tree, e.g. a record already converted). Throws InputError
/// "<source>: not valid JSON: ..." / "<source>: duplicate key 'K'" /
/// "<source>: nested deeper than the supported 64 levels".
nlohmann::json parse_json_strict(std::string_view text, const std::string& source,
                                 const JsonFilter& filter = {});

/// A parse error's text for a message: "[json.exception.parse_error.101] "
/// dropped, the token after "last read: '" capped (limits::excerpt).
std::string json_error_text(const std::string& what);

/// "nested deeper than the supported 64 levels": the one wording.
std::string too_deep_text();

}  // namespace pipeplan::io
