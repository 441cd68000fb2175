// The text form of actions, torch's grammar: the one printer and the one
// parser (with the limits of limits.h), used by every reader, the Python
// module and the tests.
#include <algorithm>
#include <array>
#include <charconv>

#include "ir/group_members.h"
#include "pipeplan/ir.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

constexpr std::array<std::string_view, 15> kTypeNames = {
    "F",           "B",       "I",       "W",           "SEND_F",  "RECV_F", "SEND_B",   "RECV_B",
    "OVERLAP_F_B", "UNSHARD", "RESHARD", "REDUCE_GRAD", "OFFLOAD", "RELOAD", "RECOMPUTE"};
constexpr std::string_view kGroupType = "OVERLAP_F_B";
constexpr std::string_view kBatchType = "BATCH_P2P";

// The types a plain action may name, for messages: every type but the group.
const std::string& type_list() {
  static const std::string list = [] {
    std::string s;
    for (std::string_view name : kTypeNames)
      if (name != kGroupType) s += (s.empty() ? "" : ", ") + std::string(name);
    return s;
  }();
  return list;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_type_char(char c) { return (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_space(char c) { return c == ' ' || c == '\t'; }

ActionParse fail(std::size_t offset, std::string reason) {
  ActionParse p;
  p.error_offset = offset;
  p.reason = std::move(reason);
  return p;
}

ActionParse parsed(const Action& a) {
  ActionParse p;
  p.action = a;
  return p;
}

// One byte quoted, escaped as every message escapes it (limits::excerpt).
std::string quoted_char(char c) { return "'" + limits::excerpt(std::string_view(&c, 1)) + "'"; }

// Reads a decimal number at s[pos]; nullopt (and sets *error) when absent or
// above `max` (limits.h: stage and microbatch numbers stay below the limits,
// so no count derived from them overflows).
std::optional<int> take_number(std::string_view s, std::size_t& pos, int max, std::string* error) {
  if (pos >= s.size() || !is_digit(s[pos])) return std::nullopt;
  const std::size_t begin = pos;
  long long value = 0;
  while (pos < s.size() && is_digit(s[pos])) {
    if (value <= max) value = value * 10 + (s[pos] - '0');
    ++pos;
  }
  if (value > max) {
    *error = "number " + limits::excerpt(s.substr(begin, pos - begin)) +
             " is larger than the supported " + std::to_string(max);
    pos = begin;
    return std::nullopt;
  }
  return static_cast<int>(value);
}

// "<stage><TYPE>[<mb>]"; `base` is s's offset in the whole text.
ActionParse parse_simple(std::string_view s, std::size_t base) {
  std::size_t pos = 0;
  std::string error;
  if (s.empty()) return fail(base, "empty action");
  auto stage = take_number(s, pos, limits::kMaxStages - 1, &error);
  if (!stage) {
    if (!error.empty()) return fail(base, "stage " + error);
    return fail(base, "expected a stage number, got " + quoted_char(s[0]));
  }
  const std::size_t type_at = pos;
  while (pos < s.size() && is_type_char(s[pos])) ++pos;
  std::string_view type_name = s.substr(type_at, pos - type_at);
  if (type_name.empty()) {
    if (type_at >= s.size()) return fail(base + type_at, "missing action type after the stage");
    return fail(base + type_at, "expected an action type after the stage, got " +
                                    quoted_char(s[type_at]) + " (types: " + type_list() + ")");
  }
  auto type = parse_action_type(type_name);
  if (!type)
    return fail(base + type_at, "'" + limits::excerpt(type_name) +
                                    "' is not an action type (types: " + type_list() + ")");
  if (*type == ActionType::OverlapFB)
    return fail(base, "OVERLAP_F_B is written as a group: (<s>F<m>;<s>B<m>)OVERLAP_F_B");
  if (is_passthrough(*type)) {
    if (pos < s.size()) {
      if (is_digit(s[pos]))
        return fail(base + pos, std::string(type_name) + " takes no microbatch");
      return fail(base + pos,
                  "unexpected " + quoted_char(s[pos]) + " after " + std::string(type_name));
    }
    return parsed(Action{*type, *stage, -1, -1, -1});
  }
  const std::size_t mb_at = pos;
  auto mb = take_number(s, pos, limits::kMaxMicrobatches - 1, &error);
  if (!mb) {
    if (!error.empty()) return fail(base + mb_at, "microbatch " + error);
    if (mb_at >= s.size())
      return fail(base + mb_at, "missing microbatch after '" + std::string(type_name) + "'");
    return fail(base + mb_at, "expected a microbatch after '" + std::string(type_name) + "', got " +
                                  quoted_char(s[mb_at]));
  }
  if (pos < s.size())
    return fail(base + pos, "unexpected " + quoted_char(s[pos]) + " after the microbatch");
  return parsed(make(*type, *stage, *mb));
}

// Trims spaces, returning the offset of the first kept character.
std::string_view trim(std::string_view s, std::size_t& offset) {
  std::size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  offset += b;
  return s.substr(b, e - b);
}

// "(<s>SEND_F<m>)BATCH_P2P": a group of one, the action marked waited.
// (A group of several is a cell of several actions: the plan readers'.)
ActionParse parse_waited(std::string_view s, std::size_t close) {
  std::size_t at = 1;
  std::string_view inner = trim(s.substr(1, close - 1), at);
  if (inner.find(';') != std::string_view::npos)
    return fail(1, "a BATCH_P2P group of several actions is several actions: read it in a plan");
  ActionParse a = parse_simple(inner, at);
  if (!a.action) return a;
  if (!is_comm(a.action->type))
    return fail(at, "a BATCH_P2P group holds only SEND_F, RECV_F, SEND_B and RECV_B, got '" +
                        limits::excerpt(inner) + "'");
  a.action->waited = true;
  return a;
}

ActionParse parse_group(std::string_view s) {
  const std::size_t close = s.find(')');
  if (close == std::string_view::npos)
    return fail(s.size(), "missing ')' closing the OVERLAP_F_B group");
  if (s.substr(close + 1) == kBatchType) return parse_waited(s, close);
  if (s.substr(close + 1) != kGroupType) {
    return fail(close + 1, "expected 'OVERLAP_F_B' after ')', got '" +
                               limits::excerpt(s.substr(close + 1)) + "'");
  }
  std::string_view inner = s.substr(1, close - 1);
  const std::size_t semi = inner.find(';');
  if (semi == std::string_view::npos || inner.find(';', semi + 1) != std::string_view::npos)
    return fail(1, "an OVERLAP_F_B group holds exactly two actions: (<s>F<m>;<s>B<m>)");
  std::size_t f_at = 1, b_at = 1 + semi + 1;
  std::string_view f_text = trim(inner.substr(0, semi), f_at);
  std::string_view b_text = trim(inner.substr(semi + 1), b_at);
  ActionParse f = parse_simple(f_text, f_at);
  if (!f.action) return f;
  if (f.action->type != ActionType::F)
    return fail(f_at, "an OVERLAP_F_B group starts with a forward (F), got '" +
                          limits::excerpt(f_text) + "'");
  ActionParse b = parse_simple(b_text, b_at);
  if (!b.action) return b;
  if (b.action->type != ActionType::B)
    return fail(b_at, "an OVERLAP_F_B group ends with a full backward (B), got '" +
                          limits::excerpt(b_text) + "'");
  return parsed(
      make_overlap(f.action->stage, f.action->microbatch, b.action->stage, b.action->microbatch));
}

}  // namespace

std::string_view to_string(ActionType t) { return kTypeNames[static_cast<std::size_t>(t)]; }

std::optional<ActionType> parse_action_type(std::string_view s) {
  for (std::size_t i = 0; i < kTypeNames.size(); ++i)
    if (kTypeNames[i] == s) return static_cast<ActionType>(i);
  return std::nullopt;
}

void append_to(std::string& out, const Action& a) {
  if (a.waited) {  // a BATCH_P2P group of one
    Action plain = a;
    plain.waited = false;
    out += '(';
    append_to(out, plain);
    out += ")BATCH_P2P";
    return;
  }
  if (a.type == ActionType::OverlapFB) {
    out += '(';
    append_to(out, make(ActionType::F, a.stage, a.microbatch));
    out += ';';
    append_to(out, make(ActionType::B, a.sub_stage, a.sub_microbatch));
    out += ")OVERLAP_F_B";
    return;
  }
  // to_chars into a stack buffer: no temporary string per number.
  char buf[48];
  char* p = std::to_chars(buf, buf + 16, a.stage).ptr;
  const std::string_view type = to_string(a.type);
  p = std::copy(type.begin(), type.end(), p);
  if (!is_passthrough(a.type)) p = std::to_chars(p, p + 16, a.microbatch).ptr;
  out.append(buf, static_cast<std::size_t>(p - buf));
}

std::string to_string(const Action& a) {
  std::string s;
  append_to(s, a);
  return s;
}

std::string to_string(const std::vector<Action>& actions) {
  std::string s;
  for (std::size_t i = 0; i < actions.size();) {
    if (i) s += ' ';
    const std::size_t n = cell_size(actions, i);
    append_cell(s, &actions[i], n);
    i += n;
  }
  return s;
}

std::size_t cell_size(const std::vector<Action>& list, std::size_t i) {
  std::size_t j = i;
  while (list[j].batch_next && j + 1 < list.size()) ++j;
  return j - i + 1;
}

void append_cell(std::string& out, const Action* first, std::size_t n) {
  if (n == 1) {
    append_to(out, *first);
    return;
  }
  out += '(';
  for (std::size_t k = 0; k < n; ++k) {
    if (k) out += ';';
    append_to(out, first[k]);
  }
  out += ")BATCH_P2P";
}

long first_bad_group(const std::vector<Action>& list, std::string* why) {
  for (std::size_t i = 0; i < list.size();) {
    const std::size_t n = cell_size(list, i);
    if (n == 1 && !list[i].batch_next) {
      if (list[i].waited && !is_comm(list[i].type)) {
        *why = to_string(list[i]) + " is a BATCH_P2P group of one, which holds only " +
               "SEND_F, RECV_F, SEND_B or RECV_B";
        return static_cast<long>(i);
      }
      ++i;
      continue;
    }
    detail::GroupMembers members;
    for (std::size_t k = i; k < i + n; ++k) {
      if (list[k].waited) {
        *why = to_string(list[k]) + " is a BATCH_P2P group of one inside another group";
        return static_cast<long>(k);
      }
      if (!is_comm(list[k].type)) {
        *why = to_string(list[k]) + " is in a BATCH_P2P group, which holds only " +
               "SEND_F, RECV_F, SEND_B and RECV_B";
        return static_cast<long>(k);
      }
      if (!members.add(list[k])) {
        *why = to_string(list[k]) + " is twice in one BATCH_P2P group";
        return static_cast<long>(k);
      }
    }
    if (list[i + n - 1].batch_next) {
      *why = to_string(list[i + n - 1]) +
             " is marked as posted with the next action, but it ends its rank's list";
      return static_cast<long>(i + n - 1);
    }
    i += n;
  }
  return -1;
}

ActionParse parse_action_located(std::string_view text) {
  if (!text.empty() && text.front() == '(') return parse_group(text);
  return parse_simple(text, 0);
}

std::optional<Action> parse_action(std::string_view text) {
  return parse_action_located(text).action;
}

std::string describe_bad_action(std::string_view text, const ActionParse& failure) {
  return "unknown action '" + limits::excerpt(text) + "': " + failure.reason;
}

}  // namespace pipeplan
