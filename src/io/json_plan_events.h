// Internal: the JSON plan reader's events (json_reader.cc). The document is
// streamed through nlohmann's SAX interface into PlanEvents: the values the
// checks need as Values (scalars with their value, containers by kind) and
// each rank's "actions" straight into a list of actions. Reading only
// records (json_plan_events.cc); the checks run afterwards, in a fixed
// order, in PlanEvents::finish() (json_plan_checks.cc).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/cell_text.h"
#include "pipeplan/ir.h"
#include "pipeplan/limits.h"

namespace pipeplan::io::json_plan {

using json = nlohmann::json;

enum class TopField : std::uint8_t {
  Format,
  Version,
  Schedule,
  PpDegree,
  NumMicrobatches,
  StagesPerRank,
  StageToRank,
  ComputeOnly,
  ForwardOnly,
  Ranks,
  Partition,
  Routes,
  Unknown
};
constexpr const char* kTopFields[] = {"format",        "version",          "schedule",
                                      "pp_degree",     "num_microbatches", "stages_per_rank",
                                      "stage_to_rank", "compute_only",     "forward_only",
                                      "ranks",         "partition",        "routes"};
enum class RankField : std::uint8_t { Rank, Actions, Unknown };
constexpr const char* kRankFields[] = {"rank", "actions"};

template <typename Field, std::size_t N>
Field lookup(const std::string& key, const char* const (&names)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (key == names[i]) return static_cast<Field>(i);
  return Field::Unknown;
}

// One JSON value as the checks see it: scalars keep their value, containers
// only their kind (their content is either streamed elsewhere or irrelevant).
struct Value {
  enum class Kind : std::uint8_t {
    Absent,
    Null,
    Boolean,
    Integer,
    Unsigned,
    Float,
    String,
    Array,
    Object
  };
  Kind kind = Kind::Absent;
  bool boolean = false;
  long long integer = 0;             // Kind::Integer: negative literals (and -0)
  unsigned long long unsigned_ = 0;  // Kind::Unsigned: the other integers
  double fractional = 0;
  bool big_integer = false;  // Kind::Float: an integer literal beyond 64 bits (string holds it)
  std::string string;

