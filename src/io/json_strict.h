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
#include <unordered_set>
#include <vector>

namespace pipeplan::io {

/// The keys of one open object, for the duplicate check: a short list, a
/// hash set once it grows (an object of a million keys stays linear).
class KeySet {
 public:
  /// False when `key` was there already.
  bool insert(const std::string& key) {
    if (!many_.empty()) return many_.insert(key).second;
    for (const std::string& k : few_)
      if (k == key) return false;
    few_.push_back(key);
    if (few_.size() > 16) {
      many_.insert(few_.begin(), few_.end());
      few_.clear();
    }
    return true;
  }
  void clear() {
    few_.clear();
    many_.clear();
  }

 private:
  std::vector<std::string> few_;
  std::unordered_set<std::string> many_;
};

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
