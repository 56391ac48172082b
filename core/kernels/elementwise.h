// Small elementwise and copy ops used to glue layers (residual add, column splits, row copies).
#pragma once

#include <vector>

#include "core/context.h"

namespace braid {

// y = a + b (same shape); y may alias a or b. The residual connection's forward.
void add(ExecContext& ctx, Tensor& y, const Tensor& a, const Tensor& b);
// y += x (same shape). The residual connection's backward (gradient flows to both branches).
void add_inplace(ExecContext& ctx, Tensor& y, const Tensor& x);
// x = 0 (any dtype), on the context's stream: gradient zeroing in the step.
void zero(ExecContext& ctx, Tensor& x);
// x *= s.
void scale_inplace(ExecContext& ctx, Tensor& x, float s);
// Sum of squares in double (deterministic for a given thread count), for gradient norms.
double sum_squares(ExecContext& ctx, const Tensor& x);
// sum_squares of each tensor (the same values, bit for bit) for many tensors at once: on a GPU
// the host waits once for all of them instead of once per tensor (a gradient norm over every
// parameter).
std::vector<double> sum_squares_each(ExecContext& ctx, const std::vector<Tensor>& xs);

// src: (N, W0 + W1 + ...) -> parts[i]: (N, Wi), the column blocks in order (GPT-2's fused
// q|k|v projection, and later tensor-parallel shards of fused weights).
void split_columns(ExecContext& ctx, const std::vector<Tensor*>& parts, const Tensor& src);
// The conjugate: dst (N, W0 + W1 + ...) from parts[i] (N, Wi).
void concat_columns(ExecContext& ctx, Tensor& dst, const std::vector<const Tensor*>& parts);
// dst = src converted to dst's dtype (f32, bf16, f16; same element count; round to nearest
// even when narrowing): refreshing low-precision weights from f32 masters.
void cast(ExecContext& ctx, Tensor& dst, const Tensor& src);
// Rows [row, row + src.dim(0)) of dst = src (same row size and dtype): appending to a KV cache.
void copy_rows(ExecContext& ctx, Tensor& dst, int64_t row, const Tensor& src);

}  // namespace braid
