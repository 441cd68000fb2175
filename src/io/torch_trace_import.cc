// import_torch_traces: per-rank torch.profiler traces of torch's schedule
// runtime as one measured Trace (the record table calibrate() reads).
//
// Each rank's "PP:<action>" spans are its actions in program order. GPU
// work is attributed to the span its launch happened in (any thread of the
// rank's process: the autograd engine launches the backward's kernels from
// its own thread while the main thread sits in the span); a kernel finds
// its launch by args.correlation, or by the ac2g flow whose ends sit at the
// launch's and the kernel's timestamps. Linear in the events after sorting.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/io.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One action span of one rank, with what was attributed to it.
struct Span {
  Action action;
  double start = 0, end = 0;                   // host span, ms on the common clock
  double dev_start = kInf, dev_end = -kInf;    // compute kernels (non-NCCL)
  double comm_start = kInf, comm_end = -kInf;  // NCCL kernels or host P2P ops
  std::int64_t bytes = -1;
  int kernels = 0;
};

// A rank's spans, step by step.
struct RankSteps {
  std::vector<std::vector<Span>> steps;
  long long kernels = 0;
  bool profiler_steps = false;
};

std::uint64_t time_key(std::uint64_t pid, std::uint64_t tid, double ts) {
  std::uint64_t bits = 0;
  static_assert(sizeof bits == sizeof ts);
  std::memcpy(&bits, &ts, sizeof bits);
  std::uint64_t h = pid * 0x9E3779B97F4A7C15ULL;
  h ^= tid + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2);
  h ^= bits + 0x94D049BB133111EBULL + (h << 6) + (h >> 2);
  return h;
}

