#include "pipeplan/ir.h"

#include <algorithm>
#include <array>
#include <charconv>

namespace pipeplan {
namespace {

constexpr std::array<std::string_view, 12> kTypeNames = {
    "F",      "B",      "I",           "W",       "SEND_F",  "RECV_F",
    "SEND_B", "RECV_B", "OVERLAP_F_B", "UNSHARD", "RESHARD", "REDUCE_GRAD"};

// Parses a non-negative decimal int at the start of s; advances s.
std::optional<int> take_int(std::string_view& s) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return std::nullopt;
  int value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc()) return std::nullopt;
  s.remove_prefix(static_cast<std::size_t>(ptr - s.data()));
  return value;
}

// "<stage><TYPE><mb>" for a plain (non-group) action.
std::optional<Action> parse_simple(std::string_view s) {
  auto stage = take_int(s);
  if (!stage) return std::nullopt;
  std::size_t n = 0;
  while (n < s.size() && ((s[n] >= 'A' && s[n] <= 'Z') || s[n] == '_')) ++n;
  auto type = parse_action_type(s.substr(0, n));
  if (!type || *type == ActionType::OverlapFB) return std::nullopt;
  s.remove_prefix(n);
  if (is_passthrough(*type)) {
    if (!s.empty()) return std::nullopt;
    return Action{*type, *stage, -1, -1, -1};
  }
  auto mb = take_int(s);
  if (!mb || !s.empty()) return std::nullopt;
  return make(*type, *stage, *mb);
}

}  // namespace

std::string_view to_string(ActionType t) { return kTypeNames[static_cast<std::size_t>(t)]; }

std::optional<ActionType> parse_action_type(std::string_view s) {
  for (std::size_t i = 0; i < kTypeNames.size(); ++i)
    if (kTypeNames[i] == s) return static_cast<ActionType>(i);
  return std::nullopt;
}

void append_to(std::string& out, const Action& a) {
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

std::optional<Action> parse_action(std::string_view s) {
  constexpr std::string_view kGroupSuffix = ")OVERLAP_F_B";
  if (!s.empty() && s.front() == '(') {
    if (s.size() <= kGroupSuffix.size() + 1 ||
        s.substr(s.size() - kGroupSuffix.size()) != kGroupSuffix)
      return std::nullopt;
    std::string_view inner = s.substr(1, s.size() - 1 - kGroupSuffix.size());
    auto semi = inner.find(';');
    if (semi == std::string_view::npos) return std::nullopt;
    auto f = parse_simple(inner.substr(0, semi));
    auto b = parse_simple(inner.substr(semi + 1));
    if (!f || !b || f->type != ActionType::F || b->type != ActionType::B) return std::nullopt;
    return make_overlap(f->stage, f->microbatch, b->stage, b->microbatch);
  }
  return parse_simple(s);
}

std::string_view to_string(StageMapping m) { return m == StageMapping::Loop ? "loop" : "v"; }

std::optional<StageMapping> parse_stage_mapping(std::string_view s) {
  if (s == "loop") return StageMapping::Loop;
  if (s == "v") return StageMapping::V;
  return std::nullopt;
}

int PlanMeta::rank_of(int stage) const {
  if (mapping == StageMapping::Loop) return stage % pp_degree;
  // V: stage s and num_stages-1-s share a rank; with v stages per rank the
  // stages zig-zag: chunk c = s / pp goes down when c is odd.
  int chunk = stage / pp_degree;
  int offset = stage % pp_degree;
  return chunk % 2 == 0 ? offset : pp_degree - 1 - offset;
}

std::vector<int> PlanMeta::stages_of(int rank) const {
  std::vector<int> out;
  for (int c = 0; c < stages_per_rank; ++c) {
    if (mapping == StageMapping::Loop || c % 2 == 0) out.push_back(c * pp_degree + rank);
    else out.push_back(c * pp_degree + (pp_degree - 1 - rank));
  }
  return out;
}

bool Plan::is_whole() const {
  if (static_cast<int>(rank_ids.size()) != meta.pp_degree || ranks.size() != rank_ids.size())
    return false;
  for (int r = 0; r < meta.pp_degree; ++r)
    if (rank_ids[static_cast<std::size_t>(r)] != r) return false;
  return true;
}

bool Plan::is_compute_only() const {
  for (const auto& list : ranks)
    for (const auto& a : list)
      if (is_comm(a.type)) return false;
  return true;
}

std::size_t Plan::num_actions() const {
  std::size_t n = 0;
  for (const auto& list : ranks) n += list.size();
  return n;
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
      ++i;
      continue;
    }
    for (std::size_t k = i; k < i + n; ++k) {
      if (!is_comm(list[k].type)) {
        *why = to_string(list[k]) + " is in a BATCH_P2P group, which holds only " +
               "SEND_F, RECV_F, SEND_B and RECV_B";
        return static_cast<long>(k);
      }
      for (std::size_t j = i; j < k; ++j)
        if (Action(list[j].type, list[j].stage, list[j].microbatch) ==
            Action(list[k].type, list[k].stage, list[k].microbatch)) {
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

}  // namespace pipeplan
