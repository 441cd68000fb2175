#pragma once
namespace pipeplan {
/// pipeplan's version string.
inline constexpr const char* kVersion = "0.1.0";
}  // namespace pipeplan
