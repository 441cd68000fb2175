// Stage mappings and plans: where stages live and what a plan holds.
#include "pipeplan/ir.h"

namespace pipeplan {

std::string_view to_string(StageMapping m) { return m == StageMapping::Loop ? "loop" : "v"; }

std::optional<StageMapping> parse_stage_mapping(std::string_view s) {
  if (s == "loop") return StageMapping::Loop;
  if (s == "v") return StageMapping::V;
  return std::nullopt;
}

std::string to_string(const Route& r) {
  return std::to_string(r.first) + "-" + std::to_string(r.last);
}

std::optional<Route> parse_route(std::string_view s) {
  auto number = [](std::string_view t) -> std::optional<int> {
    if (t.empty() || t.size() > 9) return std::nullopt;
    int v = 0;
    for (char c : t) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    return v;
  };
  const std::size_t dash = s.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const auto first = number(s.substr(0, dash)), last = number(s.substr(dash + 1));
  if (!first || !last || *first > *last) return std::nullopt;
  return Route{*first, *last};
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

bool Plan::has_memory_actions() const {
  for (const auto& list : ranks)
    for (const auto& a : list)
      if (is_memory(a.type)) return true;
  return false;
}

std::size_t Plan::num_actions() const {
  std::size_t n = 0;
  for (const auto& list : ranks) n += list.size();
  return n;
}

}  // namespace pipeplan
