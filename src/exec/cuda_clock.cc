// cuda_device_clock(): compute times from CUDA events. Compiled with CUDA
// only (PIPEPLAN_EXEC_CUDA, set when LibTorch has torch_cuda); elsewhere the
// factory returns null and the tracer keeps host times.
#include <chrono>
#include <memory>
#include <vector>

#include "pipeplan/exec/trace.h"

#ifdef PIPEPLAN_EXEC_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pipeplan::exec {

#ifdef PIPEPLAN_EXEC_CUDA
namespace {

double host_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One reference event per step, synchronised once so that its completion has
// a host time; every mark is then reference + elapsed time on the device.
class CudaClock : public DeviceClock {
 public:
  explicit CudaClock(int device) : device_(static_cast<c10::DeviceIndex>(device)) {}

  void begin_step(double /*host*/) override {
    c10::cuda::CUDAGuard guard(device_);
    marks_.clear();
    ref_ = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
    ref_->record(c10::cuda::getCurrentCUDAStream(device_));
    ref_->synchronize();
    ref_host_ = host_ms();
  }

  void mark(std::size_t /*index*/, bool /*end*/) override {
    c10::cuda::CUDAGuard guard(device_);
    marks_.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
    marks_.back()->record(c10::cuda::getCurrentCUDAStream(device_));
  }

  std::vector<double> resolve() override {
    std::vector<double> out;
    out.reserve(marks_.size());
    for (auto& e : marks_) {
      e->synchronize();
      out.push_back(ref_host_ + static_cast<double>(ref_->elapsed_time(*e)));
    }
    return out;
  }

 private:
  c10::DeviceIndex device_;
  std::unique_ptr<at::cuda::CUDAEvent> ref_;
  double ref_host_ = 0.0;
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> marks_;
};

}  // namespace

std::shared_ptr<DeviceClock> cuda_device_clock(int device_index) {
  return std::make_shared<CudaClock>(device_index);
}
#else
std::shared_ptr<DeviceClock> cuda_device_clock(int /*device_index*/) { return nullptr; }
#endif

}  // namespace pipeplan::exec
