// Element types (f32, bf16, f16, i32, u8) and scalar conversions for the 16-bit floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace braid {

// U8: raw bytes (quantised weights and optimizer states, core/kernels/quantize.h).
enum class DType : uint8_t { F32, BF16, F16, I32, U8 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);         // "f32", "bf16", "f16", "i32", "u8"
std::string_view dtype_safetensors(DType t);  // "F32", "BF16", "F16", "I32", "U8"
// Parses either spelling above; returns false when unknown.
bool parse_dtype(std::string_view s, DType* out);

// bfloat16 storage type: the upper 16 bits of an IEEE float.
struct bf16 {
  uint16_t bits;
};
// IEEE half storage type.
struct f16 {
  uint16_t bits;
};

inline float bf16_to_float(bf16 v) {
  uint32_t u = static_cast<uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays NaN.
inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}

float f16_to_float(f16 v);
f16 float_to_f16(float f);

}  // namespace braid
