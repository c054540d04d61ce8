#pragma once
// Causal paged attention on the CPU device (Device::paged_attention), in its own file so that the
// attention kernel can be tiled and vectorized apart from the matmul kernels. Internal to the
// device module: CpuDevice::paged_attention calls it.

#include <vector>

#include "cpu_kernels.h"
#include "cutline/device/device.h"
#include "cutline/device/thread_pool.h"

namespace cutline::device::cpu {

// Runs `args` on `pool`; `scratch` holds one reusable float buffer per pool thread.
void paged_attention(const AttentionArgs& args, ThreadPool& pool, const Kernels& kernels,
                     std::vector<std::vector<float>>& scratch);

}  // namespace cutline::device::cpu
