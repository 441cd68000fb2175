// pipeplan IR: actions, stage mappings and plans. Plain values only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipeplan {

/// What one action does; spelled as in torch.distributed.pipelining.
enum class ActionType : std::uint8_t {
  F,           ///< forward
  B,           ///< full backward (input + weight gradient)
  I,           ///< input-gradient backward (zero-bubble split)
  W,           ///< weight-gradient backward; needs its I
  SendF,       ///< send stage's forward output to stage+1
  RecvF,       ///< receive stage's forward input from stage-1
  SendB,       ///< send stage's input gradient to stage-1
  RecvB,       ///< receive stage's output gradient from stage+1
  OverlapFB,   ///< F(stage, mb) overlapped with B(sub_stage, sub_mb)
  Unshard,     ///< FSDP pass-through (no microbatch), kept verbatim
  Reshard,     ///< FSDP pass-through
  ReduceGrad,  ///< FSDP pass-through
  Offload,     ///< move the activations (stage, mb) keeps for its backward to host memory
  Reload,      ///< bring them back to the device (after its OFFLOAD, before the backward)
  Recompute,   ///< re-run the forward of (stage, mb) from its kept input, before the backward
};

/// Torch spelling of a type ("F", "SEND_F", "OVERLAP_F_B", ...).
std::string_view to_string(ActionType t);
/// Parses a torch type name; nullopt when unknown.
std::optional<ActionType> parse_action_type(std::string_view s);

// Inline: every pass asks these once or more per action.
/// F, B, I, W, OverlapFB, RECOMPUTE: what runs on a rank's compute stream
inline bool is_compute(ActionType t) {
  return t <= ActionType::W || t == ActionType::OverlapFB || t == ActionType::Recompute;
}
/// SEND_F / SEND_B
inline bool is_send(ActionType t) { return t == ActionType::SendF || t == ActionType::SendB; }
/// RECV_F / RECV_B
inline bool is_recv(ActionType t) { return t == ActionType::RecvF || t == ActionType::RecvB; }
/// SEND_* / RECV_*
inline bool is_comm(ActionType t) { return t >= ActionType::SendF && t <= ActionType::RecvB; }
/// UNSHARD / RESHARD / REDUCE_GRAD
inline bool is_passthrough(ActionType t) {
  return t >= ActionType::Unshard && t <= ActionType::ReduceGrad;
}
/// OFFLOAD / RELOAD: copies on a rank's copy stream (docs/memory.md)
inline bool is_copy(ActionType t) { return t == ActionType::Offload || t == ActionType::Reload; }
/// OFFLOAD / RELOAD / RECOMPUTE: the memory actions
inline bool is_memory(ActionType t) {
  return t >= ActionType::Offload && t <= ActionType::Recompute;
}

/// One action; `microbatch` is -1 for pass-through types. For OverlapFB the
/// forward is (stage, microbatch) and the backward (sub_stage, sub_microbatch).
///
/// A batched P2P group, `(A;B;...)BATCH_P2P` (SEND/RECV posted together as
/// one `batch_isend_irecv` and completed together), is a run of ordinary
/// SEND/RECV actions in the rank's list, every member but the last marked
/// `batch_next`; counts, pairs and diagnostics by (rank, index) see each
/// member (docs/format.md). A group of one, `(A)BATCH_P2P`, is an explicit
/// wait: the SEND/RECV is committed alone (one `batch_isend_irecv` of one
/// operation, on the group's communicator) and waited where it stands, as
/// DualPipe's commit-and-wait and Megatron's one-operation calls are; it is
/// one action marked `waited` (a plain cell is posted and left, a receive
/// waited for by the compute that reads it).
struct Action {
  ActionType type = ActionType::F;
  /// A SEND/RECV posted in one BATCH_P2P group with the next action of its rank.
  bool batch_next = false;
  /// A SEND/RECV that is a BATCH_P2P group of one: committed alone and
  /// waited where it stands (never with batch_next).
  bool waited = false;
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;
  std::int32_t sub_stage = -1;
  std::int32_t sub_microbatch = -1;

  // A constructor rather than an aggregate: `batch_next` and `waited` sit in
  // the padding after `type` (20 bytes an action) while Action{type, stage, mb, -1, -1}
  // keeps its meaning.
  constexpr Action(ActionType t = ActionType::F, std::int32_t s = 0, std::int32_t mb = 0,
                   std::int32_t sub_s = -1, std::int32_t sub_mb = -1, bool batched = false)
      : type(t),
        batch_next(batched),
        stage(s),
        microbatch(mb),
        sub_stage(sub_s),
        sub_microbatch(sub_mb) {}

