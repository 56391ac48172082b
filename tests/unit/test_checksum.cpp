// braid-mix64-v1 checksum: chunking independence and sensitivity to any change.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/checksum.h"

namespace braid {
namespace {

std::vector<unsigned char> pattern(size_t n) {
  std::vector<unsigned char> v(n);
  uint32_t x = 12345;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

TEST(Checksum, ChunkingDoesNotChangeResult) {
  const auto data = pattern(1000);
  const uint64_t whole = checksum64(data.data(), data.size());
  for (size_t chunk : {1u, 3u, 7u, 31u, 32u, 33u, 100u, 999u}) {
    Checksum64 h;
    for (size_t i = 0; i < data.size(); i += chunk)
      h.update(data.data() + i, std::min(chunk, data.size() - i));
    EXPECT_EQ(h.digest(), whole) << "chunk " << chunk;
  }
}

TEST(Checksum, EveryBitFlipAndLengthChangesIt) {
  auto data = pattern(77);  // stripes, a tail word and tail bytes
  const uint64_t base = checksum64(data.data(), data.size());
  std::set<uint64_t> seen{base};
  for (size_t i = 0; i < data.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      data[i] ^= static_cast<unsigned char>(1u << bit);
      seen.insert(checksum64(data.data(), data.size()));
      data[i] ^= static_cast<unsigned char>(1u << bit);
    }
  }
  EXPECT_EQ(seen.size(), 1 + data.size() * 8);
  // Trailing zeros are not ignored, and the seed matters.
  std::vector<unsigned char> zeros(64, 0);
  std::set<uint64_t> lens;
  for (size_t n = 0; n <= 64; ++n) lens.insert(checksum64(zeros.data(), n));
  EXPECT_EQ(lens.size(), 65u);
  EXPECT_NE(checksum64(data.data(), data.size(), 1), base);
  EXPECT_EQ(checksum_hex(0xabcull), "0000000000000abc");
}

}  // namespace
}  // namespace braid
