// Dropout's per-element rule, shared by the CPU kernel and its CUDA twin (core/kernels/dropout.h):
// which index of the whole tensor an element draws, and its output.
#pragma once

#include <cstdint>

#include "core/kernels/math/counter_rng.h"
#include "core/kernels/math/hd.h"

namespace braid::math {

// Element i of x draws the index it has in the whole tensor: itself, or, when x holds columns
// [col_offset, col_offset + cols) of rows full_cols wide (full_cols > 0), its place there.
BRAID_HD int64_t dropout_index(int64_t i, int64_t cols, int64_t full_cols, int64_t col_offset) {
  return full_cols > 0 ? (i / cols) * full_cols + col_offset + i % cols : i;
}

// x * mask / (1 - p): dropped when the draw of `index` under `base` (hash_combine(seed,
// stream)) is below p; keep_scale = 1 / (1 - p).
BRAID_HD float dropout_value(float x, uint64_t base, int64_t index, float p, float keep_scale) {
  const double u = unit_interval(hash_combine(base, static_cast<uint64_t>(index)));
  return u < p ? 0.0f : x * keep_scale;
}

}  // namespace braid::math
