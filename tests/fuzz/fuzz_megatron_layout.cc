// libFuzzer target: Megatron-LM's --pipeline-model-parallel-layout grammar
// (issue 24's `search --layout`). Properties: expand_megatron_layout answers
// or refuses with an InputError, never otherwise, and its expansion stays
// within the documented cap; a layout that expands is checked against a
// profile with exactly its transformer and MTP layers, and a partition it
// yields is a partition of that profile which writes back
// (megatron_layout) to a layout giving the same partition.
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "pipeplan/error.h"
#include "pipeplan/interop.h"
#include "pipeplan/limits.h"
#include "pipeplan/profile.h"

namespace {

using namespace pipeplan;

// The profile a layout describes: E, its t and m layers in order, L.
LayerProfile profile_of(const std::vector<std::string>& stages) {
  int t = 0, m = 0;
  for (const std::string& s : stages)
    for (char c : s) {
      t += c == 't';
      m += c == 'm';
    }
  LayerProfile p;
  p.layers.push_back({"tok_embeddings", 1, 2, 1, 1, {}, {}});
  for (int k = 0; k < t; ++k) p.layers.push_back({"layers." + std::to_string(k), 1, 2, 1, 1, {}, {}});
  for (int k = 0; k < m; ++k) p.layers.push_back({"mtp." + std::to_string(k), 1, 2, 1, 1, {}, {}});
  p.layers.push_back({"output", 1, 2, 1, 1, {}, {}});
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> stages;
  try {
    stages = expand_megatron_layout(text);
  } catch (const InputError&) {
    return 0;  // a bad character, a count past the limits: named
  }
  std::size_t symbols = 0;
  for (const std::string& s : stages) symbols += s.size() + 1;
  fuzz::check(symbols <= static_cast<std::size_t>(limits::kMaxLayers) * 4 + 1, "the expansion passed its cap");
  if (symbols > 64 * size + 4096) return 0;  // bounded, just slow to check further
  const LayerProfile profile = profile_of(stages);
  for (int pp : {1, 2}) {
    Partition part;
    int v = 0;
    try {
      part = partition_from_megatron_layout(profile, text, pp, &v);
    } catch (const InputError&) {
      continue;  // E not first, a count that does not match, stages not a multiple: named
    }
    fuzz::check(static_cast<std::size_t>(std::accumulate(part.begin(), part.end(), 0)) ==
                    profile.size(),
                "the partition does not cover the profile");
    fuzz::check(v * pp == static_cast<int>(part.size()), "stages per rank times pp is not the stages");
    std::string again;
    try {
      again = megatron_layout(profile, part);
    } catch (const InputError& e) {
      // Megatron's own reader accepts E and L in groups megatron_layout keeps
      // whole; a partition read from a layout is one it can write.
      fuzz::fail(std::string("a partition read from a layout does not write back: ") + e.what());
    }
    fuzz::check(partition_from_megatron_layout(profile, again, pp) == part,
                "the written layout gives another partition");
  }
  return 0;
}
