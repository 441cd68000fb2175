// SimResult::transfers in (start, source) order without sorting them all.
// Each pair end records the transfers it sends in start order already: a
// pair (rendezvous) or a rank (serial) runs its transfers one at a time in
// posting order, which is list order on the sending rank. Eager transfers
// and compute-only values usually arrive in order too; an end whose run is
// not sorted is sorted on its own. The list is then a merge of one sorted
// run per end, through a tournament tree: log2(ends) comparisons per transfer
// (ends are a few per rank, whatever the number of microbatches).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "sim/engine.h"

namespace pipeplan::detail {

namespace {

// The order of transfers: start, then source, then destination. A start is
// never negative, so its bit pattern orders like its value, and start and
// source compare as one 128-bit number. Only compute-only plans can tie on
// both (an OVERLAP_F_B produces two values); their destination decides.
struct Key {
  unsigned __int128 time_src;  // start bits << 64 | source rank << 32 | index
  std::uint64_t dst;           // destination rank << 32 | index (compute-only)
  bool operator<(const Key& o) const {
    return time_src < o.time_src || (time_src == o.time_src && dst < o.dst);
  }
};

std::uint64_t pack(int rank, int index) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(rank)) << 32) |
         static_cast<std::uint32_t>(index);
}

unsigned __int128 time_src(double start, int src_rank, int src_index) {
  std::uint64_t bits;
  const double t = start + 0.0;  // -0 -> +0
  std::memcpy(&bits, &t, sizeof bits);
  return (static_cast<unsigned __int128>(bits) << 64) | pack(src_rank, src_index);
}

}  // namespace

void Engine::add_hop(int end, const Hop& hop) {
  HopEnd& e = hop_ends_[static_cast<std::size_t>(end)];
  if (e.fill == kHopBlock) {
    // Blocks are left uninitialised: pages are touched as hops land.
    e.blocks.push_back(static_cast<std::uint32_t>(hop_blocks_.size()));
    hop_blocks_.emplace_back(new Hop[kHopBlock]);
    e.fill = 0;
  }
  Hop* block = hop_blocks_[e.blocks.back()].get();
  if (e.fill + 8 < kHopBlock) __builtin_prefetch(block + e.fill + 8, 1);  // ends take turns
  block[e.fill++] = hop;
}

