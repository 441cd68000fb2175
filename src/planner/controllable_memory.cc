// The V-shaped schedules of Qi et al., "Pipeline Parallelism with
// Controllable Memory" (2024): V-Half and V-Min (v = 2, F/I/W), built the
// way sail-sg/zero-bubble-pipeline-parallelism builds them (zbv_greedy.py).
//
// Rank r holds stage r (chunk 0, down the V) and stage 2p-1-r (chunk 1, back
// up). Each rank has four kinds of critical work, in the generator's order:
//   0: F of chunk 0, 1: F of chunk 1, 2: I of chunk 1, 3: I of chunk 0,
// plus weight gradients W (kind 4 when merged; 4 = chunk 1's and 5 = chunk
// 0's when split). Time is counted in unit slots, one action each.
//
// Construction, in phases:
//  1. Stable pattern: microbatch j of kind k runs at slot offset(r, k) + 6j.
//     The offsets place each microbatch's four critical actions so that a
//     rank holds about p/2 (V-Half) or p/3 (V-Min) microbatches' worth of
//     1F1B's activation; one building block repeats every 6 slots.
//  2. W filling: W's go into the free slots after their I, oldest first.
//  3. Squeeze, twice (with W placed, then with W implied by free slots): in
//     the warmup (first pass only) and the cooldown, each action moves to the
//     earliest free slot after its dependencies that keeps the rank's peak
//     activation within the pattern's; then every action starts as early as
//     its dependencies and its rank allow (unit costs).
//  4. W filling again, chunk 1's W before chunk 0's; the slots give the order.
// Peak activation per rank, in 1F1B microbatches at F = B = W: about p/2
// (V-Half) and p/3 (V-Min), against 1F1B's p (tests/v_shape_test.cc).
#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <vector>

#include "planner/families.h"

