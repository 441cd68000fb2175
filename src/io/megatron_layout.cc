// Megatron-LM in: a --pipeline-model-parallel-layout string, expanded as
// Megatron's parse_str_to_list does and read back as a layer partition.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/limits.h"

namespace pipeplan {
namespace {

// Symbols a layout may expand to: every layer and a stage separator each,
// with room to spare; a count past it is refused before it is expanded.
constexpr std::size_t kMaxExpanded = static_cast<std::size_t>(limits::kMaxLayers) * 4;

std::string where(std::string_view layout) { return "layout '" + limits::excerpt(layout) + "': "; }

// The decimal count at s[i..]; i moves past it. Refuses counts that would
// expand past kMaxExpanded.
std::size_t read_count(std::string_view s, std::size_t& i, std::size_t unit,
                       std::string_view layout) {
  std::size_t n = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    n = n * 10 + static_cast<std::size_t>(s[i] - '0');
    if (n * std::max<std::size_t>(unit, 1) > kMaxExpanded)
      throw InputError(where(layout) + "a repeat count expands past the supported " +
                       std::to_string(kMaxExpanded) + " symbols");
    ++i;
  }
  return n;
}

bool count_follows(std::string_view s, std::size_t i) {
  return i + 1 < s.size() && s[i] == '*' && std::isdigit(static_cast<unsigned char>(s[i + 1]));
}

void append_repeated(std::string& out, std::string_view piece, std::size_t n,
                     std::string_view layout) {
  if (out.size() + piece.size() * n > kMaxExpanded)
    throw InputError(where(layout) + "expands past the supported " + std::to_string(kMaxExpanded) +
                     " symbols");
  for (std::size_t k = 0; k < n; ++k) out.append(piece);
}

}  // namespace

std::vector<std::string> expand_megatron_layout(std::string_view layout) {
  if (layout.size() > kMaxExpanded)
    throw InputError(where(layout) + "longer than the supported " + std::to_string(kMaxExpanded) +
                     " characters");
  std::string s;
  for (char c : layout)
    if (c != ',') s += c;  // cosmetic commas
  // "(ab|cd)*2" -> "ab|cdab|cd": the first ')' closes, no nesting (as the
  // regex \(([^)]+)\)\*(\d+) reads it).
  std::string unrolled;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '(') {
      const std::size_t close = s.find(')', i + 1);
      if (close != std::string::npos && close > i + 1 && count_follows(s, close + 1)) {
        const std::string_view piece = std::string_view(s).substr(i + 1, close - i - 1);
        std::size_t j = close + 2;
        const std::size_t n = read_count(s, j, piece.size(), layout);
        append_repeated(unrolled, piece, n, layout);
        i = j;
        continue;
      }
    }
    unrolled += s[i++];
  }
  // "t*3" -> "ttt" (any character, as (.)\*(\d+) reads it).
  std::string flat;
  for (std::size_t i = 0; i < unrolled.size();) {
    if (count_follows(unrolled, i + 1)) {
      std::size_t j = i + 2;
      const std::size_t n = read_count(unrolled, j, 1, layout);
      append_repeated(flat, std::string_view(unrolled).substr(i, 1), n, layout);
      i = j;
      continue;
    }
    flat += unrolled[i++];
  }
  std::vector<std::string> stages(1);
  for (std::size_t i = 0; i < flat.size(); ++i) {
    const char c = flat[i];
    if (c == '|') {
      stages.emplace_back();
    } else if (c == 'E' || c == 'L' || c == 't' || c == 'm') {
      stages.back() += c;
    } else {
      throw InputError(where(layout) + "invalid layer character '" +
                       limits::excerpt(std::string_view(&flat[i], 1)) +
                       "' (Megatron's are E embedding, t transformer layer, m MTP, L loss; "
                       "'|' between stages)");
    }
  }
  return stages;
}