// Index of the span containing time t, among spans sorted by start (-1: none).
template <typename Get>
long find_containing(std::size_t n, double t, const Get& start_end) {
  std::size_t lo = 0, hi = n;
  while (lo < hi) {  // first span starting after t
    const std::size_t mid = (lo + hi) / 2;
    if (start_end(mid).first <= t) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return -1;
  const auto [s, e] = start_end(lo - 1);
  return t >= s && t <= e ? static_cast<long>(lo - 1) : -1;
}

// The spans of one file, kernels and host P2P ops attributed, in time order.
std::vector<Span> spans_of(const TorchRankTrace& file, double offset_ms, long long& linked,
                           std::vector<std::pair<double, double>>& profiler_steps) {
  auto ms = [offset_ms](double us) { return offset_ms + us / 1000.0; };
  std::vector<Span> spans;
  std::unordered_map<std::uint64_t, std::int64_t> flow_start, flow_end;  // (pid,tid,ts) -> id
  for (const TorchEvent& e : file.events) {
    if (e.kind == TorchEvent::Kind::Action) {
      // torch 2.15's runtime also spans its waits (PP:0WAIT_SEND_F3,
      // PP:1WAIT_REDUCE_GRAD): host bookkeeping, no action of the plan.
      if (e.name.find("WAIT_SEND_") != std::string::npos ||
          e.name.find("WAIT_REDUCE_GRAD") != std::string::npos)
        continue;
      const auto a = parse_action(e.name);
      if (!a)
        throw InputError(file.source + ": span 'PP:" + limits::excerpt(e.name) +
                         "' does not name an action (torch grammar, e.g. PP:2F0)");
      Span s;
      s.action = *a;
      s.start = ms(e.ts);
      s.end = ms(e.ts + e.dur);
      spans.push_back(s);
    } else if (e.kind == TorchEvent::Kind::ProfilerStep) {
      profiler_steps.emplace_back(ms(e.ts), ms(e.ts + e.dur));
    } else if (e.kind == TorchEvent::Kind::FlowStart) {
      flow_start.emplace(time_key(e.pid, e.tid, e.ts), e.correlation);
    } else if (e.kind == TorchEvent::Kind::FlowEnd) {
      flow_end.emplace(time_key(e.pid, e.tid, e.ts), e.correlation);
    }
  }
  std::stable_sort(spans.begin(), spans.end(),
                   [](const Span& a, const Span& b) { return a.start < b.start; });
  const auto bounds = [&spans](std::size_t i) {
    return std::make_pair(spans[i].start, spans[i].end);
  };
  // Launches: correlation -> the span they happened in.
  std::unordered_map<std::int64_t, std::size_t> launch_span;
  for (const TorchEvent& e : file.events) {
    if (e.kind == TorchEvent::Kind::CommSize) {
      const long k = find_containing(spans.size(), ms(e.ts), bounds);
      if (k >= 0)
        spans[static_cast<std::size_t>(k)].bytes =
            std::max(spans[static_cast<std::size_t>(k)].bytes, e.bytes);
      continue;
    }
    if (e.kind == TorchEvent::Kind::HostComm) {
      const long k = find_containing(spans.size(), ms(e.ts), bounds);
      if (k < 0) continue;
      Span& s = spans[static_cast<std::size_t>(k)];
      s.comm_start = std::min(s.comm_start, ms(e.ts));
      s.comm_end = std::max(s.comm_end, ms(e.ts + e.dur));
      s.bytes = std::max(s.bytes, e.bytes);
      continue;
    }
    if (e.kind != TorchEvent::Kind::Launch) continue;
    std::int64_t corr = e.correlation;
    if (corr < 0)
      if (auto it = flow_start.find(time_key(e.pid, e.tid, e.ts)); it != flow_start.end())
        corr = it->second;
    if (corr < 0) continue;
    const long k = find_containing(spans.size(), ms(e.ts), bounds);
    if (k >= 0) launch_span.emplace(corr, static_cast<std::size_t>(k));
  }
  for (const TorchEvent& e : file.events) {
    if (e.kind != TorchEvent::Kind::Device) continue;
    std::int64_t corr = e.correlation;
    if (corr < 0)
      if (auto it = flow_end.find(time_key(e.pid, e.tid, e.ts)); it != flow_end.end())
        corr = it->second;
    const auto it = launch_span.find(corr);
    if (corr < 0 || it == launch_span.end()) continue;
    Span& s = spans[it->second];
    ++s.kernels;
    ++linked;
    if (e.nccl) {
      s.comm_start = std::min(s.comm_start, ms(e.ts));
      s.comm_end = std::max(s.comm_end, ms(e.ts + e.dur));
      s.bytes = std::max(s.bytes, e.bytes);
    } else {
      s.dev_start = std::min(s.dev_start, ms(e.ts));
      s.dev_end = std::max(s.dev_end, ms(e.ts + e.dur));
    }
  }
  return spans;
}

std::string key_of(const Action& a) { return to_string(a); }

// Cuts one file's spans into steps: at ProfilerStep#N spans when there are
// any (spans outside them dropped), else where an action repeats.
void cut_steps(std::vector<Span> spans, std::vector<std::pair<double, double>> marks,
               RankSteps& out) {
  if (!marks.empty()) {
    out.profiler_steps = true;
    std::sort(marks.begin(), marks.end());
    std::vector<std::vector<Span>> by(marks.size());
    const auto bounds = [&marks](std::size_t i) { return marks[i]; };
    for (Span& s : spans) {
      const long k = find_containing(marks.size(), s.start, bounds);
      if (k >= 0) by[static_cast<std::size_t>(k)].push_back(std::move(s));
    }
    for (auto& step : by)
      if (!step.empty()) out.steps.push_back(std::move(step));
    return;
  }
  std::unordered_set<std::string> seen;
  std::vector<Span> step;
  for (Span& s : spans) {
    if (!seen.insert(key_of(s.action)).second) {
      out.steps.push_back(std::move(step));
      step.clear();
      seen.clear();
      seen.insert(key_of(s.action));
    }
    step.push_back(std::move(s));
  }
  if (!step.empty()) out.steps.push_back(std::move(step));
}

// Every rank's steps, files of one rank in time order.
std::vector<RankSteps> ranks_of(const std::vector<TorchRankTrace>& files, TorchImportReport& rep) {
  int max_rank = -1;
  std::int64_t base = std::numeric_limits<std::int64_t>::max();
  for (const TorchRankTrace& f : files) {
    if (f.rank < 0)
      throw InputError(f.source +
                       ": cannot tell the rank (no distributedInfo.rank; name the file "
                       "rank<N>_trace.json)");
    max_rank = std::max(max_rank, f.rank);
    base = std::min(base, f.base_time_ns);
  }
  if (files.empty()) throw InputError("no torch trace given");
  if (max_rank >= limits::kMaxRanks)
    throw InputError("rank " + std::to_string(max_rank) + " is more than the supported " +
                     std::to_string(limits::kMaxRanks) + " ranks");
  std::vector<std::vector<const TorchRankTrace*>> by_rank(static_cast<std::size_t>(max_rank) + 1);
  for (const TorchRankTrace& f : files) by_rank[static_cast<std::size_t>(f.rank)].push_back(&f);
  std::vector<RankSteps> out(by_rank.size());
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank[r].empty())
      throw InputError("no trace of rank " + std::to_string(r) + " (ranks 0.." +
                       std::to_string(max_rank) + " need one each)");
    std::vector<std::pair<double, std::vector<Span>>> windows;
    std::vector<std::vector<std::pair<double, double>>> marks;
    for (const TorchRankTrace* f : by_rank[r]) {
      // One clock: baseTimeNanoseconds + ts (differences of int64 first).
      const double offset = static_cast<double>(f->base_time_ns - base) / 1e6;
      std::vector<std::pair<double, double>> m;
      std::vector<Span> spans = spans_of(*f, offset, rep.kernels_linked, m);
      if (spans.empty())
        throw InputError(f->source +
                         ": no 'PP:<action>' span (was the schedule run by torch's "
                         "_PipelineScheduleRuntime under torch.profiler?)");
      const double first = spans.front().start;
      windows.emplace_back(first, std::move(spans));
      marks.push_back(std::move(m));
    }
    std::vector<std::size_t> order(windows.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return windows[a].first < windows[b].first; });
    for (std::size_t k : order)
      cut_steps(std::move(windows[k].second), std::move(marks[k]), out[r]);
    rep.used_profiler_steps = rep.used_profiler_steps || out[r].profiler_steps;
  }
  return out;
}

