// Simulation summaries: a text table for people, JSON for tools.
#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/numbers.h"
#include "pipeplan/emit_sim.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

using detail::format_number;
using detail::tidy;

std::string model_name(const SimOptions& options, const SimResult& result) {
  if (result.compute_only) return "compute-only (values move when produced)";
  return std::string(to_string(options.transport));
}

std::string cost_line(const CostModel& c) {
  std::string s = "F=" + format_number(c.f) + " B=" + format_number(c.b) +
                  " I=" + format_number(c.i) + " W=" + format_number(c.w) +
                  " OVERLAP_F_B=" + (c.overlap ? format_number(*c.overlap) : std::string("F+B"));
  s += "; transfer " + format_number(c.transfer_time()) + " (latency " +
       format_number(c.comm_latency);
  if (c.comm_bandwidth > 0 && c.transfer_bytes > 0)
    s += " + " + format_number(c.transfer_bytes) + " bytes / " + format_number(c.comm_bandwidth);
  return s + ")";
}

// Variable-length microbatches: their tokens and the length the costs are for.
std::string lengths_line(const CostModel& c) {
  const auto [lo, hi] = std::minmax_element(c.microbatch_tokens.begin(), c.microbatch_tokens.end());
  double sum = 0;
  for (double t : c.microbatch_tokens) sum += t;
  std::string s = "lengths: " + std::to_string(c.microbatch_tokens.size()) + " microbatches, " +
                  format_number(*lo) + ".." + format_number(*hi) + " tokens (" +
                  format_number(sum) + " in all); costs stated at " +
                  (c.stated_tokens > 0 ? format_number(c.stated_tokens) + " tokens"
                                       : "the longest, " + format_number(*hi) + " tokens");
  bool quadratic = false;
  for (const auto& [stage, q] : c.stage_quadratic) quadratic |= q.f > 0 || q.b > 0 || q.w > 0;
  return s + (quadratic ? ", with the profile's quadratic part" : ", growing linearly");
}

// The copy stream's costs, for plans with memory actions.
std::string copy_line(const CostModel& c) {
  return "copies: latency " + format_number(c.host_latency) + " + size / " +
         (c.host_bandwidth > 0 ? "host bandwidth " + format_number(c.host_bandwidth)
                               : std::string("infinite host bandwidth"));
}

std::string diagnostic_line(const Diagnostic& d) {
  std::string s = "error[" + d.code + "]";
  if (d.rank >= 0) s += " rank " + std::to_string(d.rank);
  if (d.index >= 0) s += " index " + std::to_string(d.index);
  if (!d.action.empty()) s += " (" + d.action + ")";
  return s + ": " + d.message;
}

}  // namespace

void write_sim_text(const Plan& plan, const SimOptions& options, const SimResult& result,
                    std::ostream& out) {
  const PlanMeta& m = plan.meta;
  out << "schedule " << limits::excerpt(m.schedule) << ": pp " << m.pp_degree << ", microbatches "
      << m.num_microbatches << ", stages per rank " << m.stages_per_rank << "\n";
  out << "model: " << model_name(options, result) << "\n";
  out << "costs: " << cost_line(options.costs) << "\n";
  if (!options.costs.microbatch_tokens.empty()) out << lengths_line(options.costs) << "\n";
  const bool memory_actions = plan.has_memory_actions();
  if (memory_actions) out << copy_line(options.costs) << "\n";
  if (!options.costs.stage_scales.empty()) {
    out << "stage multipliers:";
    for (const auto& [stage, s] : options.costs.stage_scales)
      out << " " << stage << "(F" << format_number(s.f) << " B" << format_number(s.b) << " I"
          << format_number(s.i) << " W" << format_number(s.w) << ")";
    out << "\n";
  }
  if (!result.ok()) {
    out << "simulation failed: " << result.problems.size() << " problem"
        << (result.problems.size() == 1 ? "" : "s") << "\n";
    for (const auto& d : result.problems) out << "  " << diagnostic_line(d) << "\n";
    return;
  }
  std::ostringstream pct;
  pct << std::fixed << std::setprecision(2) << tidy(result.bubble_fraction) * 100.0;
  out << "makespan: " << format_number(result.makespan) << "\n";
  out << "bubble: " << pct.str() << "% (1 - busy / (ranks x makespan))\n";
  // Peak memory differs from the activation count only with a layer profile
  // (or memory actions, or microbatches of different lengths).
  const bool weighted =
      !options.costs.stage_memory.empty() || memory_actions || options.costs.variable_lengths();
  if (weighted && !result.ranks.empty()) {
    const RankStats* top = &result.ranks.front();
    for (const RankStats& r : result.ranks)
      if (r.peak_memory > top->peak_memory) top = &r;
    out << "peak memory: " << format_number(top->peak_memory, 3) << " on rank " << top->rank
        << " (activation units of the profile; a search's default budget is 1f1b's)\n";
  }
  // Right-aligned columns sized to their widest cell.
  std::vector<std::vector<std::string>> rows = {
      {"rank", "busy", "idle", "first", "last", "peak act", "peak (rank units)", "recv bufs"}};
  if (weighted) rows[0].push_back("peak mem");
  if (memory_actions) rows[0].insert(rows[0].end(), {"peak host", "copy busy"});
  for (const RankStats& r : result.ranks) {
    rows.push_back({std::to_string(r.rank), format_number(r.busy), format_number(r.idle),
                    format_number(r.first_start), format_number(r.last_end),
                    std::to_string(r.peak_activations), format_number(r.peak_rank_activations, 3),
                    std::to_string(r.peak_recv_buffers)});
    if (weighted) rows.back().push_back(format_number(r.peak_memory, 3));
    if (memory_actions)
      rows.back().insert(rows.back().end(),
                         {format_number(r.peak_host_memory, 3), format_number(r.copy_busy)});
  }
  std::vector<std::size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c) line += "  ";
      line += std::string(width[c] - row[c].size(), ' ') + row[c];
    }
    out << line << "\n";
  }
}

