#include <nlohmann/json.hpp>

#include "pipeplan/emit_diagnostics.h"

namespace pipeplan {

void write_diagnostics_json(const PlanMeta& meta, std::size_t num_actions,
                            const std::vector<ModelResult>& results, std::ostream& out) {
  using nlohmann::ordered_json;
  ordered_json doc;
  doc["format"] = "pipeplan.diagnostics";
  doc["version"] = 1;
  bool ok = true;
  for (const auto& r : results) ok = ok && r.result.ok();
  doc["ok"] = ok;
  doc["plan"] = {{"schedule", meta.schedule},
                 {"pp_degree", meta.pp_degree},
                 {"num_microbatches", meta.num_microbatches},
                 {"stages_per_rank", meta.stages_per_rank},
                 {"stage_to_rank", std::string(to_string(meta.mapping))},
                 {"num_actions", num_actions}};
  ordered_json models = ordered_json::array();
  for (const auto& r : results) {
    ordered_json m;
    m["model"] = std::string(to_string(r.transport));
    if (!r.runtime.empty()) m["runtime"] = r.runtime;
    m["ok"] = r.result.ok();
    ordered_json diags = ordered_json::array();
    for (const auto& d : r.result.diagnostics) {
      ordered_json j;
      j["code"] = d.code;
      j["rank"] = d.rank >= 0 ? ordered_json(d.rank) : ordered_json(nullptr);
      j["index"] = d.index >= 0 ? ordered_json(d.index) : ordered_json(nullptr);
      j["action"] = d.action.empty() ? ordered_json(nullptr) : ordered_json(d.action);
      j["message"] = d.message;
      diags.push_back(std::move(j));
    }
    m["diagnostics"] = std::move(diags);
    models.push_back(std::move(m));
  }
  doc["models"] = std::move(models);
  out << doc.dump(2) << "\n";
}

}  // namespace pipeplan
