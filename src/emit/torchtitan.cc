// torchtitan out: the compute-only schedule CSV torch's runtime loads and
// the [parallelism] TOML that points torchtitan at it.
#include <map>
#include <string>
#include <vector>

#include "pipeplan/emit.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

// pipeplan's library schedules that torch.distributed.pipelining has, by
// the name torch's get_schedule_class takes.
const std::map<std::string, std::string, std::less<>>& torch_names() {
  static const std::map<std::string, std::string, std::less<>> names = {
      {"gpipe", "GPipe"},
      {"1f1b", "1F1B"},
      {"interleaved-1f1b", "Interleaved1F1B"},
      {"looped-bfs", "LoopedBFS"},
      {"interleaved-zb", "InterleavedZeroBubble"},
      {"zbv", "ZBVZeroBubble"},
      {"dualpipev", "DualPipeV"},
  };
  return names;
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
  const auto& names = torch_names();
  const auto it = names.find(schedule);
  return it == names.end() ? std::string() : it->second;
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

void write_torch_compute_csv(const Plan& plan, std::ostream& out) {
  write_csv(compute_actions(plan), out);
}

void write_torchtitan_toml(const Plan& plan, const LayerProfile& profile,
                           const TorchtitanOptions& o, std::ostream& out) {
  if (std::string why = torchtitan_refusal(plan); !why.empty()) throw InputError(why);
  if (o.microbatch_size < 1)
    throw InputError("the microbatch size must be at least 1, got " +
                     std::to_string(o.microbatch_size));
  const PlanMeta& meta = plan.meta;
  const Partition partition = partition_for(profile, meta);
  check_partition(profile, partition, meta.num_stages());
  const auto fqns = module_fqns_per_stage(profile, partition);
  const std::string library = torch_schedule_name(meta.schedule);
  out << "# torchtitan config for pipeplan plan '" << limits::excerpt(meta.schedule) << "' (pp "
      << meta.pp_degree << ", " << meta.num_microbatches << " microbatches, "
      << meta.stages_per_rank << " stages per rank, " << to_string(meta.mapping) << " placement)\n";
  out << "# Merge into your job's TOML. torch lowers the compute-only CSV itself.\n";
  out << "[parallelism]\n";
  out << "pipeline_parallel_degree = " << meta.pp_degree << "\n";
  if (!library.empty()) {
    out << "pipeline_parallel_schedule = " << toml_string(library) << "\n";
  } else if (meta.mapping == StageMapping::V) {
    out << "# not a torch schedule: torchtitan reads the V placement from this name; the CSV "
           "sets the order\n";
    out << "pipeline_parallel_schedule = \"ZBVZeroBubble\"\n";
  }
  out << "pipeline_parallel_schedule_csv = " << toml_string(o.csv_path) << "\n";
  out << "pipeline_parallel_microbatch_size = " << o.microbatch_size << "\n";
  out << "pipeline_parallel_module_fqns_per_model_part = [\n";
  for (const auto& stage : fqns) {
    out << "  [";
    for (std::size_t k = 0; k < stage.size(); ++k) out << (k ? ", " : "") << toml_string(stage[k]);
    out << "],\n";
  }
  out << "]\n\n";
  out << "[training]\n";
  out << "# torchtitan runs local_batch_size / pipeline_parallel_microbatch_size = "
      << meta.num_microbatches << " microbatches\n";
  out << "local_batch_size = " << static_cast<long long>(meta.num_microbatches) * o.microbatch_size
      << "\n";
}

}  // namespace pipeplan
