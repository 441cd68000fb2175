// Megatron-LM out: the --pipeline-model-parallel-layout string of a plan's
// partition and placement, and the flags that go with it.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/limits.h"
#include "pipeplan/planner.h"

namespace pipeplan {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool embedding_name(const std::string& n) {
  const std::string l = lower(n);
  return l.find("embed") != std::string::npos || l == "wte" || l == "wpe";
}

bool head_name(const std::string& n) {
  const std::string l = lower(n);
  for (const char* h :
       {"norm", "ln_f", "final_norm", "final_layernorm", "output", "lm_head", "head", "loss"})
    if (l == h) return true;
  return l.find("lm_head") != std::string::npos;
}

// The decoder's final norm by name (Megatron's decoder.final_layernorm).
bool final_norm_name(const std::string& n) {
  const std::string l = lower(n);
  for (const char* h : {"norm", "ln_f", "final_norm", "final_layernorm", "decoder.final_layernorm"})
    if (l == h) return true;
  return false;
}

// The stage of every layer under `partition`.
std::vector<int> stage_of_layers(const Partition& partition) {
  std::vector<int> out;
  for (std::size_t s = 0; s < partition.size(); ++s)
    out.insert(out.end(), static_cast<std::size_t>(partition[s]), static_cast<int>(s));
  return out;
}

void append_run(std::string& out, char symbol, int count) {
  if (count <= 0) return;
  out += symbol;
  if (count > 1) out += "*" + std::to_string(count);
}

// The order Megatron runs for this shape, as pipeplan plans it.
std::string megatron_schedule(const PlanMeta& m) {
  return m.stages_per_rank > 1 ? "interleaved-1f1b" : "1f1b";
}

}  // namespace

std::vector<char> megatron_symbols(const LayerProfile& profile) {
  const std::size_t n = profile.size();
  std::vector<char> out(n, 't');
  std::size_t head = 0;
  while (head < n && embedding_name(profile.layers[head].name)) out[head++] = 'E';
  std::size_t tail = n;
  while (tail > head && head_name(profile.layers[tail - 1].name)) out[--tail] = 'L';
  for (std::size_t i = head; i < tail; ++i)
    if (lower(profile.layers[i].name).rfind("mtp", 0) == 0) out[i] = 'm';
  // Megatron's module order with MTP (layers.*, norm, mtp.*, output): the
  // final norm between the last decoder layer and the first MTP layer is no
  // layer of the layout; Megatron builds it with the last decoder layer
  // (transformer_block.py, has_final_layernorm_in_this_stage).
  const auto first_m = std::find(out.begin(), out.end(), 'm');
  for (auto it = first_m; it != out.begin() && first_m != out.end();) {
    --it;
    const std::size_t i = static_cast<std::size_t>(it - out.begin());
    if (*it != 't' || !final_norm_name(profile.layers[i].name)) break;
    if (it != out.begin() && *(it - 1) == 't') *it = 'n';
  }
  return out;
}

