#pragma once
// Causal paged attention on the CPU device (Device::paged_attention), in its own file so that the
// attention kernel can be tiled and vectorized apart from the matmul kernels, and SwiGLU, which
// shares the softmax's vector exp. Internal to the device module: CpuDevice::paged_attention and
// CpuDevice::swiglu call them.

#include <vector>

#include "cpu_kernels.h"
#include "cutline/device/device.h"
#include "cutline/device/thread_pool.h"

namespace cutline::device::cpu {

// Runs `args` on `pool`; `scratch` holds one reusable float buffer per pool thread.
void paged_attention(const AttentionArgs& args, ThreadPool& pool, const Kernels& kernels,
                     std::vector<std::vector<float>>& scratch);

// y[i] = gate[i] / (1 + exp(-gate[i])) * up[i] for i < n (Device::swiglu), with the attention
// softmax's exp: the same bits on every instruction set.
void swiglu(const Kernels& kernels, const float* gate, const float* up, int64_t n, float* y);

}  // namespace cutline::device::cpu
