// The counter hash behind braid's random numbers (core/random.h) and dropout masks: a value
// depends only on (seed, stream, index), so the CPU and CUDA kernels draw the same bits.
#pragma once

#include <cstdint>

#include "core/kernels/math/hd.h"

namespace braid::math {

// SplitMix64 finaliser: a good 64-bit mix of one integer.
BRAID_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

BRAID_HD uint64_t hash_combine(uint64_t a, uint64_t b) { return mix64(a ^ mix64(b)); }

// Uniform in [0, 1) from the top 53 bits of a hash (exact in a double).
BRAID_HD double unit_interval(uint64_t hash) { return static_cast<double>(hash >> 11) * 0x1.0p-53; }

}  // namespace braid::math