  friend bool operator==(const Action& a, const Action& b) {
    return a.type == b.type && a.batch_next == b.batch_next && a.waited == b.waited &&
           a.stage == b.stage && a.microbatch == b.microbatch && a.sub_stage == b.sub_stage &&
           a.sub_microbatch == b.sub_microbatch;
  }
  friend bool operator!=(const Action& a, const Action& b) { return !(a == b); }
};

/// Convenience constructor: make(ActionType::F, 2, 0) is "2F0".
inline Action make(ActionType t, int stage, int mb) { return Action{t, stage, mb, -1, -1}; }
/// An overlapped forward+backward group "(sF m;s'B m')OVERLAP_F_B".
inline Action make_overlap(int f_stage, int f_mb, int b_stage, int b_mb) {
  return Action{ActionType::OverlapFB, f_stage, f_mb, b_stage, b_mb};
}

/// Torch grammar: "2F0", "1SEND_F3", "(0F7;7B3)OVERLAP_F_B", "0UNSHARD". A
/// group member is written alone (its group: cell_size(), append_cell()).
std::string to_string(const Action& a);
/// Appends to_string(a) to out (no allocation per action in hot loops).
void append_to(std::string& out, const Action& a);

/// An action read from text, or where and why the text was refused.
struct ActionParse {
  std::optional<Action> action;
  std::size_t error_offset = 0;  ///< into the text; meaningful only when !action
  std::string reason;            ///< e.g. "'BW' is not an action type (types: ...)"
};
/// The one parser of the torch grammar: "2F0", "1SEND_F3", "0UNSHARD",
/// "(0F7;7B3)OVERLAP_F_B" (spaces allowed around a group's members only).
/// Strict: anything torch's regex would half-accept ("2BW0", "0F0x") and any
/// stage or microbatch number at or above limits::kMaxStages /
/// limits::kMaxMicrobatches is refused, with the offset and the reason.
ActionParse parse_action_located(std::string_view text);
/// parse_action_located(text).action: the action, or nullopt.
std::optional<Action> parse_action(std::string_view text);
/// "unknown action '<text>': <reason>", how every reader words a refusal.
std::string describe_bad_action(std::string_view text, const ActionParse& failure);

/// How stages are placed on ranks.
enum class StageMapping : std::uint8_t {
  Loop,  ///< stage s on rank s % pp (interleaved schedules)
  V,     ///< stages s and num_stages-1-s on one rank (V-shaped schedules)
};
std::string_view to_string(StageMapping m);
std::optional<StageMapping> parse_stage_mapping(std::string_view s);

/// The stages one microbatch crosses: first..last, in stage order (a
/// contiguous range of the plan's stages; docs/format.md, "Microbatch routes").
/// Its forward enters at `first` (which reads the batch) and its loss is taken
/// at `last`; no value crosses out of the range.
struct Route {
  int first = 0;
  int last = 0;
  friend bool operator==(const Route& a, const Route& b) {
    return a.first == b.first && a.last == b.last;
  }
  friend bool operator!=(const Route& a, const Route& b) { return !(a == b); }
};
/// "first-last", as JSON writes a route ("0-3").
std::string to_string(const Route& r);
/// Parses "first-last" (digits only, first <= last); nullopt otherwise.
std::optional<Route> parse_route(std::string_view s);

/// Shape and placement of a plan.
struct PlanMeta {
  std::string schedule;  ///< registry name, or "custom" for external plans
  int pp_degree = 1;
  int num_microbatches = 1;
  int stages_per_rank = 1;
  StageMapping mapping = StageMapping::Loop;
  /// An inference plan: forwards only (F, SEND_F, RECV_F), no backward owed.
  bool forward_only = false;
  /// Layers per stage when the plan was made for a layer profile (JSON
  /// "partition"); empty when the plan records none.
  std::vector<int> partition;
  /// Microbatch routes: routes[m] is the range of stages microbatch m crosses
  /// (bidirectional DualPipe: half the microbatches cross 0..p-1, the other
  /// half p..2p-1). Empty, the default: every microbatch crosses every stage.
  std::vector<Route> routes;

