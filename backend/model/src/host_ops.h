#pragma once
// Operations some architectures need beyond the Device interface (Gemma's GeGLU, embedding scale
// and soft-caps, sliding-window attention, the RoPE magnitude factor of YaRN / long RoPE), run
// on host memory with plain loops in a fixed order per row (batch invariant like the device ops).
//
// HostView gives the runner host access to device buffers: in place on the CPU device (its
// memory is host memory), through download/upload staging on any other device.
//
// Who calls it: LlamaRunner::forward, only for the architectures and layers that need it.

#include <cstdint>
#include <vector>

#include "cutline/device/device.h"

namespace cutline::model {

class HostView {
 public:
  explicit HostView(device::Device& dev);
  ~HostView();  // writes staged ranges back (see map)
  HostView(const HostView&) = delete;
  HostView& operator=(const HostView&) = delete;

  // A host pointer to `n` floats at device address `p`; with `write_back`, what the caller writes
  // there reaches the device when the view is destroyed.
  float* map(float* p, int64_t n, bool write_back);

 private:
  struct Staged {
    float* device_ptr;
    std::vector<float> host;
    bool write_back;
  };
  device::Device& dev_;
  bool in_place_;
  std::vector<Staged> staged_;
};

void scale_in_place(float* x, int64_t n, float s);
// y = gelu_tanh(gate) * up (y may alias gate).
void geglu_tanh(const float* gate, const float* up, int64_t n, float* y);
// x = cap * tanh(x / cap).
void soft_cap(float* x, int64_t n, float cap);
// Multiplies the first n_rot dims of every head of x ([rows][n_heads * head_dim]) by s.
void scale_rotated(float* x, int64_t rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                   float s);

// Causal paged attention like Device::paged_attention, with a sliding window (window > 0: a
// query at p sees keys in (p - window, p]) and a soft-cap on the scaled scores (softcap > 0).
// `block_tables` and `tokens` are host arrays; q/out/k_cache/v_cache host pointers.
struct WindowedAttention {
  const float* q = nullptr;
  float* out = nullptr;
  const float* k_cache = nullptr;
  const float* v_cache = nullptr;
  const int32_t* block_tables = nullptr;
  const device::AttentionToken* tokens = nullptr;
  int64_t n_tokens = 0;
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0, block_size = 0;
  float scale = 1.0f;
  int32_t window = 0;
  float softcap = 0.0f;
};
void windowed_attention(const WindowedAttention& a);

}  // namespace cutline::model
