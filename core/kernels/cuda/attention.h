// Launchers of the causal attention kernels (core/kernels/cuda/attention.cu). Pointers are
// device memory; q, k, v, out and the gradients share one storage dtype (code: braid::DType,
// f32/bf16/f16); lse and delta are f32; `stream` is a cudaStream_t.
#pragma once

#include <cstdint>

namespace braid::cuda {

// The largest head dimension the kernels take: a warp keeps up to four rows of it in shared
// memory beside two 32-row tiles, within the 48 KiB every architecture gives a block.
constexpr int64_t kAttentionMaxHeadDim = 2048;

// q, out: (B, Tq, Hq, D); k, v: (B, Tk, Hkv, D); lse: (B, Hq, Tq). 1 <= D <= the maximum,
// Tq <= Tk, Hq a multiple of Hkv (core/kernels/attention.h has the contract).
struct AttnDims {
  int64_t B, Tq, Tk, Hq, Hkv, D;
  int64_t window = 0;  // sliding window: 0 none, w > 0 the last w keys (attention.h)
};

void launch_attention_forward(void* stream, void* out, float* lse, const void* q, const void* k,
                              const void* v, int dtype, AttnDims d);
// dq, dout, out: like q; dk, dv: like k (overwritten); delta: (B, Hq, Tq) f32 scratch.
void launch_attention_backward(void* stream, void* dq, void* dk, void* dv, float* delta,
                               const void* dout, const void* q, const void* k, const void* v,
                               const void* out, const float* lse, int dtype, AttnDims d);

}  // namespace braid::cuda