std::string megatron_layout(const LayerProfile& profile, const Partition& partition) {
  check_partition(profile, partition, static_cast<int>(partition.size()));
  const std::vector<char> sym = megatron_symbols(profile);
  const std::vector<int> stage = stage_of_layers(partition);
  // E and L are one Megatron layer each: their profile layers share a stage.
  // The final norm of the MTP order is built with the last transformer layer.
  const auto last_t = std::find(sym.rbegin(), sym.rend(), 't');
  for (std::size_t i = 0; i < sym.size(); ++i)
    if (sym[i] == 'n' && last_t != sym.rend() &&
        stage[i] != stage[static_cast<std::size_t>(sym.rend() - last_t) - 1])
      throw InputError(
          "Megatron builds the final norm with the last transformer layer when the "
          "model has MTP layers, but this partition puts '" +
          limits::excerpt(profile.layers[i].name) + "' in stage " + std::to_string(stage[i]) +
          " and the last transformer layer in stage " +
          std::to_string(stage[static_cast<std::size_t>(sym.rend() - last_t) - 1]));
  for (char group : {'E', 'L'}) {
    int first = -1;
    for (std::size_t i = 0; i < sym.size(); ++i) {
      if (sym[i] != group) continue;
      if (first < 0) first = stage[i];
      if (stage[i] != first)
        throw InputError(std::string("Megatron's ") + (group == 'E' ? "embedding" : "loss") + " (" +
                         group + ") is one layer, but this partition puts layer '" +
                         limits::excerpt(profile.layers[i].name) + "' in stage " +
                         std::to_string(stage[i]) + " and the group's first in stage " +
                         std::to_string(first) +
                         " (give the whole group to one stage, e.g. search --layout with a "
                         "layout that keeps it together)");
    }
  }
  std::string out;
  std::size_t i = 0;
  for (std::size_t s = 0; s < partition.size(); ++s) {
    if (s) out += '|';
    if (s == 0 && (sym.empty() || sym[0] != 'E')) out += 'E';  // the profile has no embedding
    const std::size_t end = i + static_cast<std::size_t>(partition[s]);
    while (i < end) {
      const char c = sym[i];
      std::size_t j = i;
      while (j < end && sym[j] == c) ++j;
      if (c != 'n') append_run(out, c, c == 'E' || c == 'L' ? 1 : static_cast<int>(j - i));
      i = j;
    }
    if (s + 1 == partition.size() && (sym.empty() || sym.back() != 'L')) out += 'L';
  }
  return out;
}

std::string megatron_refusal(const Plan& plan) {
  if (plan.meta.mapping == StageMapping::V)
    return "Megatron-LM places virtual stage k on rank k mod p (a loop); this plan uses the V "
           "placement";
  for (const auto& list : plan.ranks)
    for (const Action& a : list) {
      if (a.type == ActionType::I || a.type == ActionType::W)
        return "this plan splits the backward into I and W (a zero-bubble order, " + to_string(a) +
               "); Megatron-LM runs 1F1B or interleaved 1F1B with whole backwards";
      if (a.type == ActionType::OverlapFB)
        return "this plan overlaps a forward with a backward (" + to_string(a) +
               "); Megatron-LM's 1F1B schedules do not";
    }
  return megatron_microbatch_refusal(plan.meta.pp_degree, plan.meta.stages_per_rank,
                                     plan.meta.num_microbatches);
}

