// A bounded reader of the Python pickle subset that torch's C++ pickler
// writes (protocol 2: dicts, lists, tuples, str, int, float, bool, None and
// the memo), into a plain value tree. Enough for torch's Flight Recorder
// dumps; no class is ever constructed, so no pickle can run code here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pipeplan {

/// One value of a pickle. Dict items keep their order; keys may be any value.
struct PickleValue {
  enum class Kind : std::uint8_t { None, Bool, Int, Float, Str, Bytes, List, Tuple, Dict };
  Kind kind = Kind::None;
  bool b = false;
  std::int64_t i = 0;
  double f = 0.0;
  std::string s;                                             ///< Str (UTF-8) and Bytes
  std::vector<PickleValue> items;                            ///< List, Tuple
  std::vector<std::pair<PickleValue, PickleValue>> entries;  ///< Dict

  /// The value of the Str key `key` of a Dict; nullptr when absent or not a dict.
  const PickleValue* find(std::string_view key) const;
  /// "dict", "list", "str", ... (for messages).
  const char* kind_name() const;
};

/// Bounds that keep hostile input from exhausting memory or the stack.
struct PickleLimits {
  int max_depth = 64;                 ///< nesting of containers (and of MARKs)
  std::size_t max_values = 1u << 22;  ///< values made, memo copies included
  std::size_t max_string = 1u << 24;  ///< bytes of one string
  std::size_t max_bytes = 1u << 28;   ///< bytes of all strings, memo copies included
};

/// Reads one pickle. Throws InputError "<source>: offset N: ..." naming the
/// opcode for an unknown or unsupported one ("opcode 0x63 'c' (GLOBAL) is not
/// supported"), a truncated stream, a bad memo index or a limit exceeded.
PickleValue parse_pickle(std::string_view bytes, const std::string& source = "<pickle>",
                         const PickleLimits& limits = {});

}  // namespace pipeplan
