// DType names and IEEE half conversions.
#include "core/dtype.h"

#include <cmath>

namespace braid {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::U8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::U8: return "u8";
  }
  return "?";
}

std::string_view dtype_safetensors(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I32: return "I32";
    case DType::U8: return "U8";
  }
  return "?";
}

bool parse_dtype(std::string_view s, DType* out) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::U8}) {
    if (s == dtype_name(t) || s == dtype_safetensors(t)) {
      *out = t;
      return true;
    }
  }
  if (s == "fp32" || s == "float32") { *out = DType::F32; return true; }
  if (s == "fp16" || s == "float16") { *out = DType::F16; return true; }
  if (s == "bfloat16") { *out = DType::BF16; return true; }
  return false;
}

float f16_to_float(f16 v) {
  const uint32_t sign = (v.bits & 0x8000u) << 16;
  uint32_t exp = (v.bits >> 10) & 0x1f;
  uint32_t mant = v.bits & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

f16 float_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return f16{static_cast<uint16_t>(sign | 0x7e00)};
  if (abs >= 0x477ff000u) return f16{static_cast<uint16_t>(sign | 0x7c00)};  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    const float a = std::fabs(f);
    const int m = static_cast<int>(std::nearbyint(a * 16777216.0f));  // a / 2^-24
    return f16{static_cast<uint16_t>(sign | m)};
  }
  // normal: round to nearest even on the 13 dropped bits
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);
  r -= static_cast<uint32_t>(127 - 15) << 23;
  return f16{static_cast<uint16_t>(sign | (r >> 13))};
}

}  // namespace braid