  int num_stages() const { return pp_degree * stages_per_rank; }
  /// Whether the plan has a route table (PlanMeta::routes non-empty).
  bool has_routes() const { return !routes.empty(); }
  /// The route of microbatch `mb`: routes[mb], or every stage when the plan
  /// has none (or mb has no entry).
  Route route_of(int mb) const {
    if (mb >= 0 && static_cast<std::size_t>(mb) < routes.size())
      return routes[static_cast<std::size_t>(mb)];
    return Route{0, num_stages() - 1};
  }
  /// Whether microbatch `mb` crosses `stage`.
  bool on_route(int stage, int mb) const {
    const Route r = route_of(mb);
    return stage >= r.first && stage <= r.last;
  }
  /// Rank owning `stage` (precondition: 0 <= stage < num_stages()).
  int rank_of(int stage) const;
  /// Local stages of `rank`, ascending.
  std::vector<int> stages_of(int rank) const;

  friend bool operator==(const PlanMeta& a, const PlanMeta& b) {
    return a.schedule == b.schedule && a.pp_degree == b.pp_degree &&
           a.num_microbatches == b.num_microbatches && a.stages_per_rank == b.stages_per_rank &&
           a.mapping == b.mapping && a.forward_only == b.forward_only &&
           a.partition == b.partition && a.routes == b.routes;
  }
};

/// A plan: metadata plus one ordered action list per rank. `ranks[r]` is the
/// program of rank `rank_ids[r]`; a whole plan has rank_ids = 0..pp-1, a
/// single-rank plan (`plan --rank R`) holds one entry.
struct Plan {
  PlanMeta meta;
  std::vector<int> rank_ids;
  std::vector<std::vector<Action>> ranks;

  /// True when every rank 0..pp-1 is present, in order.
  bool is_whole() const;
  /// True when the plan holds no SEND/RECV at all.
  bool is_compute_only() const;
  /// True when some rank holds an OFFLOAD, RELOAD or RECOMPUTE.
  bool has_memory_actions() const;
  std::size_t num_actions() const;

  friend bool operator==(const Plan& a, const Plan& b) {
    return a.meta == b.meta && a.rank_ids == b.rank_ids && a.ranks == b.ranks;
  }
};

/// Joins a rank's cells with single spaces (the text format's line body); a
/// BATCH_P2P group is one cell, "(0SEND_F1;0RECV_B0)BATCH_P2P".
std::string to_string(const std::vector<Action>& actions);

/// The cells of a rank's list: one action each, except a BATCH_P2P group
/// (a run of members marked batch_next, and the unmarked one closing it),
/// which is one cell. The number of actions in the cell at list[i]
/// (precondition: i < list.size()).
std::size_t cell_size(const std::vector<Action>& list, std::size_t i);
/// Appends the cell of `n` actions at `first` in torch grammar: the action,
/// or "(A;B;...)BATCH_P2P" for a group.
void append_cell(std::string& out, const Action* first, std::size_t n);
/// Where a rank's group marks are malformed, and why: a mark on an action
/// that is not a SEND/RECV, on the last action of the list, or before one
/// that is not a SEND/RECV; a member twice in one group. Returns the index
/// of the first bad action (-1 when every group is sound) and sets *why.
long first_bad_group(const std::vector<Action>& list, std::string* why);

// Projections: the one home of the views of a plan that the passes, the
// executor and the front ends take.

/// The forward-only projection of a rank's program, in order: its F actions
/// (the forward half of an OVERLAP_F_B included), SEND_F, RECV_F, UNSHARD and
/// RESHARD; every backward action (B, I, W, SEND_B, RECV_B) and REDUCE_GRAD
/// dropped. Of a schedule's compute order, what its forward-only plan runs;
/// of a lowered program, what a forward-only step of it runs.
std::vector<Action> forward_projection(const std::vector<Action>& program);
/// Every rank's forward_projection, the plan marked forward-only.
Plan forward_projection(const Plan& plan);
/// The plan's compute order: every SEND/RECV dropped, the rest in order.
Plan compute_projection(Plan plan);
/// Whether the program holds a backward action (B, I, W, OVERLAP_F_B,
/// SEND_B or RECV_B).
bool has_backward(const std::vector<Action>& program);
/// Whether any rank of the plan does.
bool has_backward(const Plan& plan);
/// The program of `rank` alone, moved out of a whole plan (what `plan
/// --rank` and plan_rank keep). Throws InputError "<rank_name> R is out of
/// range for pp_degree P (valid: 0..P-1)".
Plan keep_rank(Plan whole, int rank, const std::string& rank_name = "rank");

}  // namespace pipeplan
