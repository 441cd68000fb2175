// write_timeline: an ASCII picture of a plan's compute actions over time.
//
// It times the compute order with unit costs (F=1, B=2, I=1, W=1, an F+B
// group 3; communication free) so that the picture shows the schedule's
// shape without depending on the simulator's cost model: a compute-only run
// on the execution core (run/values.h). Dependencies are those of ir/deps.h;
// an order that cannot run is still drawn: when every rank waits, the core
// asks stalled() and the earliest stuck rank starts as if its inputs had
// arrived (forced). Comms and FSDP pass-through actions are not drawn, but a
// BATCH_P2P group is: a '|' where its rank reaches it (after the compute
// before it), and a list of the groups below the picture.
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "emit/render_util.h"
#include "ir/deps.h"
#include "pipeplan/emit.h"
#include "run/values.h"

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

// The unit-cost run. A value nobody produces is the verifier's business: what
// reads it does not wait for it. A value produced twice counts from its first
// producer to run. One rank of a partial plan has no peers to wait for: its
// actions are laid end to end.
class UnitTimeline : public run::ComputeOnly<UnitTimeline, int> {
 public:
  static constexpr run::Order kOrder = run::Order::Sweep;

  explicit UnitTimeline(const Plan& plan)
      : ComputeOnly(plan.meta), plan_(plan), whole_(plan.is_whole()), ends_(plan.meta) {
    if (whole_)
      for (const auto& list : plan.ranks)
        for (const Action& a : list)
          if (is_compute(a.type))
            deps::for_each_output(a, [&](const deps::Value& v) { exists_.insert(key(v)); });
  }

  /// Each rank's computes in time, and whether some had to be forced.
  std::vector<std::vector<Slot>> draw(bool* forced) {
    slots_.assign(plan_.ranks.size(), {});
    start(plan_.ranks);
    run();
    *forced = forced_;
    return std::move(slots_);
  }

 private:
  friend class run::Core<UnitTimeline>;
  friend class run::ComputeOnly<UnitTimeline, int>;

  int inputs(const Action& a) const {
    int ready = 0;
    if (!whole_) return ready;
    bool missing = false;
    deps::for_each_input(a, ends_, [&](const deps::Value& v, int) {
      const std::uint64_t k = key(v);
      if (!exists_.count(k)) return;
      auto it = finish_.find(k);
      if (it == finish_.end()) missing = true;
      else ready = std::max(ready, it->second);
    });
    return missing && !forcing() ? never() : ready;
  }
  void produce(const Action& a, int end) {
    deps::for_each_output(a, [&](const deps::Value& v) { finish_.emplace(key(v), end); });
  }
  int duration(const Action& a) const { return unit_cost(a); }
  void ran(int r, std::size_t, const Action& a, int start, int end) {
    slots_[static_cast<std::size_t>(r)].push_back({&a, start, end});
  }
  // Every rank waits on another: show the order anyway, starting the
  // earliest stuck rank as if its inputs had arrived.
  int stalled() {
    int pick = -1;
    for (int r = 0; r < num_ranks(); ++r)
      if (pc(r) < plan_.ranks[static_cast<std::size_t>(r)].size() &&
          (pick < 0 || free_at(r) < free_at(pick)))
        pick = r;
    if (pick >= 0) {
      force();
      forced_ = true;
    }
    return pick;
  }

  const Plan& plan_;
  const bool whole_;
  const deps::Ends ends_;  // the microbatches' routes
  std::unordered_set<std::uint64_t> exists_;
  std::unordered_map<std::uint64_t, int> finish_;
  std::vector<std::vector<Slot>> slots_;
  bool forced_ = false;
};

// Where each BATCH_P2P group of a rank sits in the unit-cost run: when the
// compute before it ended (0 before the first).
struct GroupMark {
  int time;
  std::string cell;
};

std::vector<GroupMark> group_marks(const std::vector<Action>& list, const std::vector<Slot>& ran) {
  std::vector<GroupMark> out;
  std::size_t computes = 0;
  for (std::size_t i = 0; i < list.size();) {
    const std::size_t n = cell_size(list, i);
    if (n > 1) {
      GroupMark g{computes > 0 && computes <= ran.size() ? ran[computes - 1].end : 0, {}};
      append_cell(g.cell, &list[i], n);
      out.push_back(std::move(g));
    } else if (is_compute(list[i].type)) {
      ++computes;
    }
    i += n;
  }
  return out;
}

}  // namespace

void write_timeline(const Plan& plan, std::ostream& out) {
  const std::size_t num_ranks = plan.ranks.size();
  // The output cap, before any timing, from two lower bounds of the
  // makespan: the busiest rank, and microbatch 0's chain of computes through
  // every stage and back (each waits for the one before), at 3 columns per
  // time unit at least.
  long long busiest = 0, chain = 0;
  for (const auto& list : plan.ranks) {
    long long busy = 0;
    for (const Action& a : list) {
      if (!is_compute(a.type)) continue;
      busy += unit_cost(a);
      if (a.type != ActionType::W &&
          (a.microbatch == 0 || (a.type == ActionType::OverlapFB && a.sub_microbatch == 0)))
        chain += unit_cost(a);
    }
    busiest = std::max(busiest, busy);
  }
  const char* const kWhat = "the unit-cost timeline (plan -f timeline, show)";
  detail::check_text_size(num_ranks, 3.0 * static_cast<double>(std::max(busiest, chain)), kWhat,
                          true);
  bool forced = false;
  const bool whole = plan.is_whole();
  const std::vector<std::vector<Slot>> slots = UnitTimeline(plan).draw(&forced);

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

  std::vector<std::vector<GroupMark>> groups(num_ranks);
  bool any_group = false;
  for (std::size_t r = 0; r < num_ranks; ++r) {
    groups[r] = group_marks(plan.ranks[r], slots[r]);
    any_group = any_group || !groups[r].empty();
  }

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
    // A group between two computes: on the separator before the time.
    for (const GroupMark& g : groups[r]) {
      const std::size_t c = static_cast<std::size_t>(g.time) * unit;
      const std::size_t at = c > 0 ? c - 1 : 0;
      if (at < row.size() && (row[at] == ' ' || row[at] == '.')) row[at] = '|';
    }
    line += row;
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << '\n';
  }

  out << (whole ? "unit costs F=1 B=2 I=1 W=1, F+B group 3, comms free; makespan "
                : "single rank: actions laid end to end at unit costs; length ")
      << makespan << '\n';
  if (any_group) {
    out << "|: BATCH_P2P group (members posted together, completed together)\n";
    for (std::size_t r = 0; r < num_ranks; ++r)
      for (const GroupMark& g : groups[r])
        out << "  rank " << plan.rank_ids[r] << " at " << g.time << ": " << g.cell << '\n';
  }
  if (forced)
    out << "note: the compute order cannot run as written (ranks wait on each other); "
           "stuck actions were started anyway, see `pipeplan verify`\n";
}

}  // namespace pipeplan
