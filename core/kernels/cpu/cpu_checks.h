// Argument guards shared by the CPU kernels: device (no CUDA kernels yet) and dtype.
#pragma once

#include "core/tensor.h"

namespace braid::cpu {

// A CUDA tensor can only reach a CPU kernel when the op has no CUDA implementation; say so
// instead of dereferencing device memory.
inline void check_cpu(const Tensor& t, const char* op, const char* name) {
  BRAID_CHECK(t.device().is_cpu(), "{}: {} is on {}, but {} has no CUDA kernel yet", op, name,
              t.device().str(), op);
}

// The kernels' arithmetic is f32: bf16/f16 arguments are widened before this check runs
// (cpu/lowp.h), so what fails here is a non-float dtype (or an f32-only output such as a
// saved statistic given in 16 bits), naming the dtype it got.
inline void check_f32(const Tensor& t, const char* op, const char* name) {
  check_cpu(t, op, name);
  BRAID_CHECK(t.defined(), "{}: {} is undefined", op, name);
  BRAID_CHECK(t.dtype() == DType::F32, "{}: {} has dtype {}; expected f32 here", op, name,
              dtype_name(t.dtype()));
}

}  // namespace braid::cpu
