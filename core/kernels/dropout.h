// Dropout with counter-based masks: element i is dropped when uniform_at(seed, stream, i) < p,
// so the mask is a pure function of (seed, stream, index). The backward is the same call on
// the gradient (the same mask), and a recomputed forward draws the same mask.
#pragma once

#include <cstdint>

#include "core/context.h"

namespace braid {

// Where x's elements sit in the tensor whose mask is drawn: by default x is that tensor
// (element i draws index i). A tensor-parallel shard holding columns [col_offset, col_offset +
// x's last dim) of rows full_cols wide draws what the whole tensor's element would, so its mask
// is the one-rank mask's columns.
struct DropoutWindow {
  int64_t full_cols = 0;  // 0: x is the whole tensor
  int64_t col_offset = 0;
};

// y = x * mask / (1 - p), mask_i = (uniform_at(seed, stream, index(i)) >= p); y may alias x.
// 0 <= p < 1; same shape.
void dropout_apply(ExecContext& ctx, Tensor& y, const Tensor& x, float p, uint64_t seed,
                   uint64_t stream, DropoutWindow window = {});

}  // namespace braid
