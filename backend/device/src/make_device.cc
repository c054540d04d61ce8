// make_device: picks the device at run time. CUDA is used when the build has it and
// cudaGetDeviceCount finds a GPU; otherwise the CPU device runs and the reason is logged.
#include <cstdio>

#include "cpu_device.h"
#include "cuda_device.h"
#include "cutline/device/device.h"

namespace cutline::device {

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.device_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (device_ != nullptr && data_ != nullptr) device_->free(data_);
  device_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

std::string_view to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kAuto:
      return "auto";
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda";
  }
  return "auto";
}

Result<std::unique_ptr<Device>> make_device(const DeviceOptions& options) {
  if (options.kind == DeviceKind::kCpu)
    return make_cpu_device(options.cpu_threads, options.cpu_isa);
#if defined(CUTLINE_WITH_CUDA)
  auto cuda = make_cuda_device();
  if (cuda.ok()) {
    std::fprintf(stderr, "cutline: device %s\n", cuda.value()->description().c_str());
    return std::move(cuda).value();
  }
  if (options.kind == DeviceKind::kCuda) return std::move(cuda).error();
  std::fprintf(stderr, "cutline: CUDA not usable (%s); falling back to CPU\n",
               cuda.error().message.c_str());
#else
  if (options.kind == DeviceKind::kCuda) {
    return make_error(ErrorKind::kUnsupported, "cuda: this build has no CUDA support (no nvcc)");
  }
#endif
  auto cpu = make_cpu_device(options.cpu_threads, options.cpu_isa);
  std::fprintf(stderr, "cutline: device %s\n", cpu->description().c_str());
  return cpu;
}

}  // namespace cutline::device
