// Upper bounds on plan shapes read from files: far beyond any real pipeline,
// low enough that sizes and stage arithmetic never overflow an int.
#pragma once

namespace pipeplan::io {

inline constexpr int kMaxRanks = 65536;
inline constexpr int kMaxStagesPerRank = 4096;
inline constexpr int kMaxStages = 1 << 20;
inline constexpr int kMaxMicrobatches = 1 << 20;
inline constexpr int kMaxLayers = 1 << 20;

}  // namespace pipeplan::io
