// Rotary position embedding, HF Llama convention ("rotate half": pairs (i, i + D/2)).
#pragma once

#include "core/context.h"

namespace braid {

// x: (B, T, H, D), rotated in place; position of row t is pos_offset + t.
// freq_i = theta^(-2i/D) for i in [0, D/2).
void rope_forward(ExecContext& ctx, Tensor& x, int64_t pos_offset, float theta);
// The inverse rotation applied in place to the gradient dx: (B, T, H, D).
void rope_backward(ExecContext& ctx, Tensor& dx, int64_t pos_offset, float theta);

}  // namespace braid
