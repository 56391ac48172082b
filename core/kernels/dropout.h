// Dropout with counter-based masks: element i is dropped when uniform_at(seed, stream, i) < p,
// so the mask is a pure function of (seed, stream, index). The backward is the same call on
// the gradient (the same mask), and a recomputed forward draws the same mask.
#pragma once

#include <cstdint>

#include "core/context.h"

namespace braid {

// y = x * mask / (1 - p), mask_i = (uniform_at(seed, stream, i) >= p); y may alias x.
// 0 <= p < 1; same shape.
void dropout_apply(ExecContext& ctx, Tensor& y, const Tensor& x, float p, uint64_t seed,
                   uint64_t stream);

}  // namespace braid
