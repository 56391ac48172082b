// File checksums: SHA-256 (OpenSSL), the standard one checkpoint manifests record so that
// outside tools (`sha256sum`) can verify them, and braid's own fast 64-bit "braid-mix64-v1",
// which manifests written before SHA-256 carry and which therefore must still verify.
//
// braid-mix64-v1 guards against torn writes and bit rot, not against tampering. Four
// independent lanes each consume 8 bytes per round, so the CPU overlaps the multiplies and
// hashing runs at memory speed; the result does not depend on how the input is chunked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid {

// The names recorded next to checksums so a reader knows how they were computed.
inline constexpr const char* kChecksumSha256 = "sha256";
inline constexpr const char* kChecksumMix64 = "braid-mix64-v1";

class Checksum64 {
 public:
  explicit Checksum64(uint64_t seed = 0);
  Checksum64& update(const void* data, size_t bytes);
  uint64_t digest() const;  // may be called at any time; does not change the state

 private:
  uint64_t acc_[4];
  unsigned char pending_[32];  // bytes not yet forming a full 32-byte stripe
  size_t pending_bytes_ = 0;
  uint64_t total_bytes_ = 0;
};

uint64_t checksum64(const void* data, size_t bytes, uint64_t seed = 0);

struct FileChecksum {
  uint64_t bytes = 0;
  uint64_t checksum = 0;
};
// Reads the whole file; throws braid::UserError naming the path when it cannot be read.
FileChecksum checksum_file(const std::string& path);

// 16 lowercase hex digits, the form braid-mix64-v1 manifests store.
std::string checksum_hex(uint64_t c);

// SHA-256 of a buffer or a whole file, as 64 lowercase hex digits (what `sha256sum` prints).
std::string sha256_hex(const void* data, size_t bytes);
struct FileDigest {
  uint64_t bytes = 0;
  std::string hex;
};
// `algo` is kChecksumSha256 or kChecksumMix64; throws braid::UserError naming the path when the
// file cannot be read, braid::Error for an unknown algorithm.
FileDigest digest_file(const std::string& path, const std::string& algo);

}  // namespace braid
