// Tracer: the observer side (one record per action of every step) and the
// watchdog that warns while a wait for a peer lasts too long.
#include "pipeplan/exec/trace.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "exec/trace_state.h"
#include "pipeplan/exec/log.h"

namespace pipeplan::exec {

// ---- State

long Tracer::State::owner_of_post() const {
  if (!have_plan || current < 0) return -1;
  const auto& list = plan.ranks[0];
  const Action& a = list[static_cast<std::size_t>(current)];
  if (is_comm(a.type)) return current;
  ActionType want = ActionType::RecvF;
  int stage = a.stage, mb = a.microbatch;
  if (a.type == ActionType::B || a.type == ActionType::I) want = ActionType::RecvB;
  else if (a.type != ActionType::F && a.type != ActionType::OverlapFB) return -1;
  auto it = recv_at.find({static_cast<int>(want), stage, mb});
  if (it == recv_at.end() && a.type == ActionType::OverlapFB)
    it = recv_at.find({static_cast<int>(ActionType::RecvB), a.sub_stage, a.sub_microbatch});
  return it == recv_at.end() ? -1 : it->second;
}

void Tracer::State::waited(long owner, int step, double t0, double t1) {
  if (!in_step || step != traced_steps) return;  // a wait of an earlier step or outside one
  if (owner >= 0 && static_cast<std::size_t>(owner) < cur.size()) {
    TraceRecord& r = cur[static_cast<std::size_t>(owner)];
    r.wait += t1 - t0;
    r.end = std::max(r.end, t1);
  }
  if (current >= 0 && static_cast<std::size_t>(current) < cur.size())
    compute_from[static_cast<std::size_t>(current)] =
        std::max(compute_from[static_cast<std::size_t>(current)], t1);
}

std::string Tracer::State::describe(long owner, const std::string& peer) const {
  std::string at;
  if (have_plan && owner >= 0) at = to_string(plan.ranks[0][static_cast<std::size_t>(owner)]);
  else if (have_plan && current >= 0)
    at = to_string(plan.ranks[0][static_cast<std::size_t>(current)]);
  else at = "the end of the step";
  return "at " + at + " for " + peer;
}

void Tracer::State::begin_wait(const std::string& label) {
  if (opt.warn_after.count() <= 0) return;
  std::lock_guard<std::mutex> lock(mu);
  waiting = true;
  wait_since = std::chrono::steady_clock::now();
  wait_label = label;
  warned = 0;
}

void Tracer::State::end_wait() {
  if (opt.warn_after.count() <= 0) return;
  std::lock_guard<std::mutex> lock(mu);
  waiting = false;
}

void Tracer::State::start_watchdog() {
  if (opt.warn_after.count() <= 0 || watchdog.joinable()) return;
  const auto poll =
      std::clamp(opt.warn_after / 10, std::chrono::milliseconds(5), std::chrono::milliseconds(250));
  watchdog = std::thread([this, poll] {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      cv.wait_for(lock, poll);
      if (stop || !waiting) continue;
      const auto waited_for = std::chrono::steady_clock::now() - wait_since;
      if (waited_for < opt.warn_after * (warned + 1)) continue;
      ++warned;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", std::chrono::duration<double>(waited_for).count());
      const std::string msg =
          "rank " + std::to_string(rank) + " waiting " + secs + " s " + wait_label;
      lock.unlock();
      if (opt.warn) opt.warn(msg);
      else log_warn(msg);
      lock.lock();
    }
  });
}

void Tracer::State::stop_watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  if (watchdog.joinable()) watchdog.join();
}

// ---- Tracer as an observer

Tracer::Tracer(TracerOptions options) : state_(std::make_shared<State>(std::move(options))) {}

Tracer::~Tracer() { state_->stop_watchdog(); }

double Tracer::clock_offset_ms() const { return state_->offset_ms; }

std::vector<TraceRecord> Tracer::records() const { return state_->done; }

void Tracer::set_up(const Plan& plan, int rank) {
  State& s = *state_;
  s.rank = rank;
  s.plan.meta = plan.meta;
  s.plan.rank_ids = {rank};
  s.plan.ranks = {plan.ranks.at(static_cast<std::size_t>(rank))};
  s.have_plan = true;
  s.recv_at.clear();
  const auto& list = s.plan.ranks[0];
  for (std::size_t i = 0; i < list.size(); ++i)
    if (is_recv(list[i].type))
      s.recv_at[{static_cast<int>(list[i].type), list[i].stage, list[i].microbatch}] =
          static_cast<long>(i);
  s.whole = plan;
}

