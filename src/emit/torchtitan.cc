// torchtitan out: the compute-only schedule CSV torch's runtime loads and
// the config that points torchtitan at it, in the form each release loads
// (0.3.0: CLI overrides of its Python config; 0.2.x: TOML).
#include <algorithm>
#include <string>
#include <vector>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

// pipeplan's library schedules that torch.distributed.pipelining has, by
// the name torch's get_schedule_class takes, with the stage placement
// torchtitan builds for that name: "v" style for ZBVZeroBubble and
// DualPipeV (_get_pp_rank_to_stage_indices_mapping), else loop; one stage
// per rank for the single-stage classes (PipelineScheduleSingle).
struct TorchSchedule {
  std::string_view library;
  std::string_view torch;
  bool v;
  bool single;
};

constexpr TorchSchedule kTorchSchedules[] = {
    {"gpipe", "GPipe", false, true},
    {"1f1b", "1F1B", false, true},
    {"interleaved-1f1b", "Interleaved1F1B", false, false},
    {"looped-bfs", "LoopedBFS", false, false},
    {"interleaved-zb", "InterleavedZeroBubble", false, false},
    {"zbv", "ZBVZeroBubble", true, false},
    {"dualpipev", "DualPipeV", true, false},
};

const TorchSchedule* torch_schedule(std::string_view library) {
  for (const TorchSchedule& t : kTorchSchedules)
    if (t.library == library) return &t;
  return nullptr;
}

std::string placement_text(bool v, bool single) {
  return std::string(v ? "V" : "loop") +
         (single ? ", one stage per rank" : ", several stages per rank");
}

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string toml_string(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + '"';
}

}  // namespace

std::string torch_schedule_name(std::string_view schedule) {
  const TorchSchedule* t = torch_schedule(schedule);
  return t ? std::string(t->torch) : std::string();
}

TorchtitanSchedule torchtitan_schedule(const PlanMeta& meta) {
  const bool v = meta.mapping == StageMapping::V;
  const bool single = meta.stages_per_rank == 1;
  const TorchSchedule* named = torch_schedule(meta.schedule);
  if (named && named->v == v && named->single == single) return {std::string(named->torch), {}};
  TorchtitanSchedule out;
  out.name = v ? "ZBVZeroBubble" : single ? "1F1B" : "Interleaved1F1B";
  if (named)
    out.note = "the plan is named '" + std::string(named->library) + "' (torch's " +
               std::string(named->torch) + ": " + placement_text(named->v, named->single) +
               "), but its placement is " + placement_text(v, single) + ": torchtitan is told " +
               out.name + ", which places the stages as the plan does; the CSV sets the order";
  return out;
}

std::vector<std::vector<std::string>> module_fqns_per_stage(const LayerProfile& profile,
                                                            const Partition& partition) {
  check_partition(profile, partition, static_cast<int>(partition.size()));
  std::vector<std::vector<std::string>> out;
  std::size_t next = 0;
  for (int count : partition) {
    out.emplace_back();
    for (int k = 0; k < count; ++k) out.back().push_back(profile.layers[next++].name);
  }
  return out;
}

std::string torch_dialect_refusal(const Plan& plan) {
  if (plan.meta.has_routes())
    return "torch's runtime sends every microbatch through every stage, and this plan routes "
           "microbatches over part of the stages (" +
           std::string(plan.meta.schedule) +
           ", docs/format.md \"Microbatch routes\"); write pipeplan's JSON (-f json)";
  for (std::size_t r = 0; r < plan.ranks.size(); ++r)
    for (std::size_t i = 0; i < plan.ranks[r].size(); ++i)
      if (is_memory(plan.ranks[r][i].type))
        return "torch's CSV dialect has no memory actions, and the plan holds " +
               to_string(plan.ranks[r][i]) + " (rank " + std::to_string(plan.rank_ids[r]) +
               " index " + std::to_string(i) +
               "); write pipeplan's own format (json, csv) or plan without "
               "--recompute/--offload";
  return {};
}

std::string torchtitan_refusal(const Plan& plan) {
  if (!plan.is_whole()) return "torchtitan needs every rank's schedule (a whole plan)";
  if (plan.meta.forward_only)
    return "torchtitan trains, and the plan is forward-only (no backward): torch's runtime "
           "refuses it at startup; export a training plan (plan without --forward-only)";
  if (plan.meta.mapping == StageMapping::V && plan.meta.stages_per_rank != 2)
    return "torchtitan places a V mapping only with 2 stages per rank (this plan has " +
           std::to_string(plan.meta.stages_per_rank) + ")";
  return torch_dialect_refusal(plan);
}

Plan compute_actions(const Plan& plan) {
  Plan compute = plan;
  for (auto& list : compute.ranks) {
    std::vector<Action> kept;
    for (const Action& a : list)
      if (is_compute(a.type)) kept.push_back(a);
    list = std::move(kept);
  }
  return compute;
}

