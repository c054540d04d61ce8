#pragma once
// The CUDA device (cuda/cuda_device.cu), compiled only when nvcc exists (CUTLINE_WITH_CUDA).
// Internal: callers use make_device().

#include <memory>

#include "cutline/device/device.h"

namespace cutline::device {

// The first CUDA device, or an error naming why none is usable (no driver, no GPU, init failed).
Result<std::unique_ptr<Device>> make_cuda_device();

}  // namespace cutline::device
