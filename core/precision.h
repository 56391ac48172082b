// Precision: the storage of weights and activations for compute in a training run
// (train.precision), and its element type.
#pragma once

#include <array>

#include "core/config_fields.h"
#include "core/dtype.h"

namespace braid {

enum class Precision { FP32, BF16, FP16 };

constexpr std::array<EnumName<Precision>, 3> config_enum_names(Precision) {
  return {{{Precision::FP32, "fp32"}, {Precision::BF16, "bf16"}, {Precision::FP16, "fp16"}}};
}

// The element type of p: f32, bf16 or f16.
constexpr DType precision_dtype(Precision p) {
  switch (p) {
    case Precision::FP32:
      return DType::F32;
    case Precision::BF16:
      return DType::BF16;
    case Precision::FP16:
      return DType::F16;
  }
  return DType::F32;
}

// Bytes of one element of p (fp32: 4, bf16/fp16: 2).
constexpr int precision_bytes(Precision p) { return p == Precision::FP32 ? 4 : 2; }

}  // namespace braid