void write_torch_compute_csv(const Plan& plan, std::ostream& out, TorchVersion target) {
  const Plan compute = compute_actions(plan);
  if (std::string why = torch_version_refusal(compute, target); !why.empty()) throw InputError(why);
  write_csv(compute, out);
}

namespace {

// What both dialects say, checked once.
struct TorchtitanConfig {
  const PlanMeta* meta = nullptr;
  TorchtitanSchedule schedule;
  std::vector<std::vector<std::string>> fqns;
  long long local_batch_size = 0;
};

using ConfigWriter = void (*)(const TorchtitanConfig&, const TorchtitanOptions&, std::ostream&);

std::string header(const PlanMeta& meta, std::string_view version) {
  return "pipeplan plan '" + limits::excerpt(meta.schedule) + "' (pp " +
         std::to_string(meta.pp_degree) + ", " + std::to_string(meta.num_microbatches) +
         " microbatches, " + std::to_string(meta.stages_per_rank) + " stages per rank, " +
         std::string(to_string(meta.mapping)) + " placement) for torchtitan " +
         std::string(version);
}

// torchtitan 0.3.0: torchtitan/config/manager.py parses `--module M --config
// C` and then these overrides with tyro; list[list[str]] takes one argument
// per stage, its names joined by commas (the list[str] rule). One token a
// line, so `mapfile -t` passes them unchanged; no comments (they would be
// arguments).
void write_args(const TorchtitanConfig& c, const TorchtitanOptions& o, std::ostream& out) {
  if (o.csv_path.find_first_of("\n\r") != std::string::npos)
    throw InputError(
        "the schedule path holds a line break; torchtitan.args holds one argument a "
        "line");
  out << "--parallelism.pipeline_parallel_degree=" << c.meta->pp_degree << "\n";
  out << "--parallelism.pipeline_parallel_schedule=" << c.schedule.name << "\n";
  out << "--parallelism.pipeline_parallel_schedule_csv=" << o.csv_path << "\n";
  out << "--parallelism.pipeline_parallel_microbatch_size=" << o.microbatch_size << "\n";
  out << "--parallelism.module_fqns_per_model_part\n";
  for (const auto& stage : c.fqns) {
    for (std::size_t k = 0; k < stage.size(); ++k) out << (k ? "," : "") << stage[k];
    out << "\n";
  }
  out << "--training.local_batch_size=" << c.local_batch_size << "\n";
  // trainer.py _validate_cuda_graphs refuses pipeline parallelism otherwise.
  out << "--training.disable_cuda_graphs\n";
}

// torchtitan 0.2.0-0.2.2: config/manager.py loads --job.config_file with
// tomllib and refuses unknown keys; config/job_config.py's Parallelism and
// Training name them.
void write_toml(const TorchtitanConfig& c, const TorchtitanOptions& o, std::ostream& out) {
  const PlanMeta& meta = *c.meta;
  out << "# torchtitan config for " << header(meta, o.version) << "\n";
  out << "# Merge into your job's TOML. torch lowers the compute-only CSV itself.\n";
  out << "[parallelism]\n";
  out << "pipeline_parallel_degree = " << meta.pp_degree << "\n";
  if (!c.schedule.note.empty()) out << "# " << c.schedule.note << "\n";
  else if (torch_schedule_name(meta.schedule).empty())
    out << "# not a torch schedule: torchtitan reads the stage placement from this name; the CSV "
           "sets the order\n";
  out << "pipeline_parallel_schedule = " << toml_string(c.schedule.name) << "\n";
  out << "pipeline_parallel_schedule_csv = " << toml_string(o.csv_path) << "\n";
  out << "pipeline_parallel_microbatch_size = " << o.microbatch_size << "\n";
  out << "module_fqns_per_model_part = [\n";
  for (const auto& stage : c.fqns) {
    out << "  [";
    for (std::size_t k = 0; k < stage.size(); ++k) out << (k ? ", " : "") << toml_string(stage[k]);
    out << "],\n";
  }
  out << "]\n\n";
  out << "[training]\n";
  out << "# torchtitan runs local_batch_size / pipeline_parallel_microbatch_size = "
      << meta.num_microbatches << " microbatches\n";
  out << "local_batch_size = " << c.local_batch_size << "\n";
}

struct ReleaseEntry {
  TorchtitanRelease release;
  ConfigWriter write;
};

constexpr std::string_view kProvenance030 =
    "torchtitan 0.3.0 (PyPI): config/manager.py, config/configs.py (ParallelismConfig, "
    "TrainingConfig), distributed/pipeline_parallel.py (_split_module), models/llama3";
// torchtitan 0.3.0's release validates with torch==2.14.0 (its
// .github/workflows/validate_rc.yaml and docs/release.md); 0.2.x's
// docs/release.md pins a torch nightly.
constexpr TorchVersion kTorch030{2, 14};
constexpr std::string_view kProvenance02 =
    "torchtitan git tags v0.2.0-v0.2.2: config/manager.py, config/job_config.py, "
    "models/llama3/model/model.py";

const std::vector<ReleaseEntry>& releases() {
  static const std::vector<ReleaseEntry> table = {
      {{"0.3.0", "torchtitan.args", "lm_head", kProvenance030, kTorch030}, write_args},
      {{"0.2.2", "torchtitan.toml", "output", kProvenance02, std::nullopt}, write_toml},
      {{"0.2.1", "torchtitan.toml", "output", kProvenance02, std::nullopt}, write_toml},
      {{"0.2.0", "torchtitan.toml", "output", kProvenance02, std::nullopt}, write_toml},
  };
  return table;
}

const ReleaseEntry& release_entry(std::string_view version) {
  for (const ReleaseEntry& e : releases())
    if (e.release.version == version) return e;
  std::string known;
  for (std::string_view v : torchtitan_versions())
    known += (known.empty() ? "" : ", ") + std::string(v);
  std::string why = "unknown torchtitan version '" + limits::excerpt(version) +
                    "': pipeplan writes for " + known +
                    " (0.3.0 takes CLI overrides of its Python config, 0.2.x a TOML)";
  if (version.rfind("0.1.", 0) == 0)
    why +=
        "; torchtitan 0.1.x splits with pipeline_parallel_split_points, which cannot hold an "
        "uneven partition";
  throw InputError(why);
}

// "layers.<digits>" -> the index, else -1.
long layer_index(std::string_view name) {
  constexpr std::string_view kPrefix = "layers.";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix) return -1;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.size() > 9 || (digits.size() > 1 && digits[0] == '0')) return -1;
  long index = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return -1;
    index = index * 10 + (ch - '0');
  }
  return index;
}

}  // namespace

