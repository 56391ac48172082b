// CUDA_CHECK / CUBLAS_CHECK for braid's host code: a failed call throws braid::Error with
// file:line, the call and the library's own error string. Host (.cpp) files only: it includes
// core/error.h, which nvcc does not compile (fmt's consteval format strings).
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

#define CUDA_CHECK(call)                                                                       \
  do {                                                                                         \
    const cudaError_t braid_cuda_err_ = (call);                                                \
    if (braid_cuda_err_ != cudaSuccess) [[unlikely]]                                           \
      ::braid::detail::throw_error(                                                            \
          __FILE__, __LINE__,                                                                  \
          fmt::format("CUDA error in {}: {} ({})", #call, cudaGetErrorString(braid_cuda_err_), \
                      cudaGetErrorName(braid_cuda_err_)));                                     \
  } while (0)

// After a kernel launch: a bad configuration shows up here, not at the next synchronisation.
#define CUDA_CHECK_LAUNCH(what) CUDA_CHECK(cudaGetLastError())