void Engine::order_transfers() {
  // The receiving index: the RECV, or in a compute-only plan the consumer.
  auto dst_index = [&](const Hop& h) {
    const KeyState& k = keys_[h.value / 2];
    if (compute_only_) return h.value % 2 == 0 ? k.f_at : k.bi_at;
    return k.recv_at[h.value % 2];
  };
  auto before = [&](const Hop& x, const Hop& y) {
    if (x.start != y.start) return x.start < y.start;
    if (x.src_index != y.src_index) return x.src_index < y.src_index;
    return dst_index(x) < dst_index(y);
  };
  // One run per end: its blocks in order, or a sorted copy if out of order.
  // A block is released as soon as the merge is past it, so the list grows
  // into memory the hops give back.
  struct Span {
    const Hop* first;
    const Hop* last;
    std::unique_ptr<Hop[]>* block;  // released when done (null: a sorted copy)
  };
  struct Run {
    std::vector<Span> spans;
    std::size_t span = 0;
    const Hop* at = nullptr;
    const Hop* end = nullptr;
    int src = 0, dst = 0;
  };
  std::vector<Run> runs;
  std::vector<std::vector<Hop>> sorted_copies;
  std::size_t total = 0;
  for (std::size_t e = 0; e < hop_ends_.size(); ++e) {
    const HopEnd& end = hop_ends_[e];
    if (end.blocks.empty()) continue;
    Run run;
    run.src = ends_[e].rank;
    run.dst = ends_[e ^ 1].rank;
    bool sorted = true;
    const Hop* prev = nullptr;
    for (std::size_t b = 0; b < end.blocks.size(); ++b) {
      const Hop* first = hop_blocks_[end.blocks[b]].get();
      const Hop* last = first + (b + 1 == end.blocks.size() ? end.fill : kHopBlock);
      for (const Hop* h = first; h != last && sorted; ++h) {
        if (prev && before(*h, *prev)) sorted = false;
        prev = h;
      }
      run.spans.push_back({first, last, &hop_blocks_[end.blocks[b]]});
      total += static_cast<std::size_t>(last - first);
    }
    if (!sorted) {
      std::vector<Hop> copy;
      for (const Span& span : run.spans) {
        copy.insert(copy.end(), span.first, span.last);
        span.block->reset();
      }
      std::sort(copy.begin(), copy.end(), before);
      sorted_copies.push_back(std::move(copy));
      const std::vector<Hop>& c = sorted_copies.back();
      run.spans = {{c.data(), c.data() + c.size(), nullptr}};
    }
    run.at = run.spans[0].first;
    run.end = run.spans[0].last;
    runs.push_back(std::move(run));
  }
  result_.transfers.reserve(total);
  if (runs.empty()) return;

  // Leaves 0..width-1 (runs past the last are empty); loser[n] holds the
  // leaf that lost at inner node n, the overall winner is kept apart.
  std::size_t width = 1;
  while (width < runs.size()) width *= 2;
  const Key kDone{~static_cast<unsigned __int128>(0), ~std::uint64_t{0}};  // after every start
  std::vector<Key> head(width, kDone);
  auto load = [&](std::size_t leaf) {
    const Run& r = runs[leaf];
    if (r.at == r.end) {
      head[leaf] = kDone;
      return;
    }
    const Hop& h = *r.at;
    // The records a later transfer of this run is completed from (a run may
    // win several times in a row, so the head's own would come too late).
    if (r.at + 4 < r.end) {
      const std::uint32_t value = r.at[4].value;
      __builtin_prefetch(&keys_[value / 2]);
      __builtin_prefetch(&keys_[producer_key(value / 2, value % 2 == 0)]);
    }
    head[leaf] =
        Key{time_src(h.start, r.src, h.src_index), compute_only_ ? pack(r.dst, dst_index(h)) : 0};
  };
  for (std::size_t leaf = 0; leaf < runs.size(); ++leaf) load(leaf);
  std::vector<std::size_t> loser(width, 0);
  std::vector<std::size_t> winner(2 * width);
  for (std::size_t leaf = 0; leaf < width; ++leaf) winner[width + leaf] = leaf;
  for (std::size_t n = width - 1; n >= 1; --n) {
    const std::size_t a = winner[2 * n], b = winner[2 * n + 1];
    const bool b_first = head[b] < head[a];
    winner[n] = b_first ? b : a;
    loser[n] = b_first ? a : b;
  }
  std::size_t w = winner[1];
  for (std::size_t n_out = 0; n_out < total; ++n_out) {
    Run& r = runs[w];
    const Hop& h = *r.at;
    const std::size_t k = h.value / 2;
    const bool fwd = h.value % 2 == 0;
    // The producer sits next to the sender's stage, the consumer is the
    // receiver's compute of the same (stage, microbatch).
    const KeyState& consumer = keys_[k];
    const KeyState& producer = keys_[producer_key(k, fwd)];
    const int consumer_index = fwd ? consumer.f_at : consumer.bi_at;
    result_.transfers.push_back(Transfer{
        r.src, h.src_index, r.dst, compute_only_ ? consumer_index : consumer.recv_at[fwd ? 0 : 1],
        fwd ? producer.f_at : producer.bi_at, consumer_index, h.start, h.start + hop_time(k)});
    if (++r.at == r.end) {
      if (r.spans[r.span].block) r.spans[r.span].block->reset();
      if (++r.span < r.spans.size()) {
        r.at = r.spans[r.span].first;
        r.end = r.spans[r.span].last;
      }
    }
    if (r.at + 8 < r.end) __builtin_prefetch(r.at + 8);  // runs take turns: too many streams
    load(w);
    for (std::size_t n = (width + w) / 2; n >= 1; n /= 2) {
      const std::size_t l = loser[n];
      const bool swap = head[l] < head[w];
      loser[n] = swap ? w : l;
      w = swap ? l : w;
    }
  }
}

}  // namespace pipeplan::detail
