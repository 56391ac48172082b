// braid-mix64-v1 (four multiply-rotate lanes over 32-byte stripes and a final avalanche) and
// SHA-256 through OpenSSL's EVP interface.
#include "core/checksum.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "core/error.h"

namespace braid {

static_assert(std::endian::native == std::endian::little,
              "checksums read 8-byte words in little-endian order");

namespace {

// Odd constants with well-spread bits (golden ratio and the splitmix64 multipliers).
constexpr uint64_t kM1 = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kM2 = 0xBF58476D1CE4E5B9ull;
constexpr uint64_t kM3 = 0x94D049BB133111EBull;

inline uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint64_t lane_round(uint64_t acc, uint64_t word) {
  return std::rotl(acc + word * kM2, 31) * kM1;
}

// splitmix64's finaliser: every input bit affects every output bit.
inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 30;
  h *= kM2;
  h ^= h >> 27;
  h *= kM3;
  h ^= h >> 31;
  return h;
}

}  // namespace

Checksum64::Checksum64(uint64_t seed) {
  for (int i = 0; i < 4; ++i) acc_[i] = seed + kM1 * static_cast<uint64_t>(i + 1);
}

Checksum64& Checksum64::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_bytes_ += bytes;
  if (pending_bytes_ > 0) {
    const size_t take = std::min(bytes, 32 - pending_bytes_);
    std::memcpy(pending_ + pending_bytes_, p, take);
    pending_bytes_ += take;
    p += take;
    bytes -= take;
    if (pending_bytes_ < 32) return *this;
    for (int i = 0; i < 4; ++i) acc_[i] = lane_round(acc_[i], load64(pending_ + 8 * i));
    pending_bytes_ = 0;
  }
  uint64_t a0 = acc_[0], a1 = acc_[1], a2 = acc_[2], a3 = acc_[3];
  for (; bytes >= 32; p += 32, bytes -= 32) {
    a0 = lane_round(a0, load64(p));
    a1 = lane_round(a1, load64(p + 8));
    a2 = lane_round(a2, load64(p + 16));
    a3 = lane_round(a3, load64(p + 24));
  }
  acc_[0] = a0, acc_[1] = a1, acc_[2] = a2, acc_[3] = a3;
  if (bytes > 0) {
    std::memcpy(pending_, p, bytes);
    pending_bytes_ = bytes;
  }
  return *this;
}

uint64_t Checksum64::digest() const {
  uint64_t h = std::rotl(acc_[0], 1) + std::rotl(acc_[1], 7) + std::rotl(acc_[2], 12) +
               std::rotl(acc_[3], 18);
  for (int i = 0; i < 4; ++i) h = (h ^ avalanche(acc_[i])) * kM1 + kM3;
  h += total_bytes_;
  const unsigned char* p = pending_;
  size_t n = pending_bytes_;
  for (; n >= 8; p += 8, n -= 8) h = std::rotl(h ^ (load64(p) * kM2), 27) * kM1 + kM3;
  for (; n > 0; ++p, --n) h = std::rotl(h ^ (static_cast<uint64_t>(*p) * kM1), 11) * kM2;
  return avalanche(h);
}

uint64_t checksum64(const void* data, size_t bytes, uint64_t seed) {
  return Checksum64(seed).update(data, bytes).digest();
}

namespace {

// Feeds the file at `path` to `consume` in 1 MiB pieces; returns its size in bytes.
uint64_t read_file_chunks(const std::string& path,
                          const std::function<void(const unsigned char*, size_t)>& consume) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) user_error("cannot read {}: {}", path, std::strerror(errno));
  std::vector<unsigned char> buf(1 << 20);
  uint64_t total = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      user_error("cannot read {}: {}", path, std::strerror(err));
    }
    if (got == 0) break;
    consume(buf.data(), static_cast<size_t>(got));
    total += static_cast<uint64_t>(got);
  }
  ::close(fd);
  return total;
}

struct EvpCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

// Incremental SHA-256; every OpenSSL failure is an internal error (they mean out of memory).
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    BRAID_CHECK(ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1,
                "OpenSSL SHA-256 initialisation failed");
  }
  void update(const void* p, size_t n) {
    BRAID_CHECK(EVP_DigestUpdate(ctx_.get(), p, n) == 1, "OpenSSL SHA-256 update failed");
  }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    BRAID_CHECK(EVP_DigestFinal_ex(ctx_.get(), md, &len) == 1 && len == 32,
                "OpenSSL SHA-256 finalisation failed");
    std::string out;
    for (unsigned int i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, EvpCtxDeleter> ctx_;
};

}  // namespace

FileChecksum checksum_file(const std::string& path) {
  Checksum64 h;
  FileChecksum r;
  r.bytes = read_file_chunks(path, [&](const unsigned char* p, size_t n) { h.update(p, n); });
  r.checksum = h.digest();
  return r;
}

std::string sha256_hex(const void* data, size_t bytes) {
  Sha256 s;
  s.update(data, bytes);
  return s.hex();
}

FileDigest digest_file(const std::string& path, const std::string& algo) {
  FileDigest d;
  if (algo == kChecksumSha256) {
    Sha256 s;
    d.bytes = read_file_chunks(path, [&](const unsigned char* p, size_t n) { s.update(p, n); });
    d.hex = s.hex();
  } else if (algo == kChecksumMix64) {
    const FileChecksum c = checksum_file(path);
    d.bytes = c.bytes;
    d.hex = checksum_hex(c.checksum);
  } else {
    BRAID_CHECK(false, "unknown checksum algorithm '{}'", algo);
  }
  return d;
}

std::string checksum_hex(uint64_t c) { return fmt::format("{:016x}", c); }

}  // namespace braid