std::vector<std::string_view> torchtitan_versions() {
  std::vector<std::string_view> out;
  for (const ReleaseEntry& e : releases()) out.push_back(e.release.version);
  return out;
}

const TorchtitanRelease& torchtitan_release(std::string_view version) {
  return release_entry(version).release;
}

std::string torchtitan_module_refusal(const LayerProfile& profile,
                                      const TorchtitanRelease& release) {
  const std::string model = "torchtitan " + std::string(release.version) +
                            "'s llama model (tok_embeddings, layers.N, norm, " +
                            std::string(release.head) + ")";
  long num_layers = 0;
  for (std::size_t i = 0; i < profile.layers.size(); ++i) {
    const std::string& name = profile.layers[i].name;
    if (layer_index(name) >= 0) {
      ++num_layers;
      continue;
    }
    if (name == "tok_embeddings" || name == "norm" || name == release.head) continue;
    std::string why = "profile layer " + std::to_string(i) + " '" + limits::excerpt(name) +
                      "' is not a module of " + model;
    if (name == "output" || name == "lm_head")
      why += ": torchtitan " + std::string(release.version) + " calls the output projection " +
             std::string(release.head) + " (0.3.0: lm_head, 0.2.x: output)";
    return why;
  }
  std::vector<std::string> expected = {"tok_embeddings"};
  for (long k = 0; k < num_layers; ++k) expected.push_back("layers." + std::to_string(k));
  expected.emplace_back("norm");
  expected.emplace_back(release.head);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (i < profile.layers.size() && profile.layers[i].name == expected[i]) continue;
    const bool present = std::any_of(profile.layers.begin(), profile.layers.end(),
                                     [&](const Layer& l) { return l.name == expected[i]; });
    if (!present)
      return "the profile leaves out module '" + expected[i] + "' of " + model +
             ": torchtitan would build no stage with it";
    return "profile layer " + std::to_string(i) + " is '" +
           limits::excerpt(profile.layers[i].name) + "', but " + model + " has '" + expected[i] +
           "' there: name each module once, in model order";
  }
  return {};
}

void write_torchtitan_config(const Plan& plan, const LayerProfile& profile,
                             const TorchtitanOptions& o, std::ostream& out) {
  const ReleaseEntry& entry = release_entry(o.version);
  if (std::string why = torchtitan_refusal(plan); !why.empty()) throw InputError(why);
  if (o.microbatch_size < 1)
    throw InputError("the microbatch size must be at least 1, got " +
                     std::to_string(o.microbatch_size));
  if (std::string why = torchtitan_module_refusal(profile, entry.release); !why.empty())
    throw InputError(why);
  TorchtitanConfig c;
  c.meta = &plan.meta;
  const Partition partition = partition_for(profile, plan.meta);
  check_partition(profile, partition, plan.meta.num_stages());
  c.fqns = module_fqns_per_stage(profile, partition);
  c.schedule = torchtitan_schedule(plan.meta);
  c.local_batch_size = static_cast<long long>(plan.meta.num_microbatches) * o.microbatch_size;
  entry.write(c, o, out);
}

}  // namespace pipeplan
