// write_search_text / write_search_json: what search() chose and why.
#include <nlohmann/json.hpp>

#include "ir/numbers.h"
#include "pipeplan/lower.h"
#include "pipeplan/search.h"

namespace pipeplan {
namespace {

using detail::format_number;
using detail::tidy;

std::string partition_text(const Partition& p) {
  std::string s;
  for (std::size_t i = 0; i < p.size(); ++i) s += (i ? "," : "") + std::to_string(p[i]);
  return s;
}

}  // namespace

void write_search_text(const SearchResult& r, const SearchOptions& o, std::ostream& out) {
  const PlanMeta& m = r.plan.meta;
  out << "search: pp " << o.pp_degree << ", microbatches " << o.num_microbatches << ", "
      << (m.partition.empty() ? 0 : static_cast<int>(m.num_stages())) << " stages; model "
      << to_string(o.transport) << "\n";
  out << "memory budget: " << format_number(r.memory_limit, 4) << " per rank\n";
  out << "transfer cost: " << format_number(r.transfer_time, 4) << " per message";
  if (r.transfer_cost_default)
    out << " (default: " << format_number(kNominalLatency, 2)
        << " x the profile's mean layer F; --comm states it, --comm 0 for free messages)";
  out << "\n";
  out << "chosen: " << r.origin << "\n";
  out << "  mapping " << to_string(m.mapping) << ", v " << m.stages_per_rank << ", partition ["
      << partition_text(m.partition) << "] layers per stage\n";
  out << "  makespan " << format_number(r.makespan, 4) << ", peak memory "
      << format_number(r.peak_memory, 4) << " (per rank:";
  for (double x : r.rank_peak_memory) out << " " << format_number(x, 3);
  out << ")\n";
  if (!r.microbatches.empty()) {
    out << "microbatches (sequences of each, in plan order):";
    for (const auto& mb : r.microbatches) {
      out << " [";
      for (std::size_t k = 0; k < mb.size(); ++k) out << (k ? " " : "") << mb[k];
      out << "]";
    }
    out << "\n";
    if (r.first_fit_makespan)
      out << "first-fit-decreasing packing, best library schedule: makespan "
          << format_number(*r.first_fit_makespan, 4) << "\n";
  } else if (!r.microbatch_order.empty()) {
    out << "microbatch order (input microbatch of each plan microbatch):";
    for (int k : r.microbatch_order) out << " " << k;
    out << "\n";
  }
  out << "lower bound: " << format_number(r.lower_bound, 4) << " (" << r.lower_bound_reason
      << "); gap " << format_number(r.gap() * 100, 2) << "%\n";
  if (r.best_library) {
    const LibraryRun& b = *r.best_library;
    const double gain = b.makespan > 0 ? 1.0 - r.makespan / b.makespan : 0.0;
    out << "best library schedule within the budget: " << b.schedule << " v=" << b.stages_per_rank
        << ", makespan " << format_number(b.makespan, 4) << ", peak memory "
        << format_number(b.peak_memory, 4) << " (search is " << format_number(gain * 100, 2)
        << "% faster)\n";
  } else {
    out << "best library schedule within the budget: none fits\n";
  }
  if (r.best_library_recompute) {
    const LibraryRun& b = *r.best_library_recompute;
    const double gain = b.makespan > 0 ? 1.0 - r.makespan / b.makespan : 0.0;
    out << "best library schedule with full recompute: " << b.schedule << " v=" << b.stages_per_rank
        << ", makespan " << format_number(b.makespan, 4) << ", peak memory "
        << format_number(b.peak_memory, 4) << " (search is " << format_number(gain * 100, 2)
        << "% faster)\n";
  } else if (o.recompute) {
    out << "best library schedule with full recompute: none fits\n";
  }
  if (r.recomputed + r.offloaded > 0)
    out << "memory actions: " << r.recomputed << " (stage, microbatch) recomputed, " << r.offloaded
        << " offloaded\n";
  if (r.exact) {
    const ExactResult& e = *r.exact;
    if (e.complete)
      out << "exact (compute-only model, v <= " << e.max_stages_per_rank << ", " << e.nodes
          << " nodes): optimum " << format_number(e.optimum, 4) << ", search "
          << format_number(e.search_value, 4) << ", " << format_number(e.gap() * 100, 2)
          << "% from optimal";
    else out << "exact: stopped after " << e.nodes << " nodes (no claim of optimality)";
    out << "; returned: the " << (e.returned ? "exact search's" : "heuristic's") << " plan\n";
  }
  out << "candidates simulated: " << r.candidates << (r.time_limited ? " (time limit reached)" : "")
      << "\n";
}

void write_search_json(const SearchResult& r, const SearchOptions& o, std::ostream& out) {
  using Json = nlohmann::ordered_json;
  const PlanMeta& m = r.plan.meta;
  Json doc;
  doc["format"] = "pipeplan.search";
  doc["version"] = 1;
  doc["pp_degree"] = o.pp_degree;
  doc["num_microbatches"] = o.num_microbatches;
  doc["model"] = std::string(to_string(o.transport));
  doc["transfer_time"] = tidy(r.transfer_time);
  doc["transfer_cost"] = r.transfer_cost_default ? "default" : "stated";
  doc["memory_limit"] = tidy(r.memory_limit);
  doc["makespan"] = tidy(r.makespan);
  doc["peak_memory"] = tidy(r.peak_memory);
  doc["lower_bound"] = tidy(r.lower_bound);
  doc["lower_bound_reason"] = r.lower_bound_reason;
  doc["gap"] = tidy(r.gap());
  doc["schedule"] = m.schedule;
  doc["origin"] = r.origin;
  doc["mapping"] = std::string(to_string(m.mapping));
  doc["stages_per_rank"] = m.stages_per_rank;
  doc["partition"] = m.partition;
  Json peaks = Json::array();
  for (double x : r.rank_peak_memory) peaks.push_back(tidy(x));
  doc["rank_peak_memory"] = peaks;
  auto run_json = [](const LibraryRun& b) {
    return Json{{"schedule", b.schedule},
                {"stages_per_rank", b.stages_per_rank},
                {"makespan", tidy(b.makespan)},
                {"peak_memory", tidy(b.peak_memory)},
                {"fits", b.fits},
                {"partition", b.partition}};
  };
  doc["best_library"] = r.best_library ? run_json(*r.best_library) : Json(nullptr);
  Json lib = Json::array();
  for (const LibraryRun& b : r.library) lib.push_back(run_json(b));
  doc["library"] = lib;
  doc["best_library_recompute"] =
      r.best_library_recompute ? run_json(*r.best_library_recompute) : Json(nullptr);
  Json rec = Json::array();
  for (const LibraryRun& b : r.library_recompute) rec.push_back(run_json(b));
  doc["library_recompute"] = rec;
  doc["recomputed"] = r.recomputed;
  doc["offloaded"] = r.offloaded;
  if (r.exact) {
    doc["exact"] = {{"complete", r.exact->complete},
                    {"model", "compute-only"},
                    {"optimum", tidy(r.exact->optimum)},
                    {"search", tidy(r.exact->search_value)},
                    {"gap", tidy(r.exact->gap())},
                    {"nodes", r.exact->nodes},
                    {"max_stages_per_rank", r.exact->max_stages_per_rank},
                    {"winner", r.exact->returned ? "exact" : "heuristic"}};
  } else {
    doc["exact"] = nullptr;
  }
  if (!r.microbatch_order.empty()) {
    doc["lengths"] = o.comm.microbatch_tokens;
    doc["microbatch_order"] = r.microbatch_order;
  }
  if (!r.microbatches.empty()) {
    doc["microbatches"] = r.microbatches;
    doc["first_fit_makespan"] =
        r.first_fit_makespan ? Json(tidy(*r.first_fit_makespan)) : Json(nullptr);
  }
  doc["candidates"] = r.candidates;
  doc["time_limited"] = r.time_limited;
  out << doc.dump(2) << "\n";
}

}  // namespace pipeplan
