// Counter-based random numbers: a value depends only on (seed, stream, index), so results do
// not depend on thread count, iteration order or which rank draws them.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/kernels/math/counter_rng.h"
#include "core/tensor.h"

namespace braid {

// SplitMix64 finaliser and the combine of two values: core/kernels/math/counter_rng.h, shared
// with the CUDA kernels (dropout masks).
using math::hash_combine;
using math::mix64;

// FNV-1a of a string, to derive a stream id from a parameter name.
inline uint64_t hash_string(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Uniform in [0, 1) with 53 random bits.
inline double uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
  return math::unit_interval(hash_combine(hash_combine(seed, stream), index));
}

// Fills an f32 tensor with N(0, std^2) draws; element i depends only on (seed, stream, i).
void fill_normal(Tensor& t, float std, uint64_t seed, uint64_t stream);

// A small sequential generator for sampling (generate, tests). State is one integer, so it
// can be saved in a checkpoint.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() { return mix64(state_++); }
  double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

}  // namespace braid
