// The CPU dropout kernel (kept beside cpu_kernels.h so the op is one self-contained file pair).
#pragma once

#include "core/kernels/dropout.h"

namespace braid::cpu {

void dropout_apply(ExecContext& ctx, Tensor& y, const Tensor& x, float p, uint64_t seed,
                   uint64_t stream, DropoutWindow window);

}  // namespace braid::cpu
