// Bytes held over a step (memory_meter.h).
#include "exec/memory_meter.h"

#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>

namespace pipeplan::exec::detail {

void MemoryMeter::reportMemoryUsage(void* ptr, std::int64_t size, std::size_t total_allocated,
                                    std::size_t total_reserved, c10::Device device) {
  if (auto* prev = dynamic_cast<c10::MemoryReportingInfoBase*>(previous_.get());
      prev != nullptr && prev->memoryProfilingEnabled())
    prev->reportMemoryUsage(ptr, size, total_allocated, total_reserved, device);
  if (device.type() != device_.type() || (device_.has_index() && device.index() != device_.index()))
    return;
  std::lock_guard<std::mutex> lock(mu_);
  if (size > 0) {
    sizes_[ptr] = size;
    held_ += size;
    peak_ = std::max(peak_, held_);
    return;
  }
  // A free of something allocated before counting began is not ours.
  auto it = sizes_.find(ptr);
  if (it == sizes_.end()) return;
  held_ -= it->second;
  sizes_.erase(it);
}

std::int64_t MemoryMeter::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

std::int64_t MemoryMeter::peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

void MemoryMeter::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = held_;
}

void MemoryMeter::install(const std::shared_ptr<MemoryMeter>& meter) {
  if (meter->installed_) return;
  // Not owned: the reporter below stays alive while it is on the stack.
  meter->previous_ = nullptr;
  if (c10::DebugInfoBase* prev = c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE))
    meter->previous_ = std::shared_ptr<c10::DebugInfoBase>(prev, [](c10::DebugInfoBase*) {});
  c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, meter);
  meter->installed_ = true;
}

void MemoryMeter::uninstall(const std::shared_ptr<MemoryMeter>& meter) {
  if (!meter->installed_) return;
  if (c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) != meter.get()) return;
  c10::ThreadLocalDebugInfo::_pop(c10::DebugInfoKind::PROFILER_STATE);
  meter->installed_ = false;
  meter->previous_.reset();
}

namespace {

struct Silent final : c10::MemoryReportingInfoBase {
  void reportMemoryUsage(void*, std::int64_t, std::size_t, std::size_t, c10::Device) override {}
  bool memoryProfilingEnabled() const override { return false; }
};

}  // namespace

Unmetered::Unmetered()
    : guard_(c10::DebugInfoKind::PROFILER_STATE, [] {
        static const std::shared_ptr<Silent> silent = std::make_shared<Silent>();
        return silent;
      }()) {}

}  // namespace pipeplan::exec::detail
