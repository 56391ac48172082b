// Products and sums rounded once each, for math both backends must compute to the same bits:
// nvcc contracts a * b + c into a fused multiply-add unless told not to, the host build (x86-64
// baseline, no FMA) never does.
#pragma once

#include "core/kernels/math/hd.h"

namespace braid::math {

BRAID_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

BRAID_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

}  // namespace braid::math