MegatronExport megatron_export(const Plan& plan, const LayerProfile& profile,
                               int micro_batch_size) {
  if (std::string why = megatron_refusal(plan); !why.empty()) throw InputError(why);
  if (micro_batch_size < 1)
    throw InputError("the micro-batch size must be at least 1, got " +
                     std::to_string(micro_batch_size));
  const PlanMeta& meta = plan.meta;
  const Partition partition = partition_for(profile, meta);
  check_partition(profile, partition, meta.num_stages());
  MegatronExport e;
  e.layout = megatron_layout(profile, partition);
  // Megatron's own layout checks (validate_layer_layout: the MTP rules) on
  // what is written; reading it back gives the plan's partition.
  if (partition_from_megatron_layout(profile, e.layout, meta.pp_degree) != partition)
    throw InternalError("the Megatron layout '" + limits::excerpt(e.layout) +
                        "' does not read back as the plan's partition");
  const std::vector<char> sym = megatron_symbols(profile);
  const auto count = [&](char c) { return std::count(sym.begin(), sym.end(), c); };
  const long long t = count('t'), mtp = count('m');
  const std::string global =
      std::to_string(static_cast<long long>(meta.num_microbatches) * micro_batch_size);
  e.args = {"--pipeline-model-parallel-size",
            std::to_string(meta.pp_degree),
            "--pipeline-model-parallel-layout",
            e.layout,
            "--num-layers",
            std::to_string(t)};
  if (mtp > 0) e.args.insert(e.args.end(), {"--mtp-num-layers", std::to_string(mtp)});
  e.args.insert(e.args.end(), {"--micro-batch-size", std::to_string(micro_batch_size),
                               "--global-batch-size", global});
  // A final norm after the MTP layers (not Megatron's module order): Megatron
  // builds it with the last decoder layer (has_final_layernorm_in_this_stage).
  for (std::size_t k = 0; k < sym.size() && mtp > 0; ++k)
    if (sym[k] == 'L' && final_norm_name(profile.layers[k].name))
      e.notes.push_back("'" + limits::excerpt(profile.layers[k].name) +
                        "' follows the MTP layers here, but with MTP Megatron builds the final "
                        "norm with the last transformer layer (order the profile layers.*, norm, "
                        "mtp.*, output to cost it there)");
  e.notes.push_back("--global-batch-size is " + global +
                    " for one data-parallel replica: multiply it by your data-parallel size "
                    "(Megatron runs global / (micro x dp) = " +
                    std::to_string(meta.num_microbatches) + " microbatches)");
  // Without the layout: Megatron's even split, when every stage holds as many
  // transformer layers and the embedding and loss ride on the ends.
  std::vector<long long> per_stage;
  std::size_t i = 0;
  for (int c : partition) {
    long long n = 0;
    for (int k = 0; k < c; ++k, ++i) n += sym[i] == 't';
    per_stage.push_back(n);
  }
  const bool uniform =
      mtp == 0 && std::all_of(per_stage.begin(), per_stage.end(),
                              [&](long long n) { return n == per_stage.front() && n > 0; });
  if (uniform) {
    e.alternative_args = {"--pipeline-model-parallel-size", std::to_string(meta.pp_degree),
                          "--num-layers", std::to_string(t)};
    if (meta.stages_per_rank > 1)
      e.alternative_args.insert(
          e.alternative_args.end(),
          {"--num-layers-per-virtual-pipeline-stage", std::to_string(per_stage.front())});
    e.notes.push_back(
        "the split is even: the alternative flags give the same stages without the layout "
        "(Megatron takes one of --pipeline-model-parallel-layout and "
        "--num-layers-per-virtual-pipeline-stage)");
  }
  const std::string own = megatron_schedule(meta);
  if (meta.stages_per_rank > 1)
    e.notes.push_back("v = " + std::to_string(meta.stages_per_rank) +
                      ": Megatron runs interleaved 1F1B (its default microbatch group of p per "
                      "virtual stage)");
  // Megatron-LM's training script (megatron/training/arguments.py, not in the
  // megatron-core package): interleaving without P2P overlap needs p > 2.
  if (meta.stages_per_rank > 1 && meta.pp_degree == 2)
    e.notes.push_back(
        "p = 2: Megatron-LM's training script refuses interleaving with "
        "--no-overlap-p2p-communication (it needs p > 2 without the overlap)");
  if (meta.schedule != own) {
    std::string why;
    try {
      const Plan own_plan =
          plan_compute(Problem{own, meta.pp_degree, meta.num_microbatches, meta.stages_per_rank});
      why = own_plan.ranks == compute_actions(plan).ranks ? "" : " differs";
    } catch (const InputError&) {
      why = " cannot be planned for this shape";
    }
    if (!why.empty())
      e.notes.push_back("Megatron runs its own " + own + " order, not this plan's (" +
                        limits::excerpt(meta.schedule) +
                        "); only the partition and placement "
                        "carry over");
  }
  return e;
}

namespace {

// One shell word: as is when plain, else in double quotes (layout strings
// hold only E, L, t, m, digits, '*', '|', ',' and parentheses).
std::string shell_word(const std::string& w) {
  bool plain = !w.empty();
  for (char c : w)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                      c == '.' || c == '/' || c == '=');
  if (plain) return w;
  std::string out = "\"";
  for (char c : w) {
    if (c == '"' || c == '\\' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  return out + '"';
}

}  // namespace

void write_megatron_export(const MegatronExport& e, std::string_view format, std::ostream& out) {
  if (format == "layout") {
    out << e.layout << '\n';
    return;
  }
  if (format == "json") {
    nlohmann::ordered_json j;
    j["format"] = "pipeplan.megatron";
    j["version"] = 1;
    j["layout"] = e.layout;
    j["args"] = e.args;
    j["alternative_args"] = e.alternative_args;
    j["notes"] = e.notes;
    out << j.dump(2) << '\n';
    return;
  }
  if (format != "args")
    throw InputError("unknown Megatron export format '" + limits::excerpt(format) +
                     "' (args, layout or json)");
  for (std::size_t i = 0; i < e.args.size(); ++i) out << (i ? " " : "") << shell_word(e.args[i]);
  out << '\n';
}

}  // namespace pipeplan