void Tracer::on_step_begin(int /*step*/, bool forward_only) {
  State& s = *state_;
  s.current = -1;
  s.step_start_ms = s.now_ms();
  // A forward-only step of a training plan runs the plan's forward
  // projection, whose indices are not the plan's: not recorded.
  s.in_step = s.have_plan && (!forward_only || s.plan.meta.forward_only);
  if (!s.in_step) return;
  if (s.opt.record && s.opt.measure_memory) {
    if (!s.meter)
      s.meter =
          std::make_shared<detail::MemoryMeter>(s.group ? s.group->device() : at::Device(at::kCPU));
    detail::MemoryMeter::install(s.meter);
    s.held_at_start = s.meter->held();
  }
  s.marked.clear();
  if (s.opt.device_clock) s.opt.device_clock->begin_step(s.step_start_ms - s.offset_ms);
  ++s.traced_steps;
  const auto& list = s.plan.ranks[0];
  s.cur.assign(list.size(), TraceRecord{});
  s.compute_from.assign(list.size(), -1e300);
  for (std::size_t i = 0; i < list.size(); ++i) {
    s.cur[i].step = s.traced_steps;
    s.cur[i].rank = s.rank;
    s.cur[i].index = static_cast<int>(i);
    s.cur[i].action = list[i];
  }
}

void Tracer::on_entry(const ActionEvent& e) {
  State& s = *state_;
  s.current = static_cast<long>(e.index);
  if (!s.in_step || e.index >= s.cur.size()) return;
  TraceRecord& r = s.cur[e.index];
  r.start = r.end = State::ms(e.start) + s.offset_ms;
  if (s.meter) s.meter->reset_peak();
  if (s.opt.device_clock && is_compute(e.action.type)) {
    s.opt.device_clock->mark(e.index, false);
    s.marked.push_back(e.index);
  }
}

void Tracer::on_exit(const ActionEvent& e) {
  State& s = *state_;
  s.current = -1;
  if (!s.in_step || e.index >= s.cur.size()) return;
  TraceRecord& r = s.cur[e.index];
  const double end = State::ms(e.end) + s.offset_ms;
  if (s.meter) {
    r.held = s.meter->held() - s.held_at_start;
    r.peak = std::max(r.held, s.meter->peak() - s.held_at_start);
  }
  if (s.opt.device_clock && is_compute(e.action.type)) {
    s.opt.device_clock->mark(e.index, true);
    s.marked.push_back(e.index);
  }
  // The event's own work (ActionEvent::compute(): its time less its waits
  // on peers) is the compute slice, or the post of a SEND/RECV.
  const double work = std::max(0.0, std::chrono::duration<double, std::milli>(e.compute()).count());
  if (is_compute(e.action.type)) {
    // Receives the compute waited for are the data's arrival, not compute:
    // it starts after its waits, and not before the last of them ended.
    r.start = std::min(end, std::max(end - work, s.compute_from[e.index]));
    r.end = end;
  } else {
    // The waits a SEND/RECV saw (a BATCH_P2P group's, for its last member)
    // are charged to the operations' own records (waited()).
    r.post = work;
    r.end = std::max(r.end, r.start + work);
    r.bytes = e.bytes;
  }
}

void Tracer::on_step_end(int step, bool forward_only) {
  State& s = *state_;
  const double took = s.now_ms() - s.step_start_ms;
  if (log_debug_enabled()) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f", took);
    log_debug("rank " + std::to_string(s.rank) + ": step " + std::to_string(step + 1) +
                      (forward_only ? " (forward only)" : "") + " took " + ms + " ms");
  }
  if (s.meter) detail::MemoryMeter::uninstall(s.meter);
  if (!s.in_step) return;
  s.in_step = false;
  if (s.opt.device_clock) {
    // Marks alternate start, end per compute, in program order.
    const std::vector<double> at = s.opt.device_clock->resolve();
    for (std::size_t k = 0; k + 1 < s.marked.size() && k + 1 < at.size(); k += 2) {
      TraceRecord& r = s.cur[s.marked[k]];
      r.start = at[k] + s.offset_ms;
      r.end = std::max(r.start, at[k + 1] + s.offset_ms);
    }
  }
  if (s.opt.record) s.done.insert(s.done.end(), s.cur.begin(), s.cur.end());
}

std::string configure_logging(const std::string& fallback) {
  std::string level = fallback;
  if (const char* env = std::getenv("PIPEPLAN_LOG_LEVEL"); env && *env) level = env;
  return detail::set_log_level(level, fallback);
}

}  // namespace pipeplan::exec
