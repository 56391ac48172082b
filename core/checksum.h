// A fast 64-bit non-cryptographic checksum (braid's own "braid-mix64-v1") for file integrity.
//
// It guards against torn writes and bit rot in checkpoints, not against tampering. Four
// independent lanes each consume 8 bytes per round, so the CPU overlaps the multiplies and
// hashing runs at memory speed; the result does not depend on how the input is chunked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid {

// The name recorded next to checksums so a reader knows how they were computed.
inline constexpr const char* kChecksumAlgo = "braid-mix64-v1";

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

// 16 lowercase hex digits, the form stored in manifests.
std::string checksum_hex(uint64_t c);

}  // namespace braid
