// The stacks people train on: torch profiler traces in (a measured Trace to
// calibrate from), torchtitan configs and Megatron-LM layouts out (and a
// Megatron layout back in as a partition). docs/torch-profiler.md,
// docs/torchtitan.md and docs/megatron.md describe each direction.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/io.h"
#include "pipeplan/ir.h"
#include "pipeplan/profile.h"
#include "pipeplan/torch_runtime.h"
#include "pipeplan/trace.h"

namespace pipeplan {

// ---------------------------------------------------------------- torch in

/// One event of a torch.profiler (kineto) Chrome trace that the import uses;
/// the rest of the file is checked for syntax and skipped.
struct TorchEvent {
  enum class Kind : std::uint8_t {
    Action,        ///< "X", cat user_annotation, name "PP:<action>"
    ProfilerStep,  ///< "X", cat user_annotation, name "ProfilerStep#N"
    Launch,        ///< "X", cat cuda_runtime / cuda_driver (a kernel launch, memcpy...)
    Device,        ///< "X", cat kernel / gpu_memcpy / gpu_memset
    HostComm,      ///< "X", gloo:send|recv, nccl:send|recv[ peers] (user_annotation or cpu_op)
    FlowStart,     ///< "s", cat ac2g
    FlowEnd,       ///< "f", cat ac2g
    CommSize,      ///< "X", record_param_comms with a message size: bytes of its action's P2P
  };
  Kind kind = Kind::Action;
  double ts = 0.0, dur = 0.0;      ///< microseconds, as in the file
  std::uint64_t pid = 0, tid = 0;  ///< numbers as given; strings hashed
  std::int64_t correlation = -1;   ///< args.correlation (Launch, Device); flow id (Flow*)
  bool nccl = false;               ///< Device: a NCCL kernel (its name contains "nccl")
  std::int64_t bytes = -1;         ///< Device/HostComm/CommSize: message bytes when the args tell
  std::string name;                ///< Action: the action text after "PP:"
};

/// One rank's torch trace file.
struct TorchRankTrace {
  std::string source;
  int rank = -1;                   ///< distributedInfo.rank; -1 when the file has none
  std::int64_t base_time_ns = 0;   ///< baseTimeNanoseconds (0 when absent)
  std::vector<TorchEvent> events;  ///< in file order
};

/// Reads one torch.profiler Chrome trace (streamed: memory follows the
/// events kept, not the file). Refuses malformed JSON, a key given twice in
/// an object, nesting deeper than 64, and a kept event without a finite ts
/// or dur. Throws InputError "<source>: traceEvents[K]: ...".
TorchRankTrace parse_torch_trace(std::string_view text, const std::string& source = "<trace>");

/// How per-rank torch traces become one measured Trace.
struct TorchImportOptions {
  /// The plan the run executed; unset: the order read from the traces (every
  /// rank's actions of its first step, metadata inferred as for a CSV).
  std::optional<Plan> plan;
  /// Metadata for the inferred plan (mapping, microbatch count, schedule).
  CsvReadOptions csv;
};

/// What the import found, for the log.
struct TorchImportReport {
  int ranks = 0, steps = 0;
  long long actions = 0;             ///< action spans in every step
  long long device_timed = 0;        ///< of those, timed by their GPU kernels
  long long kernels_linked = 0;      ///< kernels attributed to an action
  bool used_profiler_steps = false;  ///< steps cut at ProfilerStep#N spans
};

/// The measured Trace of per-rank torch traces (one per rank; several files
/// of one rank are consecutive windows of it): each "PP:<action>" span of
/// torch's schedule runtime is one record. A compute takes the extent of the
/// GPU kernels launched inside its span (linked by args.correlation, or by
/// an ac2g flow); without kernels, its host span from when its input
/// arrived. A SEND/RECV is posted at its span's start and completes when its
/// NCCL kernel (or host gloo/nccl op) ends. Steps are cut at ProfilerStep#N
/// spans when the traces have them, else where a rank's first action
/// repeats. Times are ms on one clock (baseTimeNanoseconds + ts). Throws
/// InputError naming the rank, step and action that disagree with the plan.
Trace import_torch_traces(const std::vector<TorchRankTrace>& ranks,
                          const TorchImportOptions& options = {},
                          TorchImportReport* report = nullptr);

// ----------------------------------------------------------- torchtitan out

/// torch's schedule class name for a library schedule torch has ("1F1B",
/// "Interleaved1F1B", "ZBVZeroBubble", ...); "" for the others.
std::string torch_schedule_name(std::string_view schedule);

/// The torch schedule class torchtitan is told to build. torchtitan derives
/// the stage placement from the name (V for ZBVZeroBubble and DualPipeV,
/// else loop; one stage per rank for GPipe and 1F1B), so the plan's
/// placement decides: its schedule's torch name when that name places the
/// stages as the plan does, else ZBVZeroBubble (V), 1F1B (loop, one stage
/// per rank) or Interleaved1F1B (loop, several). `note` names a plan whose
/// schedule field is a torch schedule of another placement ("" otherwise).
struct TorchtitanSchedule {
  std::string name;
  std::string note;
};
TorchtitanSchedule torchtitan_schedule(const PlanMeta& meta);

/// The modules of each stage: the profile's layer names split by `partition`.
std::vector<std::vector<std::string>> module_fqns_per_stage(const LayerProfile& profile,
                                                            const Partition& partition);

/// Why torch's CSV dialect (what torch's `_load_csv` and torchtitan read)
/// cannot hold `plan`, or "" when it can: it has no memory actions
/// (OFFLOAD, RELOAD, RECOMPUTE). The strict torch writers refuse with it.
std::string torch_dialect_refusal(const Plan& plan);

/// Why torchtitan cannot build this plan's stages ("" when it can): a V
/// placement needs exactly 2 stages per rank; only whole plans; no
/// forward-only plan (torchtitan trains); no memory actions
/// (torch_dialect_refusal).
std::string torchtitan_refusal(const Plan& plan);

/// The plan with its compute actions only (F, B, I, W, OVERLAP_F_B): what a
/// compute-only torch CSV holds and what Megatron's own order is compared to.
Plan compute_actions(const Plan& plan);

/// The schedule torch's runtime loads with `_load_csv(path)` (format
/// "compute_only"): one row per rank, the plan's compute actions only
/// (torch inserts the SEND/RECV and REDUCE_GRAD itself). Throws InputError
/// when `target` cannot read one of them (torch_version_refusal).
void write_torch_compute_csv(const Plan& plan, std::ostream& out,
                             TorchVersion target = kTorchDefaultVersion);

/// A torchtitan release pipeplan writes for: how it takes its config and
/// what its llama model calls the output projection. Each entry names the
/// code it was read from (docs/torchtitan.md).
struct TorchtitanRelease {
  std::string_view version;     ///< "0.3.0"
  std::string_view file;        ///< what export writes: "torchtitan.args" or "torchtitan.toml"
  std::string_view head;        ///< the output projection's module: "lm_head" or "output"
  std::string_view provenance;  ///< where the key names and module names come from
  /// The torch release it pins, what its CSV is written for by default;
  /// unset for a release that pins a nightly (then kTorchDefaultVersion).
  std::optional<TorchVersion> torch;
};

/// The release export writes for when no version is given (the current one).
inline constexpr std::string_view kTorchtitanDefaultVersion = "0.3.0";

/// The releases pipeplan writes for, newest first (--torchtitan-version's choices).
std::vector<std::string_view> torchtitan_versions();

/// The release `version` names; throws InputError naming the known releases
/// for any other (releases before 0.2.0 split with other keys and are refused).
const TorchtitanRelease& torchtitan_release(std::string_view version);

/// Why the profile's layer names are not exactly the modules of the
/// release's llama model in model order (tok_embeddings, layers.0 ..
/// layers.L-1, norm, head), or "" when they are. torchtitan's split keeps
/// the named modules and sets every other to None, so an unknown or missing
/// name would silently build a stage without it.
std::string torchtitan_module_refusal(const LayerProfile& profile,
                                      const TorchtitanRelease& release);

struct TorchtitanOptions {
  std::string csv_path = "schedule.csv";           ///< as written into the config
  int microbatch_size = 1;                         ///< sequences per microbatch
  std::string version{kTorchtitanDefaultVersion};  ///< the torchtitan release to write for
};

/// The torchtitan config for `options.version`, in the form that release
/// loads: for 0.3.0 its CLI overrides (torchtitan.config.manager's tyro
/// parser; one argv token a line, appended after `--module M --config C`),
/// for 0.2.x the TOML it reads with --job.config_file. Both set
/// parallelism.pipeline_parallel_degree, pipeline_parallel_schedule (a
/// library schedule's torch name, else the placement), _schedule_csv,
/// _microbatch_size, module_fqns_per_model_part, and training.local_batch_size
/// = microbatches x microbatch size (torchtitan divides it back). Throws
/// InputError on an unknown version, torchtitan_refusal,
/// torchtitan_module_refusal or a profile the plan's partition does not fit.
void write_torchtitan_config(const Plan& plan, const LayerProfile& profile,
                             const TorchtitanOptions& options, std::ostream& out);

// ------------------------------------------------------------ Megatron out/in

/// Each layer's Megatron symbol: 'E' (the leading embedding layers: a name
/// containing "embed", or wte / wpe), 'L' (the trailing head: norm, ln_f,
/// final_norm, output, lm_head, head, loss), 'm' (a name starting with
/// "mtp"), 'n' (a final norm between the last transformer layer and the
/// first MTP layer, Megatron's module order with MTP: no layout character,
/// it rides with the last 't'), else 't'.
std::vector<char> megatron_symbols(const LayerProfile& profile);

/// `--pipeline-model-parallel-layout` for a partition: stages in Megatron's
/// order (stage k on rank k mod p), '|' between them, runs as "t*4". The
/// embedding group is one E, the head group one L (added to the first /
/// last stage when the profile has none). Throws InputError when a group is
/// split across stages.
std::string megatron_layout(const LayerProfile& profile, const Partition& partition);

/// A layout string expanded as Megatron's parse_str_to_list does (commas
/// dropped, "(..)*n" then "x*n" unrolled, '|' splits): one string of
/// symbols per stage. Throws InputError naming a bad character or a count
/// past the limits.
std::vector<std::string> expand_megatron_layout(std::string_view layout);

/// The profile's partition a layout describes, after Megatron's own checks
/// (megatron-core 0.16.1 pipeline_parallel_layer_layout.py: the stage count
/// a multiple of `pp_degree`; E first, L last, each once; the transformer
/// and MTP counts match the profile; t before m; MTP only in the last
/// virtual stage of a rank, all in one stage). `stages_per_rank`,
/// when given, receives stages / pp_degree. Throws InputError.
Partition partition_from_megatron_layout(const LayerProfile& profile, std::string_view layout,
                                         int pp_degree, int* stages_per_rank = nullptr);

/// Why Megatron's interleaved 1F1B refuses this shape ("" when it runs it):
/// with p > 1 and v > 1, m >= p and m % p == 0 (megatron-core 0.16.1
/// schedules.py forward_backward_pipelining_with_interleaving, with the
/// default microbatch group of p per virtual stage).
std::string megatron_microbatch_refusal(int pp_degree, int stages_per_rank, int num_microbatches);

/// Why Megatron-LM cannot run this plan ("" when it can): a V placement, a
/// split backward (I/W), an overlapped F/B, or megatron_microbatch_refusal;
/// Megatron runs 1F1B (v = 1) or interleaved 1F1B (v > 1) on a loop placement.
std::string megatron_refusal(const Plan& plan);

/// The Megatron arguments of a plan: the layout and the flags that go with it.
struct MegatronExport {
  std::string layout;
  std::vector<std::string> args;              ///< --pipeline-model-parallel-size ... (argv form)
  std::vector<std::string> alternative_args;  ///< without the layout, when the split is uniform
  std::vector<std::string> notes;
};
/// Throws InputError on megatron_refusal or a profile the partition does not fit.
MegatronExport megatron_export(const Plan& plan, const LayerProfile& profile,
                               int micro_batch_size = 1);
/// `format` "args": the flags on one line, shell-quoted; "layout": the
/// layout string alone; "json": {"format":"pipeplan.megatron","version":1,
/// "layout":..,"args":[..],"alternative_args":[..],"notes":[..]}.
void write_megatron_export(const MegatronExport& e, std::string_view format, std::ostream& out);

}  // namespace pipeplan
