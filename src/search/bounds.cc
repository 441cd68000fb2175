// The makespan lower bound of search() (see search.h and docs/search.md).
#include <algorithm>
#include <sstream>

#include "ir/numbers.h"
#include "pipeplan/search.h"

namespace pipeplan {

double makespan_lower_bound(const LayerProfile& profile, int pp_degree, int num_microbatches,
                            double transfer_time, std::string* reason) {
  double total = 0, biggest = 0, chain = 0;
  for (const Layer& l : profile.layers) {
    total += l.f + l.b;
    biggest = std::max(biggest, l.f + l.b);
    chain += l.f + l.i();
  }
  if (!profile.layers.empty()) chain += profile.layers.front().w;
  const double m = num_microbatches;
  // Every layer's work lands on one rank: some rank does at least the
  // average, and at least the heaviest layer's m microbatches. The p-1
  // ranks without the first layer wait at least its F and a transfer before
  // their first action, which the average must absorb too.
  const double head = profile.layers.empty() ? 0.0 : profile.layers.front().f + transfer_time;
  const double balance = std::max((m * total + (pp_degree - 1) * head) / pp_degree, m * biggest);
  // One microbatch must go forward through every layer, then back through
  // every input gradient, then do the first layer's W; the stages are spread
  // over all p ranks, so the chain changes rank at least p-1 times each way.
  const double fill = chain + 2.0 * (pp_degree - 1) * transfer_time;
  if (reason) {
    using detail::format_number;
    if (balance >= fill)
      *reason =
          "busiest rank: max((m x total work + (p-1)(F of layer 0 + transfer)) / p, "
          "m x heaviest layer) = " +
          format_number(balance);
    else
      *reason =
          "one microbatch's F + I chain through every layer + first layer's W + 2(p-1) "
          "transfers = " +
          format_number(fill);
  }
  return std::max(balance, fill);
}

}  // namespace pipeplan
