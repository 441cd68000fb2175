// calibrate(): per-stage compute durations and the transfer cost of a
// measured run, as the simulator's cost model in milliseconds.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/trace.h"
#include "sim/measured.h"

namespace pipeplan {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const std::size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double hi = v[n / 2];
  if (n % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2));
  return (lo + hi) / 2;
}

// Payloads within this ratio count as one size: no bandwidth can be told
// from latency then.
constexpr double kSizeSpread = 1.5;

}  // namespace

Calibration calibrate(const Trace& trace) {
  const std::vector<std::string> problems = check_trace(trace, 5);
  if (!problems.empty()) {
    std::string list;
    for (const std::string& p : problems) list += "\n  " + p;
    throw InputError("the trace is not consistent with its plan:" + list);
  }
  const Plan& plan = trace.plan;
  Calibration c;
  c.pp_degree = plan.meta.pp_degree;
  c.stages_per_rank = plan.meta.stages_per_rank;
  c.num_microbatches = plan.meta.num_microbatches;
  c.schedule = plan.meta.schedule;
  const int steps = trace.num_steps();
  const int first = steps >= 2 ? 2 : 1;  // the first step pays for warm-up
  c.steps_used = steps - first + 1;

  // samples[stage][type]: F, B, I, W durations.
  std::map<int, std::array<std::vector<double>, 4>> samples, bare;
  std::map<int, std::vector<double>> overhead;
  std::vector<double> step_ms;
  std::vector<std::pair<double, double>> transfers;  // (bytes, ms)
  const detail::PlanLocations where(plan);
  const detail::StepRecords by_step(trace);
  detail::StepView v(plan);
  for (int k = first; k <= steps; ++k) {
    v.assign(by_step.of(k));
    double lo = 1e300, hi = -1e300;
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
      double pending = 0.0;  // host time of the posts since the last compute
      for (std::size_t i = 0; i < plan.ranks[r].size(); ++i) {
        const TraceRecord& rec = v.at(static_cast<int>(r), static_cast<int>(i));
        lo = std::min(lo, rec.start);
        hi = std::max(hi, rec.end);
        const ActionType t = rec.action.type;
        if (is_comm(t)) pending += rec.post;
        if (t <= ActionType::W) {  // F, B, I, W
          const int s = rec.action.stage, k = static_cast<int>(t);
          // The simulator's posts are free and asynchronous; on a CPU rank
          // they hold up the next compute, so that compute carries them.
          samples[s][k].push_back(rec.end - rec.start + pending);
          bare[s][k].push_back(rec.end - rec.start);
          overhead[s].push_back(pending);
          pending = 0.0;
        } else if (is_compute(t)) {
          pending = 0.0;
        }
        if (!is_send(t)) continue;
        const detail::TransferEnds e = where.ends_of_send(rec.action);
        if (e.recv.rank < 0) continue;
        const TraceRecord& recv = v.at(e.recv.rank, e.recv.index);
        // The data can leave once the send is posted and its producer ended
        // (a post may run ahead of an asynchronous compute). When the
        // receiver was already blocked in its wait then, its completion is
        // the arrival of the data.
        double ready = std::max(rec.start, recv.start);
        if (e.producer.rank >= 0)
          ready = std::max(ready, v.at(e.producer.rank, e.producer.index).end);
        if (recv.wait > 0 && ready >= recv.end - recv.wait && recv.end >= ready)
          transfers.emplace_back(static_cast<double>(std::max(rec.bytes, recv.bytes)),
                                 recv.end - ready);
      }
    }
    step_ms.push_back(hi - lo);
  }
  c.measured_step_ms = median(step_ms);

  // Medians per type; a type the run lacks is derived from the others.
  auto medians = [](const std::array<std::vector<double>, 4>& by_type, std::string& derived,
                    std::string& unmeasured) {
    double d[4];
    bool have[4];
    for (int t = 0; t < 4; ++t) {
      have[t] = !by_type[static_cast<std::size_t>(t)].empty();
      d[t] = median(by_type[static_cast<std::size_t>(t)]);
    }
    auto mark = [&](const char* name) {
      derived += (derived.empty() ? "" : ",") + std::string(name);
    };
    // A full backward is an input-gradient plus a weight-gradient pass.
    if (!have[1] && have[2] && have[3]) d[1] = d[2] + d[3], mark("B");
    if (have[1] && !have[2] && !have[3]) d[2] = d[3] = d[1] / 2, mark("I"), mark("W");
    // Neither measured nor derivable: named, never a cost of 0.
    for (int t = 0; t < 4; ++t)
      if (!have[t] && derived.find("FBIW"[t]) == std::string::npos)
        unmeasured += (unmeasured.empty() ? "" : ",") + std::string(1, "FBIW"[t]);
    return StageScale{d[0], d[1], d[2], d[3]};
  };
  for (auto& [stage, by_type] : samples) {
    std::string derived, unmeasured, ignored, ignored_too;
    c.stage_ms[stage] = medians(by_type, derived, unmeasured);
    c.compute_only_ms[stage] = medians(bare[stage], ignored, ignored_too);
    c.host_overhead_ms[stage] = median(overhead[stage]);
    if (!derived.empty()) c.derived[stage] = derived;
    if (!unmeasured.empty()) c.unmeasured[stage] = unmeasured;
    int n = 0;
    for (const auto& v : by_type) n += static_cast<int>(v.size());
    c.samples[stage] = n;
  }
  if (c.stage_ms.empty()) throw InputError("the trace holds no compute action to calibrate from");

  c.transfers_used = static_cast<int>(transfers.size());
  if (!transfers.empty()) {
    double bmin = transfers.front().first, bmax = bmin;
    std::vector<double> bytes, ms;
    for (const auto& [b, t] : transfers) {
      bmin = std::min(bmin, b);
      bmax = std::max(bmax, b);
      bytes.push_back(b);
      ms.push_back(t);
    }
    c.transfer_bytes = median(bytes);
    c.comm_latency_ms = median(ms);
    if (bmin > 0 && bmax / bmin >= kSizeSpread) {
      // Least squares ms = latency + bytes / bandwidth.
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      const double n = static_cast<double>(transfers.size());
      for (const auto& [b, t] : transfers) sx += b, sy += t, sxx += b * b, sxy += b * t;
      const double den = n * sxx - sx * sx;
      if (den > 0) {
        const double slope = (n * sxy - sx * sy) / den;
        const double icpt = (sy - slope * sx) / n;
        if (slope > 0 && icpt >= 0) {
          c.comm_latency_ms = icpt;
          c.comm_bandwidth = 1.0 / slope;
        }
      }
    }
  }
  return c;
}

}  // namespace pipeplan
