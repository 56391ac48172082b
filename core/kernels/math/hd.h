// BRAID_HD marks per-element functions that both backends compile: __host__ __device__ under
// nvcc, plain inline functions for the host compiler. Headers in core/kernels/math/ hold only
// such functions (no braid types beyond plain numbers), so a CUDA kernel and its CPU twin share
// the arithmetic and the CPU tests cover it.
#pragma once

#ifdef __CUDACC__
#define BRAID_HD __host__ __device__ __forceinline__
#else
#define BRAID_HD inline
#endif
