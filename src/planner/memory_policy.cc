// Memory policies (memory_policy.h): stage sets as users write them, and the
// insertion of RECOMPUTE / OFFLOAD / RELOAD into each rank's order.
#include "pipeplan/memory_policy.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "pipeplan/error.h"
#include "pipeplan/limits.h"
#include "planner/memory_insert.h"

namespace pipeplan {
namespace {

int parse_stage(std::string_view part, std::string_view whole, const std::string& what) {
  int v = -1;
  const char* end = part.data() + part.size();
  const auto [ptr, ec] = std::from_chars(part.data(), end, v);
  if (part.empty() || ec != std::errc() || ptr != end || v < 0)
    throw InputError(what + " '" + limits::excerpt(whole) +
                     "': expected 'all' or stages like 0,2,4-7 (got '" + limits::excerpt(part) +
                     "')");
  return v;
}

// The (stage, microbatch) a forward or a backward of `a` is about; none: -1.
struct Part {
  int stage = -1, mb = -1;
};
Part forward_part(const Action& a) {
  if (a.type == ActionType::F || a.type == ActionType::OverlapFB) return {a.stage, a.microbatch};
  return {};
}
Part backward_part(const Action& a) {
  if (a.type == ActionType::B || a.type == ActionType::I) return {a.stage, a.microbatch};
  if (a.type == ActionType::OverlapFB) return {a.sub_stage, a.sub_microbatch};
  return {};
}

std::uint64_t key(int s, int mb) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(s)) << 32 |
         static_cast<std::uint32_t>(mb);
}

void check_stages(const StageSet& set, int num_stages, const char* what) {
  // Sorted: the first stage the plan lacks, found without a walk over all.
  const auto beyond = std::lower_bound(set.stages.begin(), set.stages.end(), num_stages);
  if (beyond == set.stages.end()) return;
  throw InputError(std::string("the ") + what + " policy names stage " + std::to_string(*beyond) +
                   ", but the plan has " + std::to_string(num_stages) + " stages (0.." +
                   std::to_string(num_stages - 1) + ")");
}

// One rank's inserts. Positions refer to the original list: a RELOAD goes
// before the compute `lead` computes ahead of its backward (never before its
// OFFLOAD, right after its forward), the RECOMPUTE right before the backward.
std::vector<detail::MemoryInsert> policy_inserts(const std::vector<Action>& list,
                                                 const MemoryPolicy& policy) {
  std::vector<detail::MemoryInsert> out;
  std::unordered_map<std::uint64_t, std::size_t> forward_at;
  std::vector<std::size_t> computes;  // indices of the compute actions seen so far
  const auto lead = static_cast<std::size_t>(policy.offload_lead);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Action& a = list[i];
    if (const Part b = backward_part(a); b.stage >= 0) {
      if (policy.offload.contains(b.stage)) {
        const auto f = forward_at.find(key(b.stage, b.mb));
        if (f != forward_at.end()) {
          // The compute `lead` computes before this one (this one when 0).
          const std::size_t at = lead == 0                 ? i
                                 : lead <= computes.size() ? computes[computes.size() - lead]
                                                           : 0;
          const Action reload = make(ActionType::Reload, b.stage, b.mb);
          if (at > f->second) out.push_back({at, false, reload});
          else out.push_back({f->second, true, reload});
        }
      }
      if (policy.recompute.contains(b.stage))
        out.push_back({i, false, make(ActionType::Recompute, b.stage, b.mb)});
    }
    if (const Part f = forward_part(a); f.stage >= 0 && policy.offload.contains(f.stage)) {
      forward_at[key(f.stage, f.mb)] = i;
      out.push_back({i, true, make(ActionType::Offload, f.stage, f.mb)});
    }
    if (is_compute(a.type)) computes.push_back(i);
  }
  return out;
}

// The one order at a position (memory_insert.h): 0 OFFLOAD, 1 RELOAD, 2 RECOMPUTE.
int rank_of(ActionType t) { return t == ActionType::Offload ? 0 : t == ActionType::Reload ? 1 : 2; }

}  // namespace

bool StageSet::contains(int stage) const {
  return all || std::binary_search(stages.begin(), stages.end(), stage);
}

