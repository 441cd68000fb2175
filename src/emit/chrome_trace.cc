// Chrome trace (Trace Event Format) of a simulated plan, for Perfetto and
// chrome://tracing. Written by hand, one event per line, so a million-action
// plan streams out without building a JSON tree in memory.
#include <algorithm>
#include <string>
#include <vector>

#include "emit/render_util.h"
#include "ir/numbers.h"
#include "pipeplan/render.h"

namespace pipeplan {
namespace {

using detail::format_number;

// One time unit (a cost unit, or a measured millisecond) is shown as one
// millisecond; trace timestamps are in us.
constexpr double kMicrosPerUnit = 1000.0;

std::string ts(double t) { return format_number(t * kMicrosPerUnit, 3); }

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

void write_chrome_trace(const Plan& plan, const std::vector<Timeline>& steps,
                        const ChromeTraceInfo& info, std::ostream& out) {
  for (const Timeline& t : steps) detail::require_timeline(plan, t);
  const PlanMeta& m = plan.meta;
  out << "{\"traceEvents\":[\n";
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":"
      << json_string(info.label + " " + m.schedule + " (pp " + std::to_string(m.pp_degree) +
                     ", microbatches " + std::to_string(m.num_microbatches) + ", stages per rank " +
                     std::to_string(m.stages_per_rank) + ")")
      << "}}";
  // A plan with OFFLOAD/RELOAD gets a track per rank for its copy stream
  // (tid pp + r), sorted under the rank's own.
  const bool copies = detail::has_copies(plan);
  auto track = [&](int tid, const std::string& name, int sort) {
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" << tid
        << ",\"args\":{\"name\":\"" << name << "\"}}";
    out << ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":" << tid
        << ",\"args\":{\"sort_index\":" << sort << "}}";
  };
  for (int r = 0; r < m.pp_degree; ++r) {
    track(r, "rank " + std::to_string(r), copies ? 2 * r : r);
    if (copies) track(m.pp_degree + r, "rank " + std::to_string(r) + " copy", 2 * r + 1);
  }
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const Timeline& result = steps[k];
    for (std::size_t rr = 0; rr < plan.ranks.size(); ++rr) {
      const int r = plan.rank_ids[rr];
      const auto& list = plan.ranks[rr];
      const auto& times = result.times[rr];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        if (!is_compute(a.type) && !is_copy(a.type)) continue;
        const int tid = is_copy(a.type) ? m.pp_degree + r : r;
        out << ",\n{\"name\":\"" << to_string(a) << "\",\"cat\":\"" << to_string(a.type)
            << "\",\"ph\":\"X\",\"pid\":0,\"tid\":" << tid << ",\"ts\":" << ts(times[i].start)
            << ",\"dur\":" << ts(times[i].end - times[i].start) << ",\"args\":{\"step\":" << k + 1
            << ",\"stage\":" << a.stage << ",\"microbatch\":" << a.microbatch;
        if (a.type == ActionType::OverlapFB)
          out << ",\"backward_stage\":" << a.sub_stage
              << ",\"backward_microbatch\":" << a.sub_microbatch;
        out << ",\"index\":" << i << "}}";
      }
      // A BATCH_P2P group: one slice from its first member's posting to its
      // last completion.
      for (const detail::GroupSpan& g : detail::group_spans(list, times))
        out << ",\n{\"name\":" << json_string(g.label)
            << ",\"cat\":\"BATCH_P2P\",\"ph\":\"X\",\"pid\":0,\"tid\":" << r
            << ",\"ts\":" << ts(g.start) << ",\"dur\":" << ts(g.end - g.start)
            << ",\"args\":{\"step\":" << k + 1 << ",\"members\":" << g.n << ",\"index\":" << g.first
            << "}}";
    }
  }
  // Flows bind to the slice enclosing their timestamp, so each end sits in
  // the middle of the producing and of the consuming compute.
  std::size_t id = 0;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const Timeline& result = steps[k];
    for (const Transfer& tr : result.transfers) {
      if (tr.producer < 0 || tr.consumer < 0) continue;
      const ActionTime& p =
          result
              .times[static_cast<std::size_t>(tr.src_rank)][static_cast<std::size_t>(tr.producer)];
      const ActionTime& c =
          result
              .times[static_cast<std::size_t>(tr.dst_rank)][static_cast<std::size_t>(tr.consumer)];
      const std::string name = to_string(plan.ranks[static_cast<std::size_t>(tr.src_rank)]
                                                   [static_cast<std::size_t>(tr.src_index)]);
      ++id;
      out << ",\n{\"name\":\"" << name << "\",\"cat\":\"p2p\",\"ph\":\"s\",\"id\":" << id
          << ",\"pid\":0,\"tid\":" << tr.src_rank << ",\"ts\":" << ts((p.start + p.end) / 2)
          << ",\"args\":{\"step\":" << k + 1 << ",\"transfer_start\":" << ts(tr.start)
          << ",\"transfer_end\":" << ts(tr.end) << "}}";
      out << ",\n{\"name\":\"" << name
          << "\",\"cat\":\"p2p\",\"ph\":\"f\",\"bp\":\"e\",\"id\":" << id
          << ",\"pid\":0,\"tid\":" << tr.dst_rank << ",\"ts\":" << ts((c.start + c.end) / 2) << "}";
    }
  }
  double makespan = 0.0, bubble = 0.0;
  for (const Timeline& t : steps) makespan = std::max(makespan, t.makespan);
  if (!steps.empty()) bubble = steps.front().bubble_fraction;
  out << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"format\":\"pipeplan.chrome-trace\","
         "\"version\":1,\"schedule\":"
      << json_string(m.schedule) << ",\"time_unit\":" << json_string(info.time_unit)
      << ",\"steps\":" << steps.size() << ",\"makespan\":" << format_number(makespan)
      << ",\"bubble_fraction\":" << format_number(bubble) << "}";
  if (!info.embedded.empty()) out << ",\n\"pipeplan\":" << info.embedded;
  out << "}\n";
}

void write_chrome_trace(const Plan& plan, const Timeline& timeline, std::ostream& out) {
  write_chrome_trace(plan, std::vector<Timeline>{timeline}, ChromeTraceInfo{}, out);
}

void write_chrome_trace(const Plan& plan, const SimResult& result, std::ostream& out) {
  detail::require_rendered(plan, result);
  if (std::string why = picture_problem(plan); !why.empty()) throw InputError(why);
  write_chrome_trace(plan, static_cast<const Timeline&>(result), out);
}

}  // namespace pipeplan