void write_sim_json(const Plan& plan, const SimOptions& options, const SimResult& result,
                    std::ostream& out) {
  using Json = nlohmann::ordered_json;
  const PlanMeta& m = plan.meta;
  const CostModel& c = options.costs;
  Json doc;
  doc["format"] = "pipeplan.simulation";
  doc["version"] = 1;
  doc["schedule"] = m.schedule;
  doc["pp_degree"] = m.pp_degree;
  doc["num_microbatches"] = m.num_microbatches;
  doc["stages_per_rank"] = m.stages_per_rank;
  if (!m.partition.empty()) doc["partition"] = m.partition;
  doc["model"] = result.compute_only ? "compute-only" : std::string(to_string(options.transport));
  Json costs;
  costs["F"] = c.f;
  costs["B"] = c.b;
  costs["I"] = c.i;
  costs["W"] = c.w;
  costs["OVERLAP_F_B"] = c.overlap ? Json(*c.overlap) : Json(nullptr);
  costs["comm_latency"] = c.comm_latency;
  costs["comm_bandwidth"] = c.comm_bandwidth;
  costs["transfer_bytes"] = c.transfer_bytes;
  costs["transfer_time"] = tidy(c.transfer_time());
  costs["host_bandwidth"] = c.host_bandwidth;
  costs["host_latency"] = c.host_latency;
  Json scales = Json::array();
  for (const auto& [stage, s] : c.stage_scales)
    scales.push_back({{"stage", stage}, {"F", s.f}, {"B", s.b}, {"I", s.i}, {"W", s.w}});
  costs["stage_multipliers"] = scales;
  if (!c.microbatch_tokens.empty()) {
    costs["lengths"] = c.microbatch_tokens;
    costs["stated_length"] = c.stated_tokens > 0 ? Json(c.stated_tokens) : Json(nullptr);
  }
  doc["costs"] = costs;
  doc["ok"] = result.ok();
  if (!result.ok()) {
    Json problems = Json::array();
    for (const auto& d : result.problems)
      problems.push_back({{"code", d.code},
                          {"rank", d.rank},
                          {"index", d.index},
                          {"action", d.action},
                          {"message", d.message}});
    doc["problems"] = problems;
  } else {
    doc["makespan"] = tidy(result.makespan);
    doc["bubble_fraction"] = tidy(result.bubble_fraction);
    double busy = 0, peak_memory = 0, peak_host = 0;
    Json ranks = Json::array();
    for (const RankStats& r : result.ranks) {
      busy += r.busy;
      ranks.push_back({{"rank", r.rank},
                       {"busy", tidy(r.busy)},
                       {"idle", tidy(r.idle)},
                       {"first_start", tidy(r.first_start)},
                       {"last_end", tidy(r.last_end)},
                       {"peak_activations", r.peak_activations},
                       {"peak_rank_activations", tidy(r.peak_rank_activations)},
                       {"peak_recv_buffers", r.peak_recv_buffers},
                       {"peak_memory", tidy(r.peak_memory)},
                       {"peak_host_memory", tidy(r.peak_host_memory)},
                       {"copy_busy", tidy(r.copy_busy)}});
      peak_memory = std::max(peak_memory, r.peak_memory);
      peak_host = std::max(peak_host, r.peak_host_memory);
    }
    doc["peak_memory"] = tidy(peak_memory);
    doc["peak_host_memory"] = tidy(peak_host);
    doc["busy"] = tidy(busy);
    doc["transfers"] = result.transfers.size();
    doc["ranks"] = ranks;
  }
  out << doc.dump(2) << "\n";
}

}  // namespace pipeplan
