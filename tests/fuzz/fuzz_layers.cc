// libFuzzer target: the layer-profile reader and the partitions of a
// profile. Properties: whatever the reader accepts holds named layers with
// finite costs, 0 <= W <= B; writing it back as CSV (exact numbers) reads to
// the same profile; every balanced partition is a valid split, and on small
// profiles the very split of the exhaustive DP it replaced (least
// bottleneck, then least sum of squares within its tolerance).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "pipeplan/error.h"
#include "pipeplan/profile.h"

namespace {

using namespace pipeplan;

std::string exact(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// The split as pipeplan made it before issue 25, by the O(S n^2) DP over
// prefix sums: the least bottleneck M, then among splits with every stage
// within M's tolerance the least sum of squares (leftmost on ties).
Partition reference_split(const LayerProfile& p, int stages) {
  const std::size_t n = p.size(), S = static_cast<std::size_t>(stages);
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t l = 0; l < n; ++l) prefix[l + 1] = prefix[l] + (p.layers[l].f + p.layers[l].b);
  auto cost = [&](std::size_t b, std::size_t e) { return prefix[e] - prefix[b]; };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(n + 1, inf));
  best[0][0] = 0;
  for (std::size_t s = 1; s <= S; ++s)
    for (std::size_t e = s; e + (S - s) <= n; ++e)
      for (std::size_t b = s - 1; b < e; ++b)
        if (best[s - 1][b] < inf)
          best[s][e] = std::min(best[s][e], std::max(best[s - 1][b], cost(b, e)));
  const double limit = best[S][n] * (1 + 1e-12) + 1e-12;
  std::vector<std::vector<double>> sq(S + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> from(S + 1, std::vector<int>(n + 1, -1));
  sq[0][0] = 0;
  for (std::size_t s = 1; s <= S; ++s)
    for (std::size_t e = s; e + (S - s) <= n; ++e)
      for (std::size_t b = s - 1; b < e; ++b) {
        const double c = cost(b, e);
        if (sq[s - 1][b] == inf || c > limit) continue;
        if (sq[s - 1][b] + c * c < sq[s][e]) {
          sq[s][e] = sq[s - 1][b] + c * c;
          from[s][e] = static_cast<int>(b);
        }
      }
  Partition counts(S);
  std::size_t e = n;
  for (std::size_t s = S; s >= 1; --s) {
    const auto b = static_cast<std::size_t>(from[s][e]);
    counts[s - 1] = static_cast<int>(e - b);
    e = b;
  }
  return counts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  LayerProfile profile;
  try {
    profile = parse_layer_profile(text, "fuzz.csv");
  } catch (const InputError&) {
    return 0;
  }
  fuzz::check(!profile.layers.empty(), "an accepted profile without layers");
  std::string csv = "name,F,B,W,activation\n";
  for (const Layer& l : profile.layers) {
    fuzz::check(!l.name.empty(), "a layer without a name");
    for (double x : {l.f, l.b, l.w, l.activation})
      fuzz::check(std::isfinite(x) && x >= 0, "a non-finite or negative layer cost");
    fuzz::check(l.w <= l.b, "W above B was accepted");
    csv += l.name + "," + exact(l.f) + "," + exact(l.b) + "," + exact(l.w) + "," +
           exact(l.activation) + "\n";
  }
  LayerProfile again;
  try {
    again = parse_layer_profile(csv, "written.csv");
  } catch (const InputError& e) {
    fuzz::fail(std::string("the profile written back does not read: ") + e.what());
  }
  fuzz::check(again.layers == profile.layers, "CSV round trip changed the profile");

  const int n = static_cast<int>(profile.size());
  for (int stages : {1, 2, 3, n / 2, n - 1, n}) {
    if (stages < 1 || stages > n) continue;
    const Partition part = balanced_partition(profile, stages);
    try {
      check_partition(profile, part, stages);
    } catch (const InputError& e) {
      fuzz::fail(std::string("balanced_partition gave an invalid split: ") + e.what());
    }
    if (n <= 48)
      fuzz::check(part == reference_split(profile, stages),
                  "balanced_partition differs from the exhaustive DP's split");
  }
  return 0;
}
