// parse_json_plan: strict reading of schemas/plan.schema.json documents.
//
// The document is streamed through nlohmann's SAX interface and never built:
// each "actions" array becomes a std::vector<Action> as it is read (a DOM
// cost about 60 bytes per action on top of the plan). Keys may come in any
// order and a syntax error anywhere outranks every other complaint, so the
// events are only recorded while reading; the checks run afterwards, in a
// fixed order, and report what the first failing one finds.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/cell_text.h"
#include "io/json_strict.h"
#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

using nlohmann::json;

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
  Unknown
};
constexpr const char* kTopFields[] = {"format",        "version",          "schedule",
                                      "pp_degree",     "num_microbatches", "stages_per_rank",
                                      "stage_to_rank", "compute_only",     "forward_only",
                                      "ranks",         "partition"};
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
std::string describe(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Float:
      if (v.big_integer) return "integer " + limits::excerpt(v.string);
      return "a fractional number " + json(v.fractional).dump();
    case Value::Kind::String: return "string " + limits::excerpt(json(v.string).dump());
    case Value::Kind::Null: return "null";
    case Value::Kind::Boolean: return "boolean";
    case Value::Kind::Integer:
    case Value::Kind::Unsigned: return "number";
    case Value::Kind::Array: return "array";
    case Value::Kind::Object: return "object";
    case Value::Kind::Absent: break;
  }
  return "nothing";
}

// Why `v` is not an integer in [min, max]; empty when it is.
std::string integer_problem(const Value& v, long long min, long long max) {
  if (v.big_integer) {
    const bool negative = !v.string.empty() && v.string[0] == '-';
    return limits::excerpt(v.string) +
           (negative ? " is below the minimum " + std::to_string(min)
                     : " is larger than the supported " + std::to_string(max));
  }
  if (!v.is_integer()) return "expected an integer, got " + describe(v);
  if (v.kind == Value::Kind::Unsigned) {
    const unsigned long long u = v.unsigned_;
    if (min > 0 && u < static_cast<unsigned long long>(min))
      return std::to_string(u) + " is below the minimum " + std::to_string(min);
    if (u > static_cast<unsigned long long>(max))
      return std::to_string(u) + " is larger than the supported " + std::to_string(max);
    return {};
  }
  if (v.integer < min)
    return std::to_string(v.integer) + " is below the minimum " + std::to_string(min);
  if (v.integer > max)
    return std::to_string(v.integer) + " is larger than the supported " + std::to_string(max);
  return {};
}

// Only after integer_problem(v, ...) came back empty.
int as_int(const Value& v) {
  return v.kind == Value::Kind::Unsigned ? static_cast<int>(v.unsigned_)
                                         : static_cast<int>(v.integer);
}

/// An input error not yet raised: the JSON path ("" for the document) and why.
struct Failure {
  std::string path;
  std::string what;
};

