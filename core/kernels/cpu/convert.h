// Element-wise conversions between f32 and the 16-bit float storage types (bf16, f16), with
// the path chosen by the context's instruction-set level (core/kernels/cpu/cpu_isa.h): the
// kernels' low-precision paths widen and narrow through these.
#pragma once

#include <cstdint>
#include <string>

#include "core/context.h"
#include "core/dtype.h"

namespace braid::cpu {

// The conversion paths, from plain C++ to native bf16 instructions.
enum class ConvertIsa : uint8_t {
  Scalar,      // core/dtype.h's float_to_bf16 / float_to_f16, one element at a time
  Avx2,        // AVX2 integer rounding for bf16, F16C for f16 (bit-identical to Scalar)
  Avx512Bf16,  // AVX-512F widening, VCVTNEPS2BF16 narrowing (flushes bf16 subnormals to 0)
};

const char* convert_isa_name(ConvertIsa isa);  // "scalar", "avx2", "avx512_bf16"
// The instruction-set level a path needs.
CpuIsa convert_isa_level(ConvertIsa isa);
// Whether this CPU can run `isa`.
inline bool convert_isa_supported(ConvertIsa isa) {
  return cpu_isa_supported(convert_isa_level(isa));
}
// The fastest path level `level` allows: what the kernels of a context at that level use.
ConvertIsa convert_path(CpuIsa level);
// One line for the training log: which conversion path and why (e.g. no AVX512_BF16 here).
std::string convert_isa_description(CpuIsa level);

// dst[i] = (float)src[i] for n elements of `src_dtype` (f32, bf16 or f16). Runs on the
// calling thread; `isa` must be supported.
void widen_to_f32(ConvertIsa isa, DType src_dtype, const void* src, float* dst, int64_t n);
// dst[i] = round-to-nearest-even(src[i]) into `dst_dtype` (f32, bf16 or f16).
void narrow_from_f32(ConvertIsa isa, DType dst_dtype, const float* src, void* dst, int64_t n);

// The same on the path of the context's level, split over the OpenMP threads when large and
// not already inside a parallel region.
void widen_to_f32(const ExecContext& ctx, DType src_dtype, const void* src, float* dst, int64_t n);
void narrow_from_f32(const ExecContext& ctx, DType dst_dtype, const float* src, void* dst,
                     int64_t n);

}  // namespace braid::cpu
