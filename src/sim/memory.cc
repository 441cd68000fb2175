// The simulator's memory actions (docs/memory.md): OFFLOAD and RELOAD on each
// rank's copy stream (the core's copy hook), their checks when a rank first
// reaches them, and device and host memory over time. A plan without memory
// actions never allocates mem_ and keeps simulate.cc's running count.
#include <algorithm>

#include "sim/engine.h"

namespace pipeplan::detail {

// One pass before the run: whether the plan has memory actions, and which
// (stage, microbatch) it recomputes (their F keeps only the input, and an
// OFFLOAD moves that input).
void Engine::find_recomputes() {
  for (const auto& list : plan_.ranks)
    for (const Action& a : list) {
      if (!is_memory(a.type)) continue;
      if (mem_.empty()) mem_.assign(keys_.size(), MemKey{});
      if (a.type == ActionType::Recompute && in_range(a.stage, a.microbatch))
        mem_[key(a.stage, a.microbatch)].recompute = true;
    }
}

// The rules a rank's list order decides (ranks reach their actions in list
// order, so what is recorded for the same (stage, microbatch) is earlier):
// docs/memory.md. The verifier words them with its own codes.
bool Engine::validate_memory(int r, int i, const Action& a) {
  if (plan_.meta.forward_only) {
    bad(r, i, a, "a forward-only plan keeps no activations to offload or recompute");
    return false;
  }
  if (!placed(r, i, a, a.stage, a.microbatch)) return false;
  const std::size_t k = key(a.stage, a.microbatch);
  MemKey& m = mem_[k];
  const KeyState& own = keys_[k];
  const bool offload = a.type == ActionType::Offload, reload = a.type == ActionType::Reload;
  std::int32_t& slot = offload ? m.off_at : reload ? m.rel_at : m.rec_at;
  if (!claim(slot, a.stage, a.microbatch, r, i, a,
             offload  ? "offload"
             : reload ? "reload"
                      : "recompute"))
    return false;
  const std::string sm =
      "stage " + std::to_string(a.stage) + " microbatch " + std::to_string(a.microbatch);
  if (!reload && own.f_at < 0) {
    bad(r, i, a, "comes before the forward of " + sm);
    return false;
  }
  if (reload && m.off_at < 0) {
    bad(r, i, a, "brings back activations of " + sm + " that no earlier OFFLOAD moved to host");
    return false;
  }
  if (own.bi_at >= 0) {
    bad(r, i, a,
        "comes after the backward of " + sm + " (index " + std::to_string(own.bi_at) +
            "), which already used the activations");
    return false;
  }
  if (a.type == ActionType::Recompute && m.off_at >= 0 && m.rel_at < 0) {
    bad(r, i, a, "re-runs from an input of " + sm + " that is on host (no RELOAD before it)");
    return false;
  }
  return true;
}

// A backward reads its activations on the device: an offloaded one needs its
// RELOAD earlier in the list.
bool Engine::backward_reads_device(int r, int i, const Action& a, int stage, int mb) {
  const MemKey& m = mem_[key(stage, mb)];
  if (m.off_at < 0 || m.rel_at >= 0) return true;
  bad(r, i, a,
      "reads the activations of stage " + std::to_string(stage) + " microbatch " +
          std::to_string(mb) + ", which OFFLOAD (index " + std::to_string(m.off_at) +
          ") moved to host and no RELOAD before it brings back");
  return false;
}

// A copy runs on the rank's copy stream, in list order, once the computes
// before it in the list ended (the executor records an event after them)
// and, for an OFFLOAD, once its forward ended; the host only launches it.
run::Step Engine::copy(int r, std::size_t, const Action& a) {
  RankState& st = rank_[static_cast<std::size_t>(r)];
  const std::size_t k = key(a.stage, a.microbatch);
  MemKey& m = mem_[k];
  double start = std::max({st.copy_cursor, st.cursor, st.host});
  if (a.type == ActionType::Offload) start = std::max(start, keys_[k].f_end);
  const double size =
      m.recompute ? costs_.input(a.stage, a.microbatch) : costs_.memory(a.stage, a.microbatch);
  const double end = start + costs_.copy_time(size);
  result_.times[static_cast<std::size_t>(r)].push_back({start, end});
  st.copy_cursor = end;
  st.copy_busy += end - start;
  if (a.type == ActionType::Reload) m.reload_end = end;
  return run::Step::Next;
}

// Device and host memory over the finished timeline, per rank: what each
// action takes or frees, at its start or end, swept in time order (frees
// first at equal times).
void Engine::account_memory() {
  struct Event {
    double t, device, host;
  };
  std::vector<Event> events;
  for (std::size_t r = 0; r < plan_.ranks.size(); ++r) {
    const auto& list = plan_.ranks[r];
    const auto& times = result_.times[r];
    events.clear();
    const auto kept = [&](int s, int mb) {
      return mem_[key(s, mb)].recompute ? costs_.input(s, mb) : costs_.memory(s, mb);
    };
    const auto forward = [&](int s, int mb, const ActionTime& t) {
      if (plan_.meta.forward_only) {
        events.push_back({t.start, costs_.memory(s, mb), 0.0});
        events.push_back({t.end, -costs_.memory(s, mb), 0.0});
      } else {
        events.push_back({t.start, kept(s, mb), 0.0});
      }
    };
    // The backward that frees (s, mb): its input and any recomputed activation.
    const auto release = [&](int s, int mb, double t) {
      const double rebuilt = mem_[key(s, mb)].recompute ? costs_.memory(s, mb) : 0.0;
      events.push_back({t, -(kept(s, mb) + rebuilt), 0.0});
    };
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const ActionTime& t = times[i];
      switch (a.type) {
        case ActionType::F: forward(a.stage, a.microbatch, t); break;
        case ActionType::OverlapFB:
          forward(a.stage, a.microbatch, t);
          release(a.sub_stage, a.sub_microbatch, t.end);
          break;
        case ActionType::B:
        case ActionType::W: release(a.stage, a.microbatch, t.end); break;
        case ActionType::Offload: {
          const double x = kept(a.stage, a.microbatch);
          events.push_back({t.start, 0.0, x});
          events.push_back({t.end, -x, 0.0});
          break;
        }
        case ActionType::Reload: {
          const double x = kept(a.stage, a.microbatch);
          events.push_back({t.start, x, 0.0});
          events.push_back({t.end, 0.0, -x});
          break;
        }
        case ActionType::Recompute:
          events.push_back({t.start, costs_.memory(a.stage, a.microbatch), 0.0});
          break;
        default: break;
      }
    }
    std::stable_sort(events.begin(), events.end(), [](const Event& x, const Event& y) {
      if (x.t != y.t) return x.t < y.t;
      return x.device + x.host < y.device + y.host;  // frees first
    });
    double device = 0.0, host = 0.0;
    RankState& st = rank_[r];
    st.peak_memory = st.peak_host = 0.0;
    for (const Event& e : events) {
      device += e.device;
      host += e.host;
      st.peak_memory = std::max(st.peak_memory, device);
      st.peak_host = std::max(st.peak_host, host);
    }
  }
}

}  // namespace pipeplan::detail
