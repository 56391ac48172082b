// Dequantisation of a tile of a block-wise quantised weight into the GEMM's input dtype, the
// inner loop of the quantised linear (core/kernels/cpu/quantized_linear.cpp): a table lookup
// per code times its block's absmax, written as f32 or rounded to bf16. AVX-512 paths (NF4
// through a 16-entry permute, int8 through a widening convert, bf16 by VCVTNEPS2BF16) when the
// context's ISA allows, scalar otherwise; both give the same bits as dequantize_blockwise.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/kernels/cpu/cpu_isa.h"
#include "core/kernels/quantize.h"

namespace braid::cpu {

// dst (n values of `dt`, f32 or bf16) = code[q[i]] * absmax[i / block] for i in
// [begin, begin + n) of the quantised array. `isa` caps the paths taken. Runs on the calling
// thread (callers parallelise over tiles or parts of one).
void dequantize_tile(CpuIsa isa, void* dst, DType dt, const uint8_t* q, const float* absmax,
                     QuantCode code, int64_t block, int64_t begin, int64_t n);

}  // namespace braid::cpu
