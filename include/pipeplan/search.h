// search(): pick the plan to run for a model. Given a layer profile, p, m and
// a per-rank memory budget, it chooses the stage mapping, v, the layer
// partition and every rank's compute order (F, B or I+W), and returns the
// plan with the least simulated makespan that fits the budget, lowered and
// verified under all three transport models. See docs/search.md.
//
// @code
//   LayerProfile model = parse_layer_profile(csv_text, "model.csv");
//   SearchOptions o;
//   o.pp_degree = 8;
//   o.num_microbatches = 32;
//   o.memory_limit = 12.0;  // per rank, in the profile's activation unit
//   SearchResult r = search(model, o);
//   write_json(r.plan, out);  // r.plan.meta.partition records the split
// @endcode
#pragma once

#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/ir.h"
#include "pipeplan/profile.h"
#include "pipeplan/simulate.h"
#include "pipeplan/verify.h"

namespace pipeplan {

struct SearchOptions {
  int pp_degree = 4;
  int num_microbatches = 8;
  /// Per-rank peak activation memory allowed; unset: 1F1B's peak on the
  /// same profile (balanced partition), or with `partition` set, the peak of
  /// 1F1B (v = 1) or interleaved 1F1B (v > 1) on it (what Megatron runs).
  std::optional<double> memory_limit;
  /// Transfer cost (comm_latency, comm_bandwidth, transfer_bytes); the
  /// compute costs come from the profile.
  CostModel comm;
  /// The user stated the transfer cost (--comm, comm=), a free one included.
  /// When not, and `comm` makes messages free, the search charges
  /// default_transfer_latency(profile) per message: real ones never are.
  bool transfer_cost_stated = false;
  /// The transport the makespan is measured under (the plan is verified
  /// under all three).
  Transport transport = Transport::Rendezvous;
  /// Wall-clock bound in seconds. The search visits its candidates in a
  /// fixed order, so it is deterministic whenever it finishes within it.
  double time_limit = 3.0;
  /// Largest v tried for both mappings.
  int max_stages_per_rank = 4;
  /// Largest v tried for the V mapping (0: max_stages_per_rank); torchtitan,
  /// for one, places a V only with 2 stages per rank.
  int max_v_stages_per_rank = 0;
  /// Run the exhaustive search too when the shape is tiny (see ExactResult).
  bool exact = true;
  /// A fixed layer partition (e.g. a Megatron layout): its stages / p is v,
  /// the mapping is loop, and nothing moves its boundaries; the library
  /// baselines run on it too (those with a loop mapping at that v).
  std::optional<Partition> partition;
  /// Memory actions the search may decide per (stage, microbatch)
  /// (docs/memory.md): RECOMPUTE, and OFFLOAD/RELOAD when the copy stream has
  /// a bandwidth (comm.host_bandwidth > 0).
  bool recompute = true;
  bool offload = true;
  /// With microbatches of different lengths (comm.microbatch_tokens): keep
  /// their order rather than choose one (SearchResult::microbatch_order).
  bool keep_order = false;
};

/// A library schedule run on the same profile (balanced partition).
struct LibraryRun {
  std::string schedule;
  int stages_per_rank = 0;
  Partition partition;
  double makespan = 0.0, peak_memory = 0.0;
  bool fits = false;  ///< peak_memory <= the budget
};

/// The exhaustive answer for tiny shapes: over every per-rank order of F,
/// B or I+W (microbatches in order per stage) for each mapping, partition
/// and v up to max_stages_per_rank, the least makespan that fits (or the
/// search's own plan, if that is better), in the compute-only model
/// (values move when produced, plus the transfer time), beside the search's
/// best in the same model.
struct ExactResult {
  bool complete = false;      ///< false: stopped by the time limit or node cap (no claim)
  double optimum = 0.0;       ///< least compute-only makespan that fits
  double search_value = 0.0;  ///< the search's best compute-only makespan
  long long nodes = 0;
  int max_stages_per_rank = 0;  ///< the space covered every v up to this one
  /// The plan returned is the exact search's (faster than the heuristic's in
  /// the compute-only model, no slower under the chosen transport), found
  /// whether or not the search completed.
  bool returned = false;
  double gap() const { return optimum > 0 ? search_value / optimum - 1.0 : 0.0; }
};

struct SearchResult {
  Plan plan;           ///< lowered; meta.partition set; schedule "search" or a library name
  std::string origin;  ///< how the plan was built, e.g. "list scheduler (split, V)"
  double makespan = 0.0;
  double peak_memory = 0.0;  ///< max over ranks
  std::vector<double> rank_peak_memory;
  double memory_limit = 0.0;
  /// No plan of this form finishes earlier (see docs/search.md for the proof).
  double lower_bound = 0.0;
  std::string lower_bound_reason;
  std::vector<LibraryRun> library;         ///< every library schedule tried, fitting or not
  std::optional<LibraryRun> best_library;  ///< the fastest that fits the budget
  /// Every library schedule with full recompute (a RECOMPUTE before each
  /// backward: what Megatron users run), and the fastest of them that fits.
  std::vector<LibraryRun> library_recompute;
  std::optional<LibraryRun> best_library_recompute;
  /// (stage, microbatch)s the chosen plan recomputes / offloads.
  int recomputed = 0, offloaded = 0;
  /// The time every message took in the search (latency + bytes/bandwidth),
  /// and whether it is default_transfer_latency() (none was stated).
  double transfer_time = 0.0;
  bool transfer_cost_default = false;
  std::optional<ExactResult> exact;
  /// With microbatches of different lengths: plan microbatch k is input
  /// microbatch microbatch_order[k] (the order chosen for the step; the
  /// arrival order 0..m-1 when kept). Empty without lengths.
  std::vector<int> microbatch_order;
  /// search_sequences(): each plan microbatch's sequence indices, and the
  /// fastest first-fit-decreasing packing run by a library schedule.
  std::vector<std::vector<int>> microbatches;
  std::optional<double> first_fit_makespan;
  int candidates = 0;         ///< plans simulated
  bool time_limited = false;  ///< the time limit cut the search short
  double gap() const { return lower_bound > 0 ? makespan / lower_bound - 1.0 : 0.0; }
};

/// No plan fits the memory budget. `smallest_budget` is the least peak
/// memory among the plans the search built (it works).
class BudgetError : public InputError {
 public:
  BudgetError(const std::string& what, double smallest)
      : InputError(what), smallest_budget(smallest) {}
  double smallest_budget;
};

/// The search's message cost when none is stated: kNominalLatency (a
/// quarter) of the profile's mean layer F. A boundary activation over an
/// inter-node link costs about that next to a transformer layer's forward
/// (docs/search.md has the arithmetic); free messages reward cutting the
/// model into as many stages as there are layers.
double default_transfer_latency(const LayerProfile& profile);

/// `options.comm` as the search charges it: with default_transfer_latency()
/// per message when the transfer cost is not stated and `comm` makes
/// messages free (the one default-message-cost rule), else unchanged.
CostModel search_costs(const LayerProfile& profile, const SearchOptions& options);

/// Searches as described above. Throws InputError/ShapeError on bad options
/// (fewer layers than ranks, p or m < 1) and BudgetError when nothing fits.
SearchResult search(const LayerProfile& profile, const SearchOptions& options);

/// search() for a step given as sequences (tokens each): the microbatches
/// are built first, packed into at most `microbatch_tokens` tokens each,
/// together with their order (plan_step: first fit decreasing and the
/// pipeline-aware packing, every library schedule and order rule
/// simulated), then searched at them (`options.num_microbatches` is set
/// from the packing). The result's `microbatches` and `microbatch_order`
/// say which sequences each plan microbatch holds.
SearchResult search_sequences(const LayerProfile& profile, SearchOptions options,
                              const std::vector<double>& sequences, double microbatch_tokens);

/// The memory actions a plan bounded by makespan_lower_bound() may hold.
struct BoundMemoryActions {
  bool recompute = false;  ///< a microbatch may keep only its stage's input until RECOMPUTE
  bool offload = false;    ///< a microbatch may leave the device (OFFLOAD/RELOAD)
};

/// A lower bound on the makespan of any plan for (profile, p, m, comm) whose
/// ranks' peak activation memory stays within `memory_limit` (holding each
/// microbatch's activations from its F to its backward, or with
/// `actions.recompute` at least its first stage's input; `actions.offload`
/// drops the memory term; infinity: no budget). The largest of: the busiest rank, (m x total work + the fill) /
/// p, the fill summing what the k-th rank to start waits (the first k
/// layers' F and k transfers); one microbatch's F + I chain through every
/// layer, the first layer's W and the 2(p-1) transfers it must cross; whole
/// layers, the k-th rank to start doing m(F + B) of each layer it holds
/// after that wait (each rank holds one layer at least); the drain, the rank
/// whose top layer is lowest waiting for a microbatch's F through every
/// layer (entering each other rank holding a layer below its top) and I back
/// through the layers above, before all its m x B and the forwards the
/// budget kept it from running while it waited; and the memory
/// term, the round trips of the microbatches the first stage can hold at
/// once run one after another. See docs/search.md for the proof.
double makespan_lower_bound(const LayerProfile& profile, int pp_degree, int num_microbatches,
                            double transfer_time, std::string* reason = nullptr,
                            double memory_limit = std::numeric_limits<double>::infinity(),
                            BoundMemoryActions actions = {});

/// makespan_lower_bound() for microbatches of different lengths
/// (`costs.microbatch_tokens`, on the profile's stated length, else the
/// longest; the transfer cost is `costs`'): the larger of that bound with
/// every layer at the shortest microbatch's costs and activation (each
/// microbatch costs at least that) and the busiest rank's share of the real
/// work, the sum over microbatches and layers of F + B over p (or the
/// heaviest layer's). Without lengths, makespan_lower_bound() above.
double makespan_lower_bound(const LayerProfile& profile, int pp_degree, const CostModel& costs,
                            int num_microbatches, std::string* reason = nullptr,
                            double memory_limit = std::numeric_limits<double>::infinity(),
                            BoundMemoryActions actions = {});

/// Human-readable report. Implemented in src/emit.
void write_search_text(const SearchResult& result, const SearchOptions& options, std::ostream& out);
/// {"format":"pipeplan.search","version":1,"makespan":..,"peak_memory":..,
/// "lower_bound":..,"mapping":..,"stages_per_rank":..,"partition":[..],..}.
void write_search_json(const SearchResult& result, const SearchOptions& options, std::ostream& out);

}  // namespace pipeplan