std::string entry_path(std::size_t i) { return "ranks[" + std::to_string(i) + "]"; }

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
  enum class At : std::uint8_t { Root, Top, Ranks, Entry, Actions, Partition, End };

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
  bool scalar(Value v) {
    if (skip_ > 0) return true;
    switch (at_) {
      case At::Root:
        root_ = std::move(v);
        at_ = At::End;
        break;
      case At::Top:
        if (top_field_ == TopField::Ranks) {
          reset_ranks();
          ranks_ = std::move(v);
        } else if (top_field_ == TopField::Partition) {
          partition_ = std::move(v);
          partition_items_.clear();
        } else if (top_field_ != TopField::Unknown) {
          top_[static_cast<std::size_t>(top_field_)] = std::move(v);
        }
        break;
      case At::Ranks:
        ++entries_;
        if (!bad_) bad_ = BadEntry{entries_ - 1, std::nullopt, not_an_object(v)};
        break;
      case At::Entry:
        if (rank_field_ == RankField::Rank) entry_.rank = std::move(v);
        if (rank_field_ == RankField::Actions) {
          reset_actions(v.kind);
          entry_.actions = std::move(v);  // its value names the wrong type
        }
        break;
      case At::Actions:
        if (!entry_.bad_action)
          entry_.bad_action.emplace(entry_.count, "expected a string, got " + describe(v));
        ++entry_.count;
        break;
      case At::Partition: partition_items_.push_back(std::move(v)); break;
      case At::End: break;
    }
    return true;
  }

  // The start of an object or array: either a level this reader follows, or
  // one whose content is skipped (only its kind matters).
  bool open(Value::Kind kind) {
    if (++depth_ > limits::kMaxJsonDepth) {
      too_deep_ = true;
      return false;  // stops the parser
    }
    if (skip_ > 0) {
      ++skip_;
      return true;
    }
    const bool object = kind == Value::Kind::Object;
    switch (at_) {
      case At::Root:
        root_ = with_kind(kind);
        at_ = object ? At::Top : At::End;
        skip_ = object ? 0 : 1;
        return true;
      case At::Top:
        if (top_field_ == TopField::Ranks) {
          reset_ranks();
          ranks_ = with_kind(kind);
          if (!object) {
            at_ = At::Ranks;
            return true;
          }
        } else if (top_field_ == TopField::Partition) {
          partition_ = with_kind(kind);
          partition_items_.clear();
          if (!object) {
            at_ = At::Partition;
            return true;
          }
        } else if (top_field_ != TopField::Unknown) {
          top_[static_cast<std::size_t>(top_field_)] = with_kind(kind);
        }
        break;
      case At::Ranks:
        ++entries_;
        if (object && !bad_) {
          entry_ = Entry{};
          scratch_.clear();
          at_ = At::Entry;
          return true;
        }
        if (!bad_) bad_ = BadEntry{entries_ - 1, std::nullopt, not_an_object(with_kind(kind))};
        break;
      case At::Entry:
        if (rank_field_ == RankField::Rank) entry_.rank = with_kind(kind);
        if (rank_field_ == RankField::Actions) {
          reset_actions(kind);
          if (!object) {
            at_ = At::Actions;
            return true;
          }
        }
        break;
      case At::Actions:
        if (!entry_.bad_action)
          entry_.bad_action.emplace(entry_.count,
                                    "expected a string, got " + describe(with_kind(kind)));
        ++entry_.count;
        break;
      case At::Partition: partition_items_.push_back(with_kind(kind)); break;
      case At::End: break;
    }
    skip_ = 1;
    return true;
  }

  bool close() {
    --depth_;
    if (skip_ > 0) {
      --skip_;  // back to 0: the enclosing level (at_) continues
      return true;
    }
    switch (at_) {
      case At::Top: at_ = At::End; break;
      case At::Ranks: at_ = At::Top; break;
      case At::Entry:
        finish_entry();
        at_ = At::Ranks;
        break;
      case At::Actions: at_ = At::Entry; break;
      case At::Partition: at_ = At::Top; break;
      case At::Root:
      case At::End: break;
    }
    return true;
  }

  Failure not_an_object(const Value& v) const {
    return {entry_path(entries_ - 1),
            "expected an object {\"rank\": .., \"actions\": [..]}, got " + describe(v)};
  }

  // An entry's own checks, in the DOM reader's order. The ones that need
  // pp_degree or earlier entries sit between "rank" and "actions" and run in
  // finish().
  void finish_entry() {
    const std::size_t i = entries_ - 1;
    const std::string path = entry_path(i);
    if (entry_.duplicate) {
      bad_ = BadEntry{i, std::nullopt, {path, "duplicate key '" + *entry_.duplicate + "'"}};
      return;
    }
    if (entry_.unknown) {
      bad_ = BadEntry{
          i, std::nullopt, {path, "unknown field '" + limits::excerpt(*entry_.unknown) + "'"}};
      return;
    }
    if (!entry_.rank.present()) {
      bad_ = BadEntry{i, std::nullopt, {path, "missing field 'rank'"}};
      return;
    }
    if (std::string why = integer_problem(entry_.rank, 0, limits::kMaxRanks); !why.empty()) {
      bad_ = BadEntry{i, std::nullopt, {path + ".rank", std::move(why)}};
      return;
    }
    const int id = as_int(entry_.rank);
    if (!entry_.actions.present()) {
      bad_ = BadEntry{i, id, {path, "missing field 'actions'"}};
    } else if (entry_.actions.kind != Value::Kind::Array) {
      bad_ = BadEntry{i,
                      id,
                      {path + ".actions",
                       "expected an array of action strings, got " + describe(entry_.actions)}};
    } else if (entry_.bad_action) {
      bad_ = BadEntry{i,
                      id,
                      {path + ".actions[" + std::to_string(entry_.bad_action->first) + "]",
                       std::move(entry_.bad_action->second)}};
    } else {
      plan_.rank_ids.push_back(id);
      plan_.ranks.emplace_back(scratch_.begin(), scratch_.end());  // exact size; scratch is reused
    }
  }

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
  std::size_t entries_ = 0;      // of "ranks", including any after bad_
  std::optional<BadEntry> bad_;  // once set, later entries are only counted
  Entry entry_;
  std::vector<Action> scratch_;  // the current entry's actions
  Plan plan_;                    // meta is filled by finish()
};

