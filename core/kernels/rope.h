// Rotary position embedding, HF Llama convention ("rotate half": pairs (i, i + D/2)).
#pragma once

#include "core/context.h"
#include "core/rope_scaling.h"

namespace braid {

// x: (B, T, H, D), rotated in place; position of row t is pos_offset + t. Pair i turns by
// position * rope_inv_freq(rope, i, D) (core/kernels/rope_freq.h: theta^(-2i/D), scaled by
// the rope type), and is multiplied by rope_attention_scaling(rope) (1 but for yarn).
void rope_forward(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope);
// The transpose of that map applied in place to the gradient dx: (B, T, H, D).
void rope_backward(ExecContext& ctx, Tensor& dx, int64_t pos_offset, const RopeScaling& rope);

}  // namespace braid
