// Side-by-side comparison of schedules: the two report formats.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "ir/numbers.h"
#include "pipeplan/emit_sim.h"

namespace pipeplan {
namespace {

using detail::format_number;
using detail::percent;
using detail::tidy;

std::string costs_text(const SimOptions& o) {
  const CostModel& c = o.costs;
  std::string s = "F=" + format_number(c.f) + " B=" + format_number(c.b) +
                  " I=" + format_number(c.i) + " W=" + format_number(c.w);
  if (c.overlap) s += " OVERLAP_F_B=" + format_number(*c.overlap);
  s += " per rank share (a stage costs 1/v of it), transfer " + format_number(c.transfer_time()) +
       ", " + std::string(to_string(o.transport)) + " model";
  return s;
}

}  // namespace

void write_compare_text(int pp_degree, int num_microbatches, const SimOptions& options,
                        const std::vector<ComparisonRow>& rows, std::ostream& out) {
  // With a layer profile: peak memory in its unit, before the activation counts.
  bool weighted = false;
  for (const ComparisonRow& r : rows) weighted = weighted || !r.partition.empty();
  out << "pp " << pp_degree << ", microbatches " << num_microbatches << "; costs ";
  if (weighted)
    out << "from the layer profile (a stage costs the sum of its layers), transfer "
        << format_number(options.costs.transfer_time()) << ", " << to_string(options.transport)
        << " model\n";
  else out << costs_text(options) << "\n";
  std::vector<std::vector<std::string>> table = {
      {"schedule", "v", "makespan", "bubble", "peak act", "peak act per rank"}};
  if (weighted) table[0].insert(table[0].begin() + 4, "peak mem");
  for (const ComparisonRow& r : rows) {
    if (!r.skipped.empty()) continue;
    if (!r.problems.empty()) {
      table.push_back({r.schedule, std::to_string(r.stages_per_rank), "failed", "-", "-",
                       r.problems.front().code});
      if (weighted) table.back().insert(table.back().begin() + 4, "-");
      continue;
    }
    std::string per_rank;
    for (const RankStats& s : r.ranks)
      per_rank += (per_rank.empty() ? "" : " ") + format_number(s.peak_rank_activations, 2);
    table.push_back({r.schedule, std::to_string(r.stages_per_rank), format_number(r.makespan, 4),
                     percent(r.bubble_fraction), format_number(r.peak_rank_activations(), 2),
                     per_rank});
    if (weighted) table.back().insert(table.back().begin() + 4, format_number(r.peak_memory(), 3));
  }
  std::vector<std::size_t> width(table[0].size(), 0);
  for (const auto& row : table)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : table) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      // Names and the last column left-aligned, numbers right-aligned.
      const std::string fill(width[c] - row[c].size(), ' ');
      if (c) line += "  ";
      line += (c == 0 || c + 1 == row.size()) ? row[c] + (c + 1 == row.size() ? "" : fill)
                                              : fill + row[c];
    }
    out << line << "\n";
  }
  if (weighted)
    out << "peak mem: most activation memory alive on a rank, in the layer profile's unit\n";
  out << "peak act: most live (stage, microbatch) activations on a rank, in whole-rank units\n";
  for (const ComparisonRow& r : rows)
    if (!r.skipped.empty()) out << "skipped " << r.schedule << ": " << r.skipped << "\n";
  for (const ComparisonRow& r : rows)
    if (r.skipped.empty() && !r.problems.empty())
      out << "failed " << r.schedule << ": " << r.problems.front().message << "\n";
}

void write_compare_json(int pp_degree, int num_microbatches, const SimOptions& options,
                        const std::vector<ComparisonRow>& rows, std::ostream& out) {
  using Json = nlohmann::ordered_json;
  const CostModel& c = options.costs;
  Json doc;
  doc["format"] = "pipeplan.compare";
  doc["version"] = 1;
  doc["pp_degree"] = pp_degree;
  doc["num_microbatches"] = num_microbatches;
  doc["model"] = std::string(to_string(options.transport));
  doc["costs"] = {{"F", c.f},
                  {"B", c.b},
                  {"I", c.i},
                  {"W", c.w},
                  {"OVERLAP_F_B", c.overlap ? Json(*c.overlap) : Json(nullptr)},
                  {"transfer_time", tidy(c.transfer_time())},
                  {"per", "rank share; each of a rank's v stages costs 1/v"}};
  for (const ComparisonRow& r : rows)
    if (!r.partition.empty())
      doc["costs"]["per"] = "layer profile: a stage costs the sum of its layers";
  Json results = Json::array(), skipped = Json::array();
  for (const ComparisonRow& r : rows) {
    if (!r.skipped.empty()) {
      skipped.push_back({{"schedule", r.schedule}, {"reason", r.skipped}});
      continue;
    }
    Json row;
    row["schedule"] = r.schedule;
    row["stages_per_rank"] = r.stages_per_rank;
    if (!r.partition.empty()) row["partition"] = r.partition;
    row["ok"] = r.problems.empty();
    if (!r.problems.empty()) {
      row["problem"] = r.problems.front().message;
    } else {
      row["makespan"] = tidy(r.makespan);
      row["bubble_fraction"] = tidy(r.bubble_fraction);
      row["peak_memory"] = tidy(r.peak_memory());
      row["peak_rank_activations"] = tidy(r.peak_rank_activations());
      Json peaks = Json::array(), rank_peaks = Json::array(), memory = Json::array();
      for (const RankStats& s : r.ranks) {
        peaks.push_back(s.peak_activations);
        rank_peaks.push_back(tidy(s.peak_rank_activations));
        memory.push_back(tidy(s.peak_memory));
      }
      row["peak_memory_per_rank"] = memory;
      row["peak_activations_per_rank"] = peaks;
      row["peak_rank_activations_per_rank"] = rank_peaks;
    }
    results.push_back(row);
  }
  doc["results"] = results;
  doc["skipped"] = skipped;
  out << doc.dump(2) << "\n";
}

}  // namespace pipeplan
