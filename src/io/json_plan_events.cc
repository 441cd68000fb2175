// Reading a JSON plan: what the SAX events record (json_plan_events.h).
#include "io/json_plan_events.h"

#include <string>
#include <utility>

#include "pipeplan/limits.h"

namespace pipeplan::io::json_plan {

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

bool PlanEvents::scalar(Value v) {
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
      } else if (top_field_ == TopField::Routes) {
        routes_ = std::move(v);
        routes_items_.clear();
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
    case At::List: list_->push_back(std::move(v)); break;
    case At::End: break;
  }
  return true;
}

bool PlanEvents::open(Value::Kind kind) {
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
      } else if (top_field_ == TopField::Partition || top_field_ == TopField::Routes) {
        const bool partition = top_field_ == TopField::Partition;
        (partition ? partition_ : routes_) = with_kind(kind);
        list_ = partition ? &partition_items_ : &routes_items_;
        list_->clear();
        if (!object) {
          at_ = At::List;
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
    case At::List: list_->push_back(with_kind(kind)); break;
    case At::End: break;
  }
  skip_ = 1;
  return true;
}

bool PlanEvents::close() {
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
    case At::List: at_ = At::Top; break;
    case At::Root:
    case At::End: break;
  }
  return true;
}

Failure PlanEvents::not_an_object(const Value& v) const {
  return {entry_path(entries_ - 1),
          "expected an object {\"rank\": .., \"actions\": [..]}, got " + describe(v)};
}

void PlanEvents::finish_entry() {
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

}  // namespace pipeplan::io::json_plan
