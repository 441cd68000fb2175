// write_timeline: an ASCII picture of a plan's compute actions over time.
//
// It times the compute order with unit costs (F=1, B=2, I=1, W=1, an F+B
// group 3; communication free) so that the picture shows the schedule's
// shape without depending on the simulator's cost model. Dependencies are
// those of ir/deps.h; an order that cannot run is still drawn (forced), which
// is why this walks its own loop instead of lower/timing's. Comms and FSDP
// pass-through actions are not drawn.
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "emit/render_util.h"
#include "ir/deps.h"
#include "pipeplan/emit.h"

namespace pipeplan {
namespace {

enum Kind : std::uint64_t { kForward = 0, kGrad = 1 };

std::uint64_t key(Kind k, int stage, int mb) {
  return (static_cast<std::uint64_t>(k) << 62) |
         (static_cast<std::uint64_t>(static_cast<std::uint32_t>(stage) & 0x7fffffffu) << 31) |
         (static_cast<std::uint32_t>(mb) & 0x7fffffffu);
}

int unit_cost(const Action& a) {
  switch (a.type) {
    case ActionType::B: return 2;
    case ActionType::OverlapFB: return 3;
    default: return 1;
  }
}

std::uint64_t key(const deps::Value& v) {
  return key(v.kind == deps::Kind::Forward ? kForward : kGrad, v.stage, v.microbatch);
}

// What an action produces (for the dependencies of others).
void produced(const Action& a, std::vector<std::uint64_t>& out) {
  out.clear();
  deps::for_each_output(a, [&](const deps::Value& v) { out.push_back(key(v)); });
}

// What an action waits for (ir/deps.h, docs/semantics.md).
void needed(const Action& a, int num_stages, std::vector<std::uint64_t>& out) {
  out.clear();
  deps::for_each_input(a, num_stages, [&](const deps::Value& v, int) { out.push_back(key(v)); });
}

std::string label(const Action& a, bool with_stage) {
  auto one = [&](ActionType t, int s, int m) {
    return (with_stage ? std::to_string(s) : std::string()) + std::string(to_string(t)) +
           std::to_string(m);
  };
  if (a.type == ActionType::OverlapFB)
    return one(ActionType::F, a.stage, a.microbatch) + (with_stage ? "+" : "") +
           one(ActionType::B, a.sub_stage, a.sub_microbatch);
  return one(a.type, a.stage, a.microbatch);
}

struct Slot {
  const Action* action;
  int start;
  int end;
};

}  // namespace

void write_timeline(const Plan& plan, std::ostream& out) {
  const std::size_t num_ranks = plan.ranks.size();
  std::vector<std::vector<const Action*>> work(num_ranks);
  std::size_t total = 0;
  long long busiest = 0;  // a rank's compute time: the makespan is no shorter
  for (std::size_t r = 0; r < num_ranks; ++r) {
    long long busy = 0;
    for (const auto& a : plan.ranks[r])
      if (is_compute(a.type)) {
        work[r].push_back(&a);
        busy += unit_cost(a);
        ++total;
      }
    busiest = std::max(busiest, busy);
  }
  // The output cap, before any timing, from two lower bounds of the
  // makespan: the busiest rank, and microbatch 0's chain of computes through
  // every stage and back (each waits for the one before), at 3 columns per
  // time unit at least.
  long long chain = 0;
  for (const auto& list : work)
    for (const Action* a : list)
      if (a->microbatch == 0 || (a->type == ActionType::OverlapFB && a->sub_microbatch == 0))
        chain += a->type == ActionType::W ? 0 : unit_cost(*a);
  const char* const kWhat = "the unit-cost timeline (plan -f timeline, show)";
  detail::check_text_size(num_ranks, 3.0 * static_cast<double>(std::max(busiest, chain)), kWhat,
                          true);

  std::vector<std::vector<Slot>> slots(num_ranks);
  std::vector<int> clock(num_ranks, 0);
  bool forced = false;
  const bool whole = plan.is_whole();
  if (!whole) {
    // One rank alone has no peers to wait for: lay its actions end to end.
    for (std::size_t r = 0; r < num_ranks; ++r)
      for (const Action* a : work[r]) {
        slots[r].push_back({a, clock[r], clock[r] + unit_cost(*a)});
        clock[r] = slots[r].back().end;
      }
  } else {
    std::unordered_set<std::uint64_t> exists;
    std::unordered_map<std::uint64_t, int> finish;
    std::vector<std::uint64_t> keys;
    for (const auto& list : work)
      for (const Action* a : list) {
        produced(*a, keys);
        exists.insert(keys.begin(), keys.end());
      }
    std::vector<std::size_t> next(num_ranks, 0);
    const int num_stages = plan.meta.num_stages();
    // Schedules rank r's next action if its inputs are done (or `force`).
    auto try_run = [&](std::size_t r, bool force) {
      const Action* a = work[r][next[r]];
      int start = clock[r];
      needed(*a, num_stages, keys);
      for (std::uint64_t k : keys) {
        if (!exists.count(k)) continue;  // a missing producer is the verifier's business
        auto it = finish.find(k);
        if (it == finish.end()) {
          if (!force) return false;
          continue;
        }
        start = std::max(start, it->second);
      }
      const int end = start + unit_cost(*a);
      slots[r].push_back({a, start, end});
      clock[r] = end;
      produced(*a, keys);
      for (std::uint64_t k : keys) finish.emplace(k, end);
      ++next[r];
      return true;
    };
    std::size_t done = 0;
    while (done < total) {
      bool progress = false;
      for (std::size_t r = 0; r < num_ranks; ++r)
        while (next[r] < work[r].size() && try_run(r, false)) {
          ++done;
          progress = true;
        }
      if (progress || done == total) continue;
      // Every rank waits on another: show the order anyway, starting the
      // earliest stuck rank as if its inputs had arrived.
      std::size_t pick = num_ranks;
      for (std::size_t r = 0; r < num_ranks; ++r)
        if (next[r] < work[r].size() && (pick == num_ranks || clock[r] < clock[pick])) pick = r;
      try_run(pick, true);
      ++done;
      forced = true;
    }
  }

  const bool with_stage = plan.meta.stages_per_rank > 1;
  int makespan = 0;
  std::size_t unit = 3;  // characters per time unit: a label plus a separator
  for (const auto& row : slots)
    for (const Slot& s : row) {
      makespan = std::max(makespan, s.end);
      const std::size_t need = label(*s.action, with_stage).size() + 1;
      const std::size_t span = static_cast<std::size_t>(s.end - s.start);
      unit = std::max(unit, (need + span - 1) / span);
    }

  int widest_id = 0;
  for (int id : plan.rank_ids) widest_id = std::max(widest_id, id);
  const std::size_t prefix = 5 + std::to_string(widest_id).size() + 1;  // "rank N "
  const std::size_t width = static_cast<std::size_t>(makespan) * unit;
  detail::check_text_size(num_ranks, static_cast<double>(prefix + width), kWhat);

  // Time ticks every 5 units.
  std::string header(prefix + width + 8, ' ');
  std::size_t free_from = 0;
  for (int t = 0; t <= makespan; t += 5) {
    const std::string tick = std::to_string(t);
    const std::size_t at = prefix + static_cast<std::size_t>(t) * unit;
    if (at < free_from) continue;
    header.replace(at, tick.size(), tick);
    free_from = at + tick.size() + 1;
  }
  header.erase(header.find_last_not_of(' ') + 1);
  out << header << '\n';

  for (std::size_t r = 0; r < num_ranks; ++r) {
    std::string id = std::to_string(plan.rank_ids[r]);
    std::string line = "rank " + std::string(prefix - 6 - id.size(), ' ') + id + ' ';
    std::string row(width, ' ');
    for (std::size_t c = 0; c < width; c += unit) row[c] = '.';
    for (const Slot& s : slots[r]) {
      const std::size_t from = static_cast<std::size_t>(s.start) * unit;
      const std::size_t to = static_cast<std::size_t>(s.end) * unit;
      std::string text = label(*s.action, with_stage);
      for (std::size_t c = from; c < to; ++c) {
        const std::size_t k = c - from;
        row[c] = k < text.size() ? text[k] : (c + 1 < to ? '-' : ' ');
      }
    }
    line += row;
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << '\n';
  }

  out << (whole ? "unit costs F=1 B=2 I=1 W=1, F+B group 3, comms free; makespan "
                : "single rank: actions laid end to end at unit costs; length ")
      << makespan << '\n';
  if (forced)
    out << "note: the compute order cannot run as written (ranks wait on each other); "
           "stuck actions were started anyway, see `pipeplan verify`\n";
}

}  // namespace pipeplan
