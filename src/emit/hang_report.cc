// The report of `pipeplan diagnose`: text (one block per rank, then the
// chain and the summary) and JSON (the same facts, format
// "pipeplan.diagnosis" version 1).
#include <nlohmann/json.hpp>

#include <ostream>

#include "pipeplan/diagnose.h"

namespace pipeplan {
namespace {

const char* status_name(RankDiagnosis::Status s) {
  switch (s) {
    case RankDiagnosis::Status::Finished: return "finished";
    case RankDiagnosis::Status::Waiting: return "waiting";
    case RankDiagnosis::Status::Stopped: return "stopped";
    case RankDiagnosis::Status::NoRecord: return "no-record";
  }
  return "?";
}

std::string step_text(const std::optional<StepAction>& a) {
  if (!a) return "none";
  return to_string(a->action) + " (step " + std::to_string(a->step) + ", index " +
         std::to_string(a->index) + ")";
}

nlohmann::ordered_json step_json(const std::optional<StepAction>& a) {
  if (!a) return nullptr;
  return {{"step", a->step}, {"index", a->index}, {"action", to_string(a->action)}};
}

}  // namespace

void write_hang_report_text(const HangReport& r, std::ostream& out) {
  out << "hang replay of " << r.ranks.size() << " rank(s) from "
      << (r.kind == "trace" ? "a pipeplan trace" : "Flight Recorder dumps")
      << " (observed: " << r.observed << ")\n";
  for (const RankDiagnosis& d : r.ranks) {
    out << "rank " << d.rank << ": " << status_name(d.status);
    if (!d.record.empty()) out << " (" << d.record << ")";
    out << "\n";
    if (d.status == RankDiagnosis::Status::NoRecord) continue;
    out << "  last completed:  " << step_text(d.last_completed) << "\n";
    out << "  first unmatched: " << step_text(d.first_unmatched) << "\n";
    out << "  " << d.why << "\n";
  }
  for (const std::string& n : r.notes) out << "note: " << n << "\n";
  out << r.summary << "\n";
}

void write_hang_report_json(const HangReport& r, std::ostream& out) {
  using nlohmann::ordered_json;
  ordered_json doc;
  doc["format"] = "pipeplan.diagnosis";
  doc["version"] = 1;
  doc["records"] = r.kind;
  doc["observed"] = r.observed;
  doc["completed"] = r.completed;
  ordered_json ranks = ordered_json::array();
  for (const RankDiagnosis& d : r.ranks) {
    ordered_json j;
    j["rank"] = d.rank;
    j["status"] = status_name(d.status);
    j["record"] = d.record;
    j["steps_done"] = d.steps_done;
    j["last_completed"] = step_json(d.last_completed);
    j["first_unmatched"] = step_json(d.first_unmatched);
    j["waits_for"] = d.waits_for ? ordered_json(*d.waits_for) : ordered_json(nullptr);
    j["why"] = d.why;
    ranks.push_back(std::move(j));
  }
  doc["ranks"] = std::move(ranks);
  doc["chain"] = r.chain;
  doc["cycle"] =
      r.cycle ? ordered_json(std::vector<int>(
                    r.chain.begin() + static_cast<std::ptrdiff_t>(r.cycle_start), r.chain.end()))
              : ordered_json::array();
  doc["notes"] = r.notes;
  doc["summary"] = r.summary;
  out << doc.dump(2) << "\n";
}

}  // namespace pipeplan
