#include "bench/bench.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "harness.h"
#include "pipeplan/emit.h"
#include "pipeplan/io.h"
#include "pipeplan/lower.h"
#include "pipeplan/planner.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

namespace pipeplan::bench {
namespace {

using Options = BenchOptions;

struct Case {
  std::string schedule;
  int pp = 0, v = 0, m = 0;
};

// One timed pass of one case.
struct Row {
  Case c;
  std::string pass;
  std::size_t items = 0;   // actions the pass consumes or produces
  std::size_t bytes = 0;   // text size for emit/parse passes, else 0
  double seconds = 0.0;    // minimum over the repeats
  std::size_t growth = 0;  // peak RSS growth of one run (0: not measured)
  std::size_t total_actions = 0;
};

// Discards output but counts it: the `plan -o /dev/null` pipeline.
class NullSink : public std::streambuf {
 public:
  std::size_t bytes = 0;

 protected:
  int_type overflow(int_type c) override {
    ++bytes;
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char*, std::streamsize n) override {
    bytes += static_cast<std::size_t>(n);
    return n;
  }
};

std::vector<Case> make_cases(const Options& o) {
  std::vector<std::string> names = o.schedules;
  if (names.empty()) names = {"interleaved-1f1b", "zbv", "dualpipev"};
  std::vector<Case> out;
  for (const auto& n : names) {
    const ScheduleInfo& info = find_schedule(n);
    int v = o.stages_per_rank;
    if (v == 0)
      v = info.mapping == StageMapping::V ? 2 : (info.allowed_stages_per_rank.empty() ? 4 : 1);
    for (int m : o.microbatches) out.push_back({info.name, o.pp, v, m});
  }
  return out;
}

void require(bool ok, const Case& c, const std::string& what) {
  if (ok) return;
  throw std::runtime_error(c.schedule + " p=" + std::to_string(c.pp) + " m=" + std::to_string(c.m) +
                           " v=" + std::to_string(c.v) + ": " + what);
}

// Times every pass of one case; memory is measured in a forked child per pass.
std::vector<Row> run_case(const Case& c, const Options& o) {
  const Problem problem{c.schedule, c.pp, c.m, c.v};
  const ScheduleInfo& info = find_schedule(c.schedule);
  std::vector<Row> rows;
  auto measure = [&](const std::string& pass, std::size_t items, const std::function<void()>& fn) {
    Row r;
    r.c = c;
    r.pass = pass;
    r.items = items;
    r.seconds = min_time_s(o.repeat, o.min_time, fn);
    if (o.memory) r.growth = peak_growth_bytes(fn);
    rows.push_back(r);
    return &rows.back();
  };

  Plan compute = plan_compute(problem);
  Plan full = lower(compute, info.lowering);
  const std::size_t n_compute = compute.num_actions(), n_full = full.num_actions();

  // The `plan -f csv -o /dev/null` work in process, first so its memory
  // figure is not flattered by pages earlier passes left behind.
  measure("plan+lower+verify+csv", n_full, [&] {
    Plan p = pipeplan::plan(problem);
    require(verify(p, {Transport::Rendezvous}).ok(), c, "verify failed");
    NullSink sink;
    std::ostream out(&sink);
    write_csv(p, out);
  });
  measure("plan", n_compute, [&] { Plan p = plan_compute(problem); });
  measure("lower", n_full, [&] { Plan p = lower(compute, info.lowering); });
  // The seed lowering of the same order: what the latency-hiding one costs.
  LowerOptions seed = info.lowering;
  seed.mode = LowerMode::Seed;
  measure("lower --lowering seed", n_full, [&] { Plan p = lower(compute, seed); });
  // One rank's program costs a whole plan (lowering needs every rank's
  // timing), and no more: counted against all actions like `plan`+`lower`.
  measure("plan --rank", n_full, [&] { Plan p = plan_rank(problem, c.pp / 2); });
  // Under serial: the serial-safe lowering (the default of the loop-mapped
  // multi-stage schedules; the seed order has it by itself; zbv's and
  // dualpipev's per-pair orders run under serial too, but the figures have
  // always been this lowering's).
  LowerOptions safe = info.lowering;
  safe.serial_safe = true;
  const Plan serial_safe = info.lowering.mode == LowerMode::Seed ? Plan{} : lower(compute, safe);
  for (Transport t : {Transport::Rendezvous, Transport::Eager, Transport::Serial}) {
    const Plan& p =
        t == Transport::Serial && info.lowering.mode != LowerMode::Seed ? serial_safe : full;
    require(verify(p, {t}).ok(), c, "verify " + std::string(to_string(t)) + " failed");
    measure("verify " + std::string(to_string(t)), n_full, [&] { verify(p, {t}); });
  }
  {
    SimResult sim = simulate(full);
    require(sim.ok(), c, "simulate failed");
    measure("simulate", n_full, [&] { SimResult r = simulate(full); });
  }

  StringSink csv, json;
  auto emit = [&](StringSink& sink, void (*writer)(const Plan&, std::ostream&)) {
    sink.text().clear();
    std::ostream out(&sink);
    writer(full, out);
  };
  emit(csv, write_csv);
  emit(json, write_json);
  // Emitters are timed into a counting sink: the cost of the bytes' home (a
  // file, a string) is not theirs. The texts above feed the parse passes.
  auto emit_null = [&](void (*writer)(const Plan&, std::ostream&)) {
    NullSink sink;
    std::ostream out(&sink);
    writer(full, out);
  };
  measure("write csv", n_full, [&] { emit_null(write_csv); })->bytes = csv.text().size();
  measure("write json", n_full, [&] { emit_null(write_json); })->bytes = json.text().size();
  CsvReadOptions csv_options;
  csv_options.mapping = full.meta.mapping;
  csv_options.num_microbatches = full.meta.num_microbatches;
  csv_options.schedule = full.meta.schedule;
  require(parse_csv_plan(csv.text(), "<bench>", csv_options) == full, c, "CSV round trip differs");
  require(parse_json_plan(json.text(), "<bench>") == full, c, "JSON round trip differs");
  measure("parse csv", n_full, [&] {
    Plan p = parse_csv_plan(csv.text(), "<bench>", csv_options);
  })->bytes = csv.text().size();
  measure("parse json", n_full, [&] { Plan p = parse_json_plan(json.text(), "<bench>"); })->bytes =
      json.text().size();
  for (Row& r : rows) r.total_actions = n_full;
  return rows;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string pad(const std::string& s, std::size_t w, bool left = false) {
  if (s.size() >= w) return s;
  return left ? s + std::string(w - s.size(), ' ') : std::string(w - s.size(), ' ') + s;
}

void print_header(std::ostream& out) {
  out << pad("schedule", 17, true) << pad("m", 5) << pad("actions", 9) << "  "
      << pad("pass", 22, true) << pad("ms", 9) << pad("Mact/s", 8) << pad("MB/s", 7)
      << pad("peak+MB", 9) << pad("B/act", 7) << "\n";
}

void print_rows(const std::vector<Row>& rows, bool csv, std::ostream& out) {
  if (csv) {
    out << "schedule,pp,v,m,actions,pass,items,seconds,items_per_s,bytes,mb_per_s,"
           "peak_growth_bytes,growth_bytes_per_action\n";
    for (const Row& r : rows)
      out << r.c.schedule << ',' << r.c.pp << ',' << r.c.v << ',' << r.c.m << ',' << r.total_actions
          << ',' << r.pass << ',' << r.items << ',' << fixed(r.seconds, 6) << ','
          << fixed(r.items / r.seconds, 0) << ',' << r.bytes << ','
          << fixed(r.bytes / r.seconds / 1e6, 1) << ',' << r.growth << ','
          << fixed(static_cast<double>(r.growth) / r.total_actions, 1) << '\n';
    return;
  }
  const Case* last = nullptr;
  for (const Row& r : rows) {
    const bool first = !last || last->schedule != r.c.schedule || last->m != r.c.m;
    last = &r.c;
    out << pad(first ? r.c.schedule : "", 17, true) << pad(first ? std::to_string(r.c.m) : "", 5)
        << pad(first ? std::to_string(r.total_actions) : "", 9) << "  " << pad(r.pass, 22, true)
        << pad(fixed(r.seconds * 1e3, 2), 9) << pad(fixed(r.items / r.seconds / 1e6, 1), 8)
        << pad(r.bytes ? fixed(r.bytes / r.seconds / 1e6, 0) : "", 7)
        << pad(r.growth ? fixed(r.growth / 1048576.0, 1) : "", 9)
        << pad(r.growth ? fixed(static_cast<double>(r.growth) / r.total_actions, 1) : "", 7)
        << "\n";
  }
}

// time(4m) / time(m) for every pass measured at both sizes; linear passes
// stay near 4 (the target is <= 4.5).
void print_scaling(const std::vector<Row>& rows, std::ostream& out) {
  std::map<std::tuple<std::string, std::string, int>, const Row*> at;
  for (const Row& r : rows) at[{r.c.schedule, r.pass, r.c.m}] = &r;
  out << "\nscaling: time(4m) / time(m), target <= 4.5 (ns/action in brackets)\n";
  double worst = 0.0;
  std::string worst_at;
  for (const Row& r : rows) {
    auto it = at.find({r.c.schedule, r.pass, r.c.m * 4});
    if (it == at.end()) continue;
    const Row& big = *it->second;
    const double ratio = big.seconds / r.seconds;
    if (ratio > worst) {
      worst = ratio;
      worst_at = r.c.schedule + " " + r.pass + " m=" + std::to_string(r.c.m) + "->" +
                 std::to_string(big.c.m);
    }
    out << "  " << pad(r.c.schedule, 17, true) << pad(r.pass, 22, true)
        << " m=" << pad(std::to_string(r.c.m), 4) << "->" << pad(std::to_string(big.c.m), 5, true)
        << pad(fixed(ratio, 2), 6) << "  [" << fixed(r.seconds * 1e9 / r.items, 1) << " -> "
        << fixed(big.seconds * 1e9 / big.items, 1) << "]\n";
  }
  if (!worst_at.empty()) out << "worst ratio " << fixed(worst, 2) << " (" << worst_at << ")\n";
}

}  // namespace

void run_bench(const BenchOptions& o, std::ostream& out) {
  // glibc recycles freed heap pages and moves its mmap threshold as blocks
  // come and go, so a small case would reuse pages a large one pays to
  // fault in. Fixed thresholds give every size fresh pages for every block
  // over 16 KiB, as a new `pipeplan` process gets: per-byte costs that
  // compare across sizes.
  mallopt(M_MMAP_THRESHOLD, 16 * 1024);
  mallopt(M_TRIM_THRESHOLD, 64 * 1024);
  const std::vector<Case> cases = make_cases(o);
  if (!o.csv)
    out << "pipeplan bench: " << machine_description() << "; one thread; minimum of >= " << o.repeat
        << " runs and >= " << o.min_time
        << " s per pass; peak+MB = peak RSS growth of one run of the pass (forked), B/act = "
           "that / actions with comms\n\n";
  if (!o.csv) print_header(out);
  std::vector<Row> all;
  for (const Case& c : cases) {
    std::vector<Row> rows = run_case(c, o);
    if (!o.csv) print_rows(rows, false, out);
    out.flush();
    all.insert(all.end(), rows.begin(), rows.end());
  }
  if (o.csv) {
    print_rows(all, true, out);
    return;
  }
  print_scaling(all, out);
  out << "peak RSS of the benchmark process: " << fixed(peak_rss_bytes() / 1048576.0, 1) << " MB\n";
}

}  // namespace pipeplan::bench
