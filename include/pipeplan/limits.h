// The one set of size limits: the planner, every reader and the verifier
// refuse the same shapes, up front, with a message naming the limit. They are
// far beyond any real pipeline and low enough that a plan at the limit fits
// in a few GB and no count or index overflows an int. See docs/robustness.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pipeplan::limits {

/// Ranks (pp_degree), and rows of a CSV plan.
inline constexpr int kMaxRanks = 65536;
/// Stages per rank (v).
inline constexpr int kMaxStagesPerRank = 4096;
/// Stages in all (pp_degree x stages_per_rank); also bounds a stage number.
inline constexpr int kMaxStages = 1 << 20;
/// Layers of a layer profile (and of a plan's partition).
inline constexpr int kMaxLayers = 1 << 20;
/// Microbatches; also bounds a microbatch number.
inline constexpr int kMaxMicrobatches = 1 << 20;
/// stages x microbatches. Each (stage, microbatch) costs 2-3 compute actions
/// and up to 4 SEND/RECV, so a whole plan at the limit holds at most ~29M
/// actions (about 1 GB through plan, lower and verify).
inline constexpr long long kMaxStageMicrobatches = 1LL << 22;
/// Actions in one plan file.
inline constexpr std::size_t kMaxActions = std::size_t{1} << 25;
/// Bytes of one input file (plans, stage costs, profiles, traces).
inline constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;
/// Nesting of JSON objects and arrays in any input document (a plan is 4
/// deep, a Chrome trace holding one 6): deeper is refused while reading.
inline constexpr int kMaxJsonDepth = 64;
/// Characters of user text quoted back in one error message.
inline constexpr std::size_t kMaxQuoted = 64;
/// Largest prefetch cap (--prefetch, prefetch=): receives posted ahead.
inline constexpr int kMaxPrefetch = 1 << 30;
/// Largest transfer size (--bytes, bytes=), in bytes.
inline constexpr double kMaxTransferBytes = 1e18;
/// Longest time limit of a search (--time-limit, time_limit=), in seconds.
inline constexpr double kMaxTimeLimit = 86400;
/// Columns of a text timeline (render --text, show, plan -f timeline).
inline constexpr int kMaxTextColumns = 100000;
/// Characters of one text timeline in all (rows x columns): 32 MiB.
inline constexpr double kMaxTextChars = 1 << 25;
/// Compute actions one simulated picture draws (render --svg and
/// --chrome-trace, SimResult.to_svg() and .to_chrome_trace()): ~300 MB of
/// Chrome trace JSON, more than Perfetto's viewer loads comfortably.
inline constexpr std::size_t kMaxDrawnActions = std::size_t{1} << 20;
/// Width of an SVG timeline, in pixels.
inline constexpr double kMaxSvgWidth = 1e7;
/// Largest duration or cost of one action or transfer, in time units (after
/// every multiplier): sums over any plan stay finite and exact enough.
inline constexpr double kMaxCost = 1e12;
/// Longest microbatch over the length its costs are stated at
/// (CostModel::length_ratio; docs/lengths.md).
inline constexpr double kMaxLengthRatio = 1e4;

/// Why a shape exceeds a limit ("pp_degree 70000 is more than the supported
/// 65536 ranks"), or "" when it fits. Arguments are the values as given
/// (not yet narrowed to int), each at least 1.
std::string shape_problem(long long pp_degree, long long stages_per_rank,
                          long long num_microbatches);

/// `text` for an error message: whole when short, else its first kMaxQuoted
/// characters + "... (N bytes)"; control bytes (ESC, CR, NUL, ..) are
/// escaped as \xNN, so quoted text cannot move the cursor or forge a line.
std::string excerpt(std::string_view text);

}  // namespace pipeplan::limits