std::string at(int rank, int step, std::size_t index) {
  return "rank " + std::to_string(rank) + " step " + std::to_string(step) + " index " +
         std::to_string(index);
}

// The plan the steps follow: given, or rank programs of step 1.
Plan plan_of(const std::vector<RankSteps>& ranks, const TorchImportOptions& o) {
  if (o.plan) return *o.plan;
  std::vector<std::vector<std::optional<std::string>>> rows;
  for (const RankSteps& r : ranks) {
    rows.emplace_back();
    for (const Span& s : r.steps.front()) rows.back().push_back(to_string(s.action));
  }
  return parse_action_table(rows, "torch trace", o.csv);
}

void check_steps(const std::vector<RankSteps>& ranks, const Plan& plan) {
  if (!plan.is_whole() || plan.ranks.size() != ranks.size())
    throw InputError("the plan has " + std::to_string(plan.meta.pp_degree) + " ranks, the traces " +
                     std::to_string(ranks.size()));
  const std::size_t steps = ranks.front().steps.size();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].steps.size() != steps)
      throw InputError("rank " + std::to_string(r) + " holds " +
                       std::to_string(ranks[r].steps.size()) + " steps, rank 0 " +
                       std::to_string(steps));
    const auto& program = plan.ranks[r];
    for (std::size_t k = 0; k < steps; ++k) {
      const auto& step = ranks[r].steps[k];
      for (std::size_t i = 0; i < std::max(step.size(), program.size()); ++i) {
        const std::string have = i < step.size() ? to_string(step[i].action) : "nothing";
        const std::string want = i < program.size() ? to_string(program[i]) : "nothing";
        if (have != want)
          throw InputError(at(static_cast<int>(r), static_cast<int>(k) + 1, i) +
                           ": the trace has " + have + ", the plan " + want);
      }
    }
  }
}