  bool present() const { return kind != Kind::Absent; }
  bool is_integer() const { return kind == Kind::Integer || kind == Kind::Unsigned; }
};

// nlohmann's wording for a value of the wrong type, as the DOM reader gave it.
std::string describe(const Value& v);

// Why `v` is not an integer in [min, max]; empty when it is.
std::string integer_problem(const Value& v, long long min, long long max);

// Only after integer_problem(v, ...) came back empty.
inline int as_int(const Value& v) {
  return v.kind == Value::Kind::Unsigned ? static_cast<int>(v.unsigned_)
                                         : static_cast<int>(v.integer);
}

/// An input error not yet raised: the JSON path ("" for the document) and why.
struct Failure {
  std::string path;
  std::string what;
};

inline std::string entry_path(std::size_t i) { return "ranks[" + std::to_string(i) + "]"; }

// The first rank entry that fails a check of its own. Entries before it may
// still fail the checks that need pp_degree or earlier entries (range,
// duplicates, order), which run after reading; so does this entry's, when
// the failure comes after them (`id` set).
struct BadEntry {
  std::size_t index = 0;
  std::optional<int> id;
  Failure failure;
};

// The SAX handler (nlohmann's json_sax protocol, called statically). Every
// callback returns true but parse_error, which stops the parser.
class PlanEvents {
 public:
  // ---- the json_sax protocol
  bool null() { return scalar(with_kind(Value::Kind::Null)); }
  bool boolean(bool b) {
    Value v = with_kind(Value::Kind::Boolean);
    v.boolean = b;
    return scalar(std::move(v));
  }
  bool number_integer(json::number_integer_t x) {
    Value v = with_kind(Value::Kind::Integer);
    v.integer = x;
    return scalar(std::move(v));
  }
  bool number_unsigned(json::number_unsigned_t u) {
    Value v = with_kind(Value::Kind::Unsigned);
    v.unsigned_ = u;
    return scalar(std::move(v));
  }
  bool number_float(json::number_float_t d, const std::string& literal) {
    Value v = with_kind(Value::Kind::Float);
    v.fractional = d;
    // nlohmann hands over an integer too large for 64 bits as a float; it is
    // still an integer, so say so instead of "a fractional number 1e+29".
    if (literal.find_first_of(".eE") == std::string::npos) {
      v.big_integer = true;
      v.string = literal;
    }
    return scalar(std::move(v));
  }
  bool string(std::string& s) {
    if (skip_ == 0 && at_ == At::Actions) {  // the hot path: one action
      if (++actions_read_ > limits::kMaxActions) {
        too_many_ = true;
        return false;  // stops the parser
      }
      action(s);
      return true;
    }
    if (skip_ > 0) return true;
    Value v = with_kind(Value::Kind::String);
    v.string = s;
    return scalar(std::move(v));
  }
  bool binary(json::binary_t& /*unused*/) { return true; }  // not produced by JSON text
  bool start_object(std::size_t /*unknown*/) { return open(Value::Kind::Object); }
  bool start_array(std::size_t /*unknown*/) { return open(Value::Kind::Array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (skip_ > 0) return true;
    if (at_ == At::Top) {
      top_field_ = lookup<TopField>(k, kTopFields);
      if (top_field_ == TopField::Unknown) note_unknown(unknown_, k);
      else if (!note_key(top_seen_, static_cast<unsigned>(top_field_)) && !duplicate_)
        duplicate_ = k;
    } else if (at_ == At::Entry) {
      rank_field_ = lookup<RankField>(k, kRankFields);
      if (rank_field_ == RankField::Unknown) note_unknown(entry_.unknown, k);
      else if (!note_key(entry_.seen, static_cast<unsigned>(rank_field_)) && !entry_.duplicate)
        entry_.duplicate = k;
    }
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) {
    syntax_error_ = e.what();
    return false;
  }

  // ---- after reading
  const std::string& syntax_error() const { return syntax_error_; }
  /// Whether reading stopped at limits::kMaxActions.
  bool too_many_actions() const { return too_many_; }
  /// Whether reading stopped at limits::kMaxJsonDepth.
  bool too_deep() const { return too_deep_; }

  /// Runs every check in the DOM reader's order; throws the first failure.
  Plan finish(const std::string& source) &&;

 private:
  // Partition and Routes: the items of a flat array (list_ says which).
  enum class At : std::uint8_t { Root, Top, Ranks, Entry, Actions, List, End };

  // What one rank entry held; reset per entry.
  struct Entry {
    Value rank;
    Value actions;  // Absent, an Array (streamed into scratch_) or the wrong type
    std::optional<std::string> unknown;
    std::optional<std::string> duplicate;  // the first key given twice
    unsigned seen = 0;                     // bit per RankField
    std::size_t count = 0;                 // elements of "actions" read so far
    std::optional<std::pair<std::size_t, std::string>> bad_action;  // the first: index, why
  };

  static Value with_kind(Value::Kind k) {
    Value v;
    v.kind = k;
    return v;
  }

  // nlohmann's DOM kept keys in a std::map, so its check met the smallest
  // unknown key first.
  static void note_unknown(std::optional<std::string>& smallest, const std::string& key) {
    if (!smallest || key < *smallest) smallest = key;
  }

  // Marks field `bit` seen; false when it already was (a duplicate key: a
  // strict reader refuses "last one wins").
  static bool note_key(unsigned& seen, unsigned bit) {
    const unsigned mask = 1u << bit;
    const bool first = (seen & mask) == 0;
    seen |= mask;
    return first;
  }

  // A later "ranks" replaces an earlier one, as in the DOM (last key wins).
  void reset_ranks() {
    plan_.rank_ids.clear();
    plan_.ranks.clear();
    entries_ = 0;
    bad_.reset();
  }

  void reset_actions(Value::Kind kind) {
    entry_.actions = with_kind(kind);
    entry_.count = 0;
    entry_.bad_action.reset();
    scratch_.clear();
  }

  void action(const std::string& s) {
    const std::size_t k = entry_.count++;
    if (entry_.bad_action) return;
    io::CellError bad;
    if (!io::parse_cell(s, scratch_, bad)) entry_.bad_action.emplace(k, std::move(bad.message));
  }

  // A value that is not a container, at the current position.
  bool scalar(Value v);

  // The start of an object or array: either a level this reader follows, or
  // one whose content is skipped (only its kind matters).
  bool open(Value::Kind kind);

  bool close();

  Failure not_an_object(const Value& v) const;

  // An entry's own checks, in the DOM reader's order. The ones that need
  // pp_degree or earlier entries sit between "rank" and "actions" and run in
  // finish().
  void finish_entry();

  At at_ = At::Root;
  int depth_ = 0;  // containers open
  bool too_deep_ = false;
  int skip_ = 0;  // depth inside a container whose content is not followed
  TopField top_field_ = TopField::Unknown;  // the field whose value comes next
  RankField rank_field_ = RankField::Unknown;
  std::string syntax_error_;

  Value root_;
  std::optional<std::string> unknown_;    // smallest unknown top-level key
  std::optional<std::string> duplicate_;  // first known top-level key given twice
  unsigned top_seen_ = 0;                 // bit per TopField
  std::size_t actions_read_ = 0;          // action strings in all entries
  bool too_many_ = false;
  Value top_[static_cast<std::size_t>(TopField::Ranks)];
  Value ranks_;
  Value partition_;  // Absent, an Array (items below) or the wrong type
  std::vector<Value> partition_items_;
  Value routes_;  // Absent, an Array of "first-last" strings (items below) or the wrong type
  std::vector<Value> routes_items_;
  std::vector<Value>* list_ = nullptr;  // the items At::List appends to
  std::size_t entries_ = 0;             // of "ranks", including any after bad_
  std::optional<BadEntry> bad_;         // once set, later entries are only counted
  Entry entry_;
  std::vector<Action> scratch_;  // the current entry's actions
  Plan plan_;                    // meta is filled by finish()
};

}  // namespace pipeplan::io::json_plan
