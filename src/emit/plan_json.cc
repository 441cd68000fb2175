// write_json: the plan document of schemas/plan.schema.json.
#include <nlohmann/json.hpp>

#include "emit/plan_cells.h"
#include "pipeplan/emit.h"

namespace pipeplan {

// Written by hand rather than through nlohmann::json::dump so that keys keep
// the documented order and each rank's actions stay on one line (plans are
// read by people in review diffs). nlohmann only escapes the free-form name.
void write_json(const Plan& plan, std::ostream& out) {
  detail::refuse_bad_groups(plan, "json");
  const PlanMeta& m = plan.meta;
  out << "{\n"
      << "  \"format\": \"" << kPlanFormatName << "\",\n"
      << "  \"version\": " << kPlanFormatVersion << ",\n"
      << "  \"schedule\": " << nlohmann::json(m.schedule).dump() << ",\n"
      << "  \"pp_degree\": " << m.pp_degree << ",\n"
      << "  \"num_microbatches\": " << m.num_microbatches << ",\n"
      << "  \"stages_per_rank\": " << m.stages_per_rank << ",\n"
      << "  \"stage_to_rank\": \"" << to_string(m.mapping) << "\",\n"
      << "  \"compute_only\": " << (plan.is_compute_only() ? "true" : "false") << ",\n";
  // Written only when set: training plans keep the version-1 layout byte for byte.
  if (m.forward_only) out << "  \"forward_only\": true,\n";
  if (!m.partition.empty()) {
    out << "  \"partition\": [";
    for (std::size_t s = 0; s < m.partition.size(); ++s) out << (s ? ", " : "") << m.partition[s];
    out << "],\n";
  }
  if (!m.routes.empty()) {  // one "first-last" per microbatch (docs/format.md)
    out << "  \"routes\": [";
    for (std::size_t mb = 0; mb < m.routes.size(); ++mb)
      out << (mb ? ", " : "") << '"' << to_string(m.routes[mb]) << '"';
    out << "],\n";
  }
  out << "  \"ranks\": [";
  std::string line;
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    line.clear();
    line += r ? ",\n" : "\n";
    line += "    {\"rank\": ";
    line += std::to_string(plan.rank_ids[r]);
    line += ", \"actions\": [";
    detail::append_cells(line, plan.ranks[r], ", ", '"');  // the grammar never needs escaping
    line += "]}";
    out << line;
  }
  out << (plan.ranks.empty() ? "]\n}\n" : "\n  ]\n}\n");
}

}  // namespace pipeplan