namespace {

// Megatron's validate_layer_layout (megatron-core 0.16.1,
// megatron/core/transformer/pipeline_parallel_layer_layout.py), on the
// expanded stages: stage k is virtual stage k / p of pipeline rank k mod p
// (PipelineParallelLayerLayout.__init__), the flat order is the stage order.
void validate_layer_layout(const std::vector<std::string>& stages, int pp_degree, long long t,
                           long long mtp, const std::string& at) {
  std::string all;
  for (const std::string& st : stages) all += st;
  const auto count = [](const std::string& s, char c) { return std::count(s.begin(), s.end(), c); };
  if (all.empty() || all.front() != 'E')
    throw InputError(at + "the first layer must be the embedding E");
  if (all.back() != 'L') throw InputError(at + "the last layer must be the loss L");
  if (count(all, 'E') != 1) throw InputError(at + "the embedding E must appear exactly once");
  if (count(all, 'L') != 1) throw InputError(at + "the loss L must appear exactly once");
  for (const auto& [c, have] : {std::pair<char, long long>{'t', t}, {'m', mtp}})
    if (count(all, c) != have)
      throw InputError(at + "holds " + std::to_string(count(all, c)) + " '" + c +
                       "' layers, but the profile has " + std::to_string(have) +
                       (c == 't' ? " transformer layers" : " MTP layers"));
  const std::size_t first_m = all.find('m');
  if (first_m != std::string::npos && all.find('t', first_m) != std::string::npos)
    throw InputError(at + "transformer layers t must come before the MTP layers m");
  // The MTP rules: only in the last virtual stage of a rank, all in one stage.
  const std::size_t p = static_cast<std::size_t>(pp_degree);
  const std::size_t v = stages.size() / p;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const long long here = count(stages[k], 'm');
    if (here == 0) continue;
    if (k / p + 1 < v)
      throw InputError(at + "stage " + std::to_string(k) + " (virtual stage " +
                       std::to_string(k / p) + " of rank " + std::to_string(k % p) +
                       ") holds MTP layers: Megatron keeps MTP in the last virtual stage of a "
                       "rank (" +
                       std::to_string(v) + " per rank here)");
    if (here != mtp)
      throw InputError(at + "stage " + std::to_string(k) + " holds " + std::to_string(here) +
                       " of the " + std::to_string(mtp) +
                       " MTP layers: Megatron puts all of them in one virtual stage");
  }
}

}  // namespace

Partition partition_from_megatron_layout(const LayerProfile& profile, std::string_view layout,
                                         int pp_degree, int* stages_per_rank) {
  const std::vector<std::string> stages = expand_megatron_layout(layout);
  const std::string at = where(layout);
  if (pp_degree < 1) throw InputError(at + "the pipeline size must be at least 1");
  // PipelineParallelLayerLayout.__init__'s check, then validate_layer_layout's.
  if (stages.size() % static_cast<std::size_t>(pp_degree) != 0)
    throw InputError(at + std::to_string(stages.size()) +
                     " stages are not a multiple of the pipeline size " +
                     std::to_string(pp_degree));
  const std::vector<char> sym = megatron_symbols(profile);
  const auto have = [&](char c) { return std::count(sym.begin(), sym.end(), c); };
  validate_layer_layout(stages, pp_degree, have('t'), have('m'), at);
  // Each symbol takes its profile layers: E and L their whole groups (none
  // when the profile has no such layer), t and m one each; the final norm of
  // Megatron's MTP order (n) rides with the last t.
  const long long e_layers = have('E'), l_layers = have('L'), n_layers = have('n');
  long long t_left = have('t');
  Partition part;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    long long n = 0;
    for (char c : stages[k]) {
      n += c == 'E' ? e_layers : c == 'L' ? l_layers : 1;
      if (c == 't' && --t_left == 0) n += n_layers;
    }
    if (n == 0)
      throw InputError(at + "stage " + std::to_string(k) + " ('" + limits::excerpt(stages[k]) +
                       "') holds no layer of the profile; pipeplan gives every stage at least one");
    part.push_back(static_cast<int>(n));
  }
  if (stages_per_rank) *stages_per_rank = static_cast<int>(stages.size()) / pp_degree;
  return part;
}

std::string megatron_microbatch_refusal(int pp_degree, int stages_per_rank, int num_microbatches) {
  // Megatron interleaves when p > 1 and v > 1 (schedules.py
  // get_forward_backward_func); forward_backward_pipelining_with_interleaving
  // then requires p <= N <= m and m % N == 0 or >= p, with N =
  // microbatch_group_size_per_vp_stage, which model_parallel_config.py sets
  // to p when not given (pipeplan writes no group size): p <= m, m % p == 0.
  if (pp_degree < 2 || stages_per_rank < 2) return {};
  const int p = pp_degree, m = num_microbatches;
  if (m < p)
    return "Megatron's interleaved 1F1B needs at least p microbatches (its group of p per "
           "virtual stage must range in [p, m]), got p = " +
           std::to_string(p) + ", m = " + std::to_string(m);
  if (m % p != 0)
    return "Megatron's interleaved 1F1B needs m % p == 0 or a remainder >= p (its group of p "
           "microbatches per virtual stage), got p = " +
           std::to_string(p) + ", m = " + std::to_string(m) + " (remainder " +
           std::to_string(m % p) + "): use a multiple of " + std::to_string(p) + " microbatches";
  return {};
}

}  // namespace pipeplan
