// Helpers for MPI tests: the process's World and tensors with exactly known contents.
#pragma once

#include <cmath>
#include <functional>

#include "core/dtype.h"
#include "core/tensor.h"
#include "parallel/world.h"

namespace braid::test {

World& world();

// A value per (rank, element) that stays exact in every dtype through sums of up to 4 ranks
// (small integers; bf16 holds integers up to 256 exactly).
inline float known_value(DType t, int rank, int64_t i) {
  if (t == DType::BF16 || t == DType::F16) return static_cast<float>((rank + 1) + i % 5);
  return static_cast<float>((rank + 1) * 1000 + i % 997);
}

inline float read_elem(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32:
      return t.data<float>()[i];
    case DType::I32:
      return static_cast<float>(t.data<int32_t>()[i]);
    case DType::U8:
      return static_cast<float>(t.data<uint8_t>()[i]);
    case DType::BF16:
      return bf16_to_float(t.data<bf16>()[i]);
    case DType::F16:
      return f16_to_float(t.data<f16>()[i]);
  }
  return NAN;
}

inline void write_elem(const Tensor& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::F32:
      t.data<float>()[i] = v;
      break;
    case DType::I32:
      t.data<int32_t>()[i] = static_cast<int32_t>(v);
      break;
    case DType::U8:
      t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      break;
    case DType::BF16:
      t.data<bf16>()[i] = float_to_bf16(v);
      break;
    case DType::F16:
      t.data<f16>()[i] = float_to_f16(v);
      break;
  }
}

// Rounds v to what dtype t stores.
inline float round_to(DType t, float v) {
  switch (t) {
    case DType::BF16:
      return bf16_to_float(float_to_bf16(v));
    case DType::F16:
      return f16_to_float(float_to_f16(v));
    case DType::I32:
    case DType::U8:
      return std::trunc(v);
    case DType::F32:
      return v;
  }
  return v;
}

inline Tensor filled(DType t, int64_t n, const std::function<float(int64_t)>& f) {
  Tensor x = Tensor::empty({n}, t);
  for (int64_t i = 0; i < n; ++i) write_elem(x, i, f(i));
  return x;
}

// Elements of t that differ from expected(i) (exact comparison: every test value is exact).
inline int64_t count_wrong(const Tensor& t, const std::function<float(int64_t)>& expected) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < t.numel(); ++i) wrong += read_elem(t, i) != expected(i);
  return wrong;
}

}  // namespace braid::test
