// Branch-free float exp and sigmoid that the compiler can vectorise inside `omp simd` loops
// (glibc's expf/tanhf are scalar calls unless built with -ffast-math), and the CPU clones macro.
#pragma once

#include "core/kernels/math/fast_exp.h"

namespace braid::cpu {

// The shared definitions (core/kernels/math/fast_exp.h), also used by the CUDA activations.
using math::exp_f32;
using math::sigmoid_f32;

}  // namespace braid::cpu

// Compute-bound loops are also compiled for AVX2+FMA and AVX-512 (GCC function multi-versioning:
// the loader picks the best clone for the CPU), since the build targets baseline x86-64. About
// 4x on GELU with AVX2 over the SSE2 baseline.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define BRAID_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define BRAID_CPU_CLONES
#endif
