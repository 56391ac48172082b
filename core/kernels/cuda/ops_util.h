// Helpers for the tensor-level CUDA wrappers (core/kernels/cuda/*_ops.cpp): dtype codes,
// the context's stream, the launch check, scratch tensors from the context's allocator.
#pragma once

#include <cuda_runtime.h>

#include "core/context.h"
#include "core/kernels/cuda/cuda_check.h"

namespace braid::cuda {

inline int code(const Tensor& t) { return static_cast<int>(t.dtype()); }
inline void* stream_of(ExecContext& ctx) { return ctx.stream().handle; }

// After a launcher: a bad launch configuration fails here naming the op.
inline void check_launch(const char* op) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) [[unlikely]]
    throw Error(fmt::format("CUDA kernel launch of {} failed: {} ({})", op, cudaGetErrorString(e),
                            cudaGetErrorName(e)));
}

// A floating dtype (f32, bf16, f16), as the kernels store.
inline void check_float(const Tensor& t, const char* op, const char* name) {
  BRAID_CHECK(t.defined() &&
                  (t.dtype() == DType::F32 || t.dtype() == DType::BF16 || t.dtype() == DType::F16),
              "{}: {} is {}; expected f32, bf16 or f16", op, name,
              t.defined() ? t.str() : std::string("undefined"));
}

}  // namespace braid::cuda