// The records of one step: device times where kernels were linked, host
// spans otherwise (a host-timed compute from when its input arrived).
void add_records(const std::vector<RankSteps>& ranks, const Plan& plan, int step, Trace& t,
                 TorchImportReport& rep) {
  const auto k = static_cast<std::size_t>(step - 1);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto& spans = ranks[r].steps[k];
    // Host completion of each RECV, by (type, stage, microbatch).
    std::map<std::pair<int, std::int64_t>, double> arrived;
    auto recv_key = [&](ActionType type, int stage, int mb) {
      return std::make_pair(static_cast<int>(type),
                            static_cast<std::int64_t>(stage) * limits::kMaxMicrobatches + mb);
    };
    for (const Span& s : spans)
      if (is_recv(s.action.type) && s.comm_end > -kInf)
        arrived[recv_key(s.action.type, s.action.stage, s.action.microbatch)] = s.comm_end;
    for (std::size_t i = 0; i < spans.size(); ++i) {
      const Span& s = spans[i];
      TraceRecord rec;
      rec.step = step;
      rec.rank = static_cast<int>(r);
      rec.index = static_cast<int>(i);
      rec.action = plan.ranks[r][i];
      ++rep.actions;
      const ActionType type = s.action.type;
      if (is_compute(type) && s.dev_end > -kInf) {
        rec.start = s.dev_start, rec.end = s.dev_end;
        ++rep.device_timed;
      } else if (is_compute(type)) {
        rec.start = s.start, rec.end = s.end;
        const ActionType in = type == ActionType::F ? ActionType::RecvF : ActionType::RecvB;
        if (type == ActionType::F || type == ActionType::B || type == ActionType::I)
          if (auto it = arrived.find(recv_key(in, s.action.stage, s.action.microbatch));
              it != arrived.end())
            rec.start = std::min(rec.end, std::max(rec.start, it->second));
      } else if (is_comm(type)) {
        rec.start = s.start;
        rec.end = std::max(s.end, s.comm_end);
        rec.bytes = std::max<std::int64_t>(0, s.bytes);
        const bool device = s.kernels > 0;
        if (device) ++rep.device_timed;
        // How long the receiver waited for the data: the device from its
        // NCCL kernel's start; a host from when it reached the consumer.
        if (is_recv(type) && s.comm_end > -kInf) {
          double waiting_from = s.comm_start;
          if (!device)
            for (std::size_t j = i + 1; j < spans.size(); ++j)
              if (is_compute(spans[j].action.type)) {
                waiting_from = spans[j].start;
                break;
              }
          rec.wait = std::max(0.0, s.comm_end - waiting_from);
        }
        rec.post = device ? 0.0 : s.end - s.start;  // a host rank posts on its compute thread
      } else {
        rec.start = s.start, rec.end = s.end;
      }
      t.records.push_back(rec);
    }
  }
}

}  // namespace

Trace import_torch_traces(const std::vector<TorchRankTrace>& files, const TorchImportOptions& o,
                          TorchImportReport* report) {
  TorchImportReport rep;
  const std::vector<RankSteps> ranks = ranks_of(files, rep);
  Trace t;
  t.plan = plan_of(ranks, o);
  check_steps(ranks, t.plan);
  t.source = "torch.profiler traces of " + std::to_string(ranks.size()) + " rank(s)";
  rep.ranks = static_cast<int>(ranks.size());
  rep.steps = static_cast<int>(ranks.front().steps.size());
  for (int k = 1; k <= rep.steps; ++k) add_records(ranks, t.plan, k, t, rep);
  // Times from 0 at the first record, so they stay small and exact.
  double origin = kInf;
  for (const TraceRecord& r : t.records) origin = std::min(origin, r.start);
  for (TraceRecord& r : t.records) r.start -= origin, r.end -= origin;
  if (report) *report = rep;
  return t;
}

}  // namespace pipeplan
