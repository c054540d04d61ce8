// Buffer and DeviceKind: what every device uses, the CPU one and the CUDA plugin
// (libcutline_cuda.so links this file's object, not make_device's loader).
#include <string_view>

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

}  // namespace cutline::device
