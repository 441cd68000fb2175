// Executor internals: bytes held on a device over a step, from LibTorch's
// allocator reports (the CPU allocator and CUDA's caching allocator report
// every allocation and free to the thread's memory-reporting debug info,
// the hook torch's profiler uses). The Tracer installs one per step. Not
// installed.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace pipeplan::exec::detail {

class MemoryMeter final : public c10::MemoryReportingInfoBase {
 public:
  explicit MemoryMeter(c10::Device device) : device_(device) {}

  void reportMemoryUsage(void* ptr, std::int64_t size, std::size_t total_allocated,
                         std::size_t total_reserved, c10::Device device) override;
  bool memoryProfilingEnabled() const override { return true; }

  /// Bytes allocated on the device while installed and not freed since.
  std::int64_t held() const;
  /// The most held since reset_peak().
  std::int64_t peak() const;
  void reset_peak();

  /// Starts counting on this thread (and the autograd threads it starts);
  /// a reporter already there (torch's profiler) still gets every report.
  static void install(const std::shared_ptr<MemoryMeter>& meter);
  /// Stops counting on this thread, when `meter` is the one installed.
  static void uninstall(const std::shared_ptr<MemoryMeter>& meter);

 private:
  c10::Device device_;
  mutable std::mutex mu_;
  std::int64_t held_ = 0, peak_ = 0;
  std::unordered_map<void*, std::int64_t> sizes_;  // live allocations counted
  std::shared_ptr<c10::DebugInfoBase> previous_;
  bool installed_ = false;
};

/// While alive, this thread's allocations are not reported: the host
/// copies an OFFLOAD makes on a CPU rank are host memory, not the device's.
class Unmetered {
 public:
  Unmetered();

 private:
  c10::DebugInfoGuard guard_;
};

}  // namespace pipeplan::exec::detail