namespace pipeplan::detail {
namespace {

constexpr int kCritical = 4;  // kinds 0..3: F0, F1, I1, I0
constexpr int kPeriod = 6;    // slots per microbatch in the stable pattern

/// times[kind][mb]: the slot of each action of one rank.
using Times = std::vector<std::vector<int>>;
/// One Times per rank.
using Grid = std::vector<Times>;

using Offsets = std::array<int, kCritical>;

// The stable patterns: slot of microbatch 0 of each critical kind on rank r.
Offsets v_half_offsets(int p, int r) {
  const int gap = p % 2 == 0 ? 3 : 0;
  return {2 * r, 3 * p - r - 2, 3 * p + gap + 2 * r - 1, 6 * p + gap - r - 2};
}

Offsets v_min_offsets(int p, int r) {
  const int gap = p % 3 == 0 ? 2 : 0;
  return {r, 2 * p - r - 1, 2 * p + gap + r, 4 * p + gap - r - 1};
}

Grid stable_pattern(Offsets (*offsets)(int, int), int p, int m) {
  Grid g(static_cast<std::size_t>(p), Times(kCritical));
  for (int r = 0; r < p; ++r) {
    const Offsets o = offsets(p, r);
    for (int k = 0; k < kCritical; ++k)
      for (int j = 0; j < m; ++j) g[r][k].push_back(o[k] + kPeriod * j);
  }
  return g;
}

int last_slot(const Times& t, int kinds) {
  int last = -1;
  for (int k = 0; k < kinds; ++k)
    if (!t[k].empty()) last = std::max(last, t[k].back());
  return last;
}

/// Keeps the critical kinds and fills W into the free slots: after slot
/// `last` of the critical work, the rest in a row. `split`: one W list per
/// chunk (chunk 1's, kind 4, taken first), else one W list (kind 4).
Times place_weights(Times t, bool split) {
  t.resize(kCritical);
  const int last = last_slot(t, kCritical);
  std::vector<int> at(static_cast<std::size_t>(last + 1), -1);
  for (int k = 0; k < kCritical; ++k)
    for (int s : t[k]) at[s] = k;
  t.resize(split ? 6 : 5);
  std::array<int, 2> pending{0, 0};
  auto take = [&](int slot) {
    for (int w = 0; w < 2; ++w)
      if (pending[w] > 0) {
        --pending[w];
        t[4 + w].push_back(slot);
        return;
      }
  };
  for (int s = 0; s <= last; ++s) {
    if (at[s] == 2 || at[s] == 3) ++pending[split ? at[s] - 2 : 0];
    if (at[s] < 0) take(s);
  }
  for (int s = last + 1; pending[0] + pending[1] > 0; ++s) take(s);
  return t;
}

struct Event {
  int slot, rank, kind, mb;
  bool operator<(const Event& o) const {
    return std::tie(slot, rank, kind, mb) < std::tie(o.slot, o.rank, o.kind, o.mb);
  }
};

/// Every action of the grid in slot order (ties: rank, then kind).
std::vector<Event> events_of(const Grid& g) {
  std::vector<Event> out;
  for (int r = 0; r < static_cast<int>(g.size()); ++r)
    for (int k = 0; k < static_cast<int>(g[r].size()); ++k)
      for (int j = 0; j < static_cast<int>(g[r][k].size()); ++j)
        out.push_back({g[r][k][j], r, k, j});
  std::sort(out.begin(), out.end());
  return out;
}

/// The slot after which action (rank, kind, mb) may run: its producer on
/// the neighbouring rank, its predecessor kind here, its previous
/// microbatch. `at(rank, kind, mb)` gives a slot or an end time.
template <typename At>
int dependencies(const Grid& g, int rank, int kind, int mb, At at) {
  const int p = static_cast<int>(g.size());
  int dep = -1;
  if ((kind == 0 || kind == 2) && rank > 0) dep = std::max(dep, at(rank - 1, kind, mb));
  if ((kind == 1 || kind == 3) && rank + 1 < p) dep = std::max(dep, at(rank + 1, kind, mb));
  if (kind > 0 && kind < kCritical) dep = std::max(dep, at(rank, kind - 1, mb));
  if (mb > 0) dep = std::max(dep, at(rank, kind, mb - 1));
  return dep;
}

/// Every action starting as early as its dependencies and its rank's
/// previous action allow, at unit cost, in the given slot order.
Grid squeeze(const Grid& g) {
  Grid end = g;
  std::vector<int> rank_free(g.size(), 0);
  auto at = [&](int r, int k, int j) { return end[r][k][j]; };
  for (const Event& e : events_of(g)) {
    const int start = std::max(dependencies(g, e.rank, e.kind, e.mb, at), rank_free[e.rank]);
    end[e.rank][e.kind][e.mb] = start + 1;
    rank_free[e.rank] = start + 1;
  }
  for (auto& t : end)
    for (auto& list : t)
      for (int& x : list) --x;
  return end;
}

/// One rank's live activation (in chunk forwards) after each slot. With W
/// placed, a W frees one; otherwise a free slot runs a pending W.
std::vector<int> activation(const Times& t, bool weights_placed) {
  const int kinds = static_cast<int>(t.size());
  const int last = last_slot(t, kinds);
  std::vector<int> at(static_cast<std::size_t>(last + 1), -1);
  for (int k = 0; k < kinds; ++k)
    for (int s : t[k]) at[s] = k;
  std::vector<int> live(at.size());
  int cur = 0, pending = 0;
  for (std::size_t s = 0; s < at.size(); ++s) {
    const int k = at[s];
    if (k == 0 || k == 1) ++cur;
    if (k == 2 || k == 3) ++pending;
    if (k >= kCritical) --cur;
    if (k < 0 && !weights_placed && pending > 0) --pending, --cur;
    live[s] = cur;
  }
  return live;
}

int peak(const Times& t, bool weights_placed) {
  const std::vector<int> live = activation(t, weights_placed);
  return std::max(0, live.empty() ? 0 : *std::max_element(live.begin(), live.end()));
}

/// The earliest free slot in [from, to) at which rank `t`'s action (kind,
/// mb) keeps its peak within `cap`; `to` (where it is) when none does.
/// `busy` marks the slots of the actions already placed.
int earliest_within(Times& t, int kind, int mb, int from, int to, const std::vector<bool>& busy,
                    int cap, bool weights_placed) {
  const int was = t[kind][mb];
  for (int s = from; s < to; ++s) {
    if (busy[s]) continue;
    t[kind][mb] = s;
    if (peak(t, weights_placed) <= cap) return s;
  }
  t[kind][mb] = was;
  return to;
}

/// The mb-th backward (I of either chunk) of a rank, in slot order.
int nth_backward(const Times& t, int mb) {
  std::vector<int> b = t[2];
  b.insert(b.end(), t[3].begin(), t[3].end());
  std::nth_element(b.begin(), b.begin() + mb, b.end());
  return b[mb];
}

/// One squeeze pass (zbv_greedy's reorder): returns the critical kinds at
/// their new slots. With `weights_placed`, W's are placed first and the
/// warmup moves too; otherwise only the cooldown does.
Grid reorder(Grid g, int m, bool weights_placed) {
  if (weights_placed)
    for (auto& t : g) t = place_weights(t, false);
  int cap = 0;
  int slots = 0;
  for (const auto& t : g) {
    cap = std::max(cap, peak(t, weights_placed));
    slots = std::max(slots, last_slot(t, static_cast<int>(t.size())) + 1);
  }
  std::vector<std::vector<bool>> busy(g.size(), std::vector<bool>(static_cast<std::size_t>(slots)));
  auto slot_of = [&](int r, int k, int j) { return g[r][k][j]; };
  enum { kWarmup, kSteady, kCooldown } phase = kWarmup;
  for (const Event& e : events_of(g)) {
    // The warmup ends with rank 0's first I of chunk 0; the cooldown starts
    // after the first last-microbatch F of chunk 0.
    if (e.kind == 3 && e.rank == 0 && phase == kWarmup) phase = kSteady;
    const bool moves = phase == kCooldown || (phase == kWarmup && weights_placed);
    if (phase == kSteady && e.kind == 0 && e.mb == m - 1) phase = kCooldown;
    if (moves) {
      Times& t = g[e.rank];
      int dep = dependencies(g, e.rank, e.kind, e.mb, slot_of);
      if (e.kind == kCritical) dep = std::max(dep, nth_backward(t, e.mb));
      t[e.kind][e.mb] =
          earliest_within(t, e.kind, e.mb, dep + 1, e.slot, busy[e.rank], cap, weights_placed);
    }
    busy[e.rank][g[e.rank][e.kind][e.mb]] = true;
  }
  if (!weights_placed)
    for (auto& t : g) t = place_weights(t, false);
  Grid out = squeeze(g);
  for (auto& t : out) t.resize(kCritical);
  return out;
}

/// The compute order of one rank, from the slots of its actions.
std::vector<Action> order_of(const Times& t, int p, int rank) {
  const int down = rank, up = 2 * p - 1 - rank;
  // Kind -> (type, stage): F0 F1 I1 I0 W1 W0.
  const std::array<std::pair<ActionType, int>, 6> what = {{{ActionType::F, down},
                                                           {ActionType::F, up},
                                                           {ActionType::I, up},
                                                           {ActionType::I, down},
                                                           {ActionType::W, up},
                                                           {ActionType::W, down}}};
  std::vector<std::tuple<int, int, int>> slots;  // slot, kind, mb
  for (int k = 0; k < static_cast<int>(t.size()); ++k)
    for (int j = 0; j < static_cast<int>(t[k].size()); ++j) slots.emplace_back(t[k][j], k, j);
  std::sort(slots.begin(), slots.end());
  std::vector<Action> out;
  out.reserve(slots.size());
  for (const auto& [slot, k, j] : slots) {
    (void)slot;
    out.push_back(make(what[k].first, what[k].second, j));
  }
  return out;
}

// Every rank's squeezed grid, built once per (schedule, p, m) and thread:
// the planner asks for one rank at a time, and the construction is global.
const Grid& squeezed(Offsets (*offsets)(int, int), int p, int m) {
  struct Memo {
    Offsets (*offsets)(int, int) = nullptr;
    int p = 0, m = 0;
    Grid grid;
  };
  thread_local Memo memo;
  if (memo.offsets != offsets || memo.p != p || memo.m != m) {
    Grid g = stable_pattern(offsets, p, m);
    g = reorder(g, m, true);
    memo.grid = reorder(g, m, false);
    memo.offsets = offsets, memo.p = p, memo.m = m;
  }
  return memo.grid;
}

std::vector<Action> plan_controllable(Offsets (*offsets)(int, int), const PlanMeta& meta,
                                      int rank) {
  const int p = meta.pp_degree, m = meta.num_microbatches;
  const Grid& g = squeezed(offsets, p, m);
  return order_of(place_weights(g[static_cast<std::size_t>(rank)], true), p, rank);
}

void require_v(const PlanMeta& meta, const std::string& name) {
  require(
      meta.stages_per_rank == 2, name,
      "needs exactly 2 stages per rank (V mapping), got " + std::to_string(meta.stages_per_rank),
      "pass {v} 2");
}

}  // namespace

void check_v_half(const PlanMeta& meta) { require_v(meta, "v-half"); }

std::vector<Action> plan_v_half(const PlanMeta& meta, int rank) {
  return plan_controllable(v_half_offsets, meta, rank);
}

void check_v_min(const PlanMeta& meta) { require_v(meta, "v-min"); }

std::vector<Action> plan_v_min(const PlanMeta& meta, int rank) {
  return plan_controllable(v_min_offsets, meta, rank);
}

}  // namespace pipeplan::detail
