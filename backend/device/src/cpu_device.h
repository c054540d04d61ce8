#pragma once
// The CPU device (always built). Internal: callers use make_device().

#include <memory>

#include "cutline/device/device.h"

namespace cutline::device {

std::unique_ptr<Device> make_cpu_device(int32_t n_threads, std::string_view isa);

}  // namespace cutline::device