StageSet parse_stage_set(std::string_view text, const std::string& what) {
  StageSet set;
  if (text == "all") {
    set.all = true;
    return set;
  }
  // Ranges first, each checked against the limit as it is read; then sorted
  // and merged, and only the merged ranges expanded: linear in the text (and
  // the stages named), however often a range repeats.
  std::vector<std::pair<int, int>> ranges;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view part = text.substr(start, comma - start);
    const std::size_t dash = part.find('-');
    const int lo = parse_stage(part.substr(0, dash), text, what);
    const int hi =
        dash == std::string_view::npos ? lo : parse_stage(part.substr(dash + 1), text, what);
    if (hi < lo)
      throw InputError(what + " '" + limits::excerpt(text) + "': the range " +
                       limits::excerpt(part) + " runs backwards");
    if (hi >= limits::kMaxStages)
      throw InputError(what + " '" + limits::excerpt(text) + "': stage " + std::to_string(hi) +
                       " is beyond the supported " + std::to_string(limits::kMaxStages) +
                       " stages");
    ranges.emplace_back(lo, hi);
    start = comma + 1;
  }
  std::sort(ranges.begin(), ranges.end());
  int next = 0;  // the first stage not yet in the set
  for (const auto& [lo, hi] : ranges)
    for (int s = std::max(lo, next); s <= hi; ++s) set.stages.push_back(s), next = s + 1;
  return set;
}

std::string to_string(const StageSet& set) {
  if (set.all) return "all";
  std::string out;
  for (std::size_t i = 0; i < set.stages.size();) {
    std::size_t j = i;
    while (j + 1 < set.stages.size() && set.stages[j + 1] == set.stages[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(set.stages[i]);
    if (j > i) out += '-' + std::to_string(set.stages[j]);
    i = j + 1;
  }
  return out;
}

MemoryPolicy memory_policy_from(std::string_view recompute, std::string_view offload,
                                std::optional<int> offload_lead, const std::string& name_prefix) {
  // CLI flags are spelled with '-', Python keywords with '_'.
  const auto name = [&name_prefix](std::string n) {
    if (name_prefix.empty()) std::replace(n.begin(), n.end(), '-', '_');
    return name_prefix + n;
  };
  MemoryPolicy policy;
  if (!recompute.empty()) policy.recompute = parse_stage_set(recompute, name("recompute"));
  if (!offload.empty()) policy.offload = parse_stage_set(offload, name("offload"));
  if (offload_lead && policy.offload.empty())
    throw InputError(name("offload-lead") + " places the RELOADs of " + name("offload") +
                     ": give " + name("offload") + " too");
  if (offload_lead) policy.offload_lead = *offload_lead;
  return policy;
}

void require_backward_for(const MemoryPolicy& policy, bool forward_only) {
  if (forward_only && !policy.empty())
    throw InputError(
        "a forward-only plan keeps no activations for a backward: nothing to recompute or "
        "offload");
}

Plan apply_memory_policy(Plan plan, const MemoryPolicy& policy) {
  if (policy.empty()) return plan;
  if (policy.offload_lead < 0)
    throw InputError("the offload lead must be >= 0 computes, got " +
                     std::to_string(policy.offload_lead));
  require_backward_for(policy, plan.meta.forward_only);
  if (plan.has_memory_actions())
    throw InputError(
        "the plan already holds memory actions; a policy inserts them into a plan "
        "without any");
  check_stages(policy.recompute, plan.meta.num_stages(), "recompute");
  check_stages(policy.offload, plan.meta.num_stages(), "offload");
  for (auto& list : plan.ranks)
    list = detail::with_memory_actions(list, policy_inserts(list, policy));
  return plan;
}

namespace detail {

std::vector<Action> with_memory_actions(const std::vector<Action>& list,
                                        std::vector<MemoryInsert> inserts) {
  if (inserts.empty()) return list;
  // Before action i sorts as 2i, after it as 2i + 1; then by kind.
  const auto slot = [](const MemoryInsert& x) { return 2 * x.index + (x.after ? 1 : 0); };
  std::stable_sort(inserts.begin(), inserts.end(),
                   [&](const MemoryInsert& x, const MemoryInsert& y) {
                     if (slot(x) != slot(y)) return slot(x) < slot(y);
                     return rank_of(x.action.type) < rank_of(y.action.type);
                   });
  std::vector<Action> out;
  out.reserve(list.size() + inserts.size());
  std::size_t k = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    for (; k < inserts.size() && slot(inserts[k]) == 2 * i; ++k) out.push_back(inserts[k].action);
    out.push_back(list[i]);
    for (; k < inserts.size() && slot(inserts[k]) == 2 * i + 1; ++k)
      out.push_back(inserts[k].action);
  }
  return out;
}

}  // namespace detail

}  // namespace pipeplan