Plan PlanEvents::finish(const std::string& source) && {
  auto fail = [&](const std::string& path, const std::string& what) {
    throw InputError(source + ": " + (path.empty() ? "" : path + ": ") + what);
  };
  auto field = [&](TopField f) -> const Value& {
    const Value& v = f == TopField::Ranks ? ranks_ : top_[static_cast<std::size_t>(f)];
    if (!v.present())
      fail("", std::string("missing field '") + kTopFields[static_cast<std::size_t>(f)] + "'");
    return v;
  };
  auto text_field = [&](TopField f, const char* path) -> const std::string& {
    const Value& v = field(f);
    if (v.kind != Value::Kind::String) fail(path, "expected a string, got " + describe(v));
    return v.string;
  };
  auto int_field = [&](TopField f, const char* path, long long min, long long max) {
    const Value& v = field(f);
    if (std::string why = integer_problem(v, min, max); !why.empty()) fail(path, why);
    return as_int(v);
  };

  if (root_.kind != Value::Kind::Object)
    fail("", "expected a JSON object at the top level, got " + describe(root_));
  if (duplicate_) fail("", "duplicate key '" + *duplicate_ + "'");
  if (unknown_) fail("", "unknown field '" + limits::excerpt(*unknown_) + "'");

  const std::string& format = text_field(TopField::Format, "format");
  if (format != kPlanFormatName)
    fail("format", "expected \"" + std::string(kPlanFormatName) + "\", got \"" +
                       limits::excerpt(format) + "\" (not a pipeplan plan)");
  const Value& version = field(TopField::Version);
  if (version.big_integer) fail("version", limits::excerpt(version.string) + " is not supported");
  if (!version.is_integer()) fail("version", "expected an integer, got " + describe(version));
  const bool supported =
      version.kind == Value::Kind::Unsigned
          ? version.unsigned_ == static_cast<unsigned long long>(kPlanFormatVersion)
          : version.integer == kPlanFormatVersion;
  if (!supported)
    fail("version", (version.kind == Value::Kind::Unsigned ? std::to_string(version.unsigned_)
                                                           : std::to_string(version.integer)) +
                        " is not supported (this pipeplan reads version " +
                        std::to_string(kPlanFormatVersion) + ")");

  PlanMeta& meta = plan_.meta;
  meta.schedule = text_field(TopField::Schedule, "schedule");
  if (meta.schedule.empty()) fail("schedule", "must not be empty");
  meta.pp_degree = int_field(TopField::PpDegree, "pp_degree", 1, limits::kMaxRanks);
  meta.num_microbatches =
      int_field(TopField::NumMicrobatches, "num_microbatches", 1, limits::kMaxMicrobatches);
  meta.stages_per_rank =
      int_field(TopField::StagesPerRank, "stages_per_rank", 1, limits::kMaxStagesPerRank);
  if (std::string why =
          limits::shape_problem(meta.pp_degree, meta.stages_per_rank, meta.num_microbatches);
      !why.empty())
    fail("", why);
  const std::string& mapping = text_field(TopField::StageToRank, "stage_to_rank");
  auto parsed_mapping = parse_stage_mapping(mapping);
  if (!parsed_mapping)
    fail("stage_to_rank", "expected \"loop\" or \"v\", got \"" + limits::excerpt(mapping) + "\"");
  meta.mapping = *parsed_mapping;

  const Value& compute_only = field(TopField::ComputeOnly);
  if (compute_only.kind != Value::Kind::Boolean)
    fail("compute_only", "expected true or false, got " + describe(compute_only));

  // Optional; absent means a training plan.
  const Value& forward_only = top_[static_cast<std::size_t>(TopField::ForwardOnly)];
  if (forward_only.present()) {
    if (forward_only.kind != Value::Kind::Boolean)
      fail("forward_only", "expected true or false, got " + describe(forward_only));
    meta.forward_only = forward_only.boolean;
  }

  if (partition_.present()) {
    if (partition_.kind != Value::Kind::Array)
      fail("partition", "expected an array of layer counts, got " + describe(partition_));
    const int stages = meta.num_stages();  // bounded by shape_problem above
    if (partition_items_.size() != static_cast<std::size_t>(stages))
      fail("partition", "holds " + std::to_string(partition_items_.size()) + " layer counts for " +
                            std::to_string(stages) + " stages (pp_degree * stages_per_rank)");
    for (std::size_t s = 0; s < partition_items_.size(); ++s) {
      if (std::string why = integer_problem(partition_items_[s], 1, limits::kMaxLayers);
          !why.empty())
        fail("partition[" + std::to_string(s) + "]", why);
      meta.partition.push_back(as_int(partition_items_[s]));
    }
  }

  const Value& ranks = field(TopField::Ranks);
  if (ranks.kind != Value::Kind::Array) fail("ranks", "expected an array, got " + describe(ranks));
  if (entries_ == 0) fail("ranks", "must hold at least one rank");
  if (entries_ > static_cast<std::size_t>(meta.pp_degree))
    fail("ranks",
         std::to_string(entries_) + " entries for pp_degree " + std::to_string(meta.pp_degree));

  // The checks between an entry's "rank" and its "actions", entry by entry up
  // to the first entry that failed one of its own.
  std::vector<long long> listed_at(static_cast<std::size_t>(meta.pp_degree), -1);  // id -> entry
  auto check_id = [&](std::size_t i, int id, int previous) {
    const std::string path = entry_path(i) + ".rank";
    if (id >= meta.pp_degree)
      fail(path, "rank " + std::to_string(id) + " is out of range 0.." +
                     std::to_string(meta.pp_degree - 1));
    if (const long long j = listed_at[static_cast<std::size_t>(id)]; j >= 0)
      fail(path,
           "rank " + std::to_string(id) + " appears twice (also ranks[" + std::to_string(j) + "])");
    listed_at[static_cast<std::size_t>(id)] = static_cast<long long>(i);
    if (previous >= 0 && id < previous)
      fail(path, "rank " + std::to_string(id) + " listed after rank " + std::to_string(previous) +
                     " (ranks are listed in ascending order)");
  };
  for (std::size_t i = 0; i < plan_.rank_ids.size(); ++i)
    check_id(i, plan_.rank_ids[i], i > 0 ? plan_.rank_ids[i - 1] : -1);
  if (bad_) {
    if (bad_->id)
      check_id(bad_->index, *bad_->id, plan_.rank_ids.empty() ? -1 : plan_.rank_ids.back());
    fail(bad_->failure.path, bad_->failure.what);
  }

  // The flag is redundant with the actions; a disagreement means a hand edit
  // went wrong, so say where.
  if (compute_only.boolean) {
    for (std::size_t i = 0; i < plan_.ranks.size(); ++i)
      for (std::size_t k = 0; k < plan_.ranks[i].size(); ++k)
        if (is_comm(plan_.ranks[i][k].type))
          fail("compute_only", "true, but ranks[" + std::to_string(i) + "].actions[" +
                                   std::to_string(k) + "] is " + to_string(plan_.ranks[i][k]));
  } else if (plan_.is_compute_only()) {
    fail("compute_only", "false, but the plan holds no SEND/RECV action");
  }
  return std::move(plan_);
}

}  // namespace

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
