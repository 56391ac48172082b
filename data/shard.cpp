// Token shard streaming writer and the validating memory-mapped reader.
#include "data/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_guard.h"

namespace braid {

static_assert(std::endian::native == std::endian::little,
              "token shards are little-endian and read in place");

namespace {

template <typename T>
void put(std::string& buf, size_t at, T v) {
  std::memcpy(buf.data() + at, &v, sizeof(T));
}

template <typename T>
T get(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

int width_for_vocab(int64_t vocab) { return vocab <= 65536 ? 2 : 4; }

}  // namespace

namespace {
constexpr size_t kWriterBufferBytes = size_t{1} << 20;
}  // namespace

ShardWriter::ShardWriter(const std::string& path, int vocab_size) : vocab_size_(vocab_size) {
  BRAID_CHECK(vocab_size > 0, "vocab_size {} must be positive", vocab_size);
  width_ = width_for_vocab(vocab_size);
  file_ = std::make_unique<AtomicFileWriter>(path);
  // The count stays 0 until finish(), so a temp file cut short never claims ids it lacks.
  std::string header(kShardHeaderBytes, '\0');
  std::memcpy(header.data(), kShardMagic, 8);
  put<uint32_t>(header, 8, kShardVersion);
  put<uint32_t>(header, 12, static_cast<uint32_t>(width_));
  put<uint32_t>(header, 16, static_cast<uint32_t>(vocab_size));
  file_->write(header.data(), header.size());
  buf_.reserve(kWriterBufferBytes);
}

// Out of line: AtomicFileWriter is complete only here. Its destructor removes the temp file
// when finish() was never reached.
ShardWriter::~ShardWriter() = default;

void ShardWriter::append(std::span<const int32_t> ids) {
  BRAID_CHECK(file_ != nullptr, "append to a finished shard writer");
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    BRAID_CHECK(id >= 0 && id < vocab_size_, "token {} at {} outside vocab {}", id,
                count_ + static_cast<int64_t>(i), vocab_size_);
    if (width_ == 2) {
      const uint16_t v = static_cast<uint16_t>(id);
      buf_.append(reinterpret_cast<const char*>(&v), 2);
    } else {
      const uint32_t v = static_cast<uint32_t>(id);
      buf_.append(reinterpret_cast<const char*>(&v), 4);
    }
    if (buf_.size() >= kWriterBufferBytes) flush();
  }
  count_ += static_cast<int64_t>(ids.size());
}

void ShardWriter::flush() {
  file_->write(buf_.data(), buf_.size());
  buf_.clear();
}

void ShardWriter::finish() {
  BRAID_CHECK(file_ != nullptr, "finish of a shard writer twice");
  flush();
  const uint64_t count = static_cast<uint64_t>(count_);
  file_->write_at(24, &count, sizeof(count));
  file_->commit();
  file_.reset();
}

void write_shard(const std::string& path, std::span<const int32_t> ids, int vocab_size) {
  ShardWriter w(path, vocab_size);
  w.append(ids);
  w.finish();
}

TokenShard::TokenShard(const std::string& path) : path_(path) {
  try {
    fd_ = open_regular_file(path, "token shard");
  } catch (const UserError& e) {
    user_error("{}; expected a .bin file written by `braid prepare`", e.what());
  }
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) user_error("token shard '{}': stat failed: {}", path, std::strerror(errno));
    const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
    if (file_bytes < kShardHeaderBytes)
      user_error("token shard '{}' is {} bytes, shorter than the {}-byte header; the file is "
                 "truncated or not a token shard", path, file_bytes, kShardHeaderBytes);
    map_ = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd_, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      user_error("token shard '{}': mmap failed: {}", path, std::strerror(errno));
    }
    map_bytes_ = file_bytes;
    const auto* h = static_cast<const unsigned char*>(map_);
    if (std::memcmp(h, kShardMagic, 8) != 0)
      user_error("token shard '{}' does not start with the magic \"BRAIDTOK\"; it is not a token "
                 "shard (write one with `braid prepare`)", path);
    const uint32_t version = get<uint32_t>(h + 8);
    if (version != kShardVersion)
      user_error("token shard '{}' has format version {}; this braid reads version {}", path,
                 version, kShardVersion);
    const uint32_t width = get<uint32_t>(h + 12);
    if (width != 2 && width != 4)
      user_error("token shard '{}' has dtype code {}; expected 2 (u16) or 4 (u32)", path, width);
    const uint32_t vocab = get<uint32_t>(h + 16);
    if (vocab == 0 || vocab > static_cast<uint32_t>(INT32_MAX))
      user_error("token shard '{}' has vocab_size {}; expected 1..{}", path, vocab, INT32_MAX);
    if (width == 2 && vocab > 65536)
      user_error("token shard '{}' stores u16 ids but has vocab_size {} > 65536", path, vocab);
    const uint64_t count = get<uint64_t>(h + 24);
    const uint64_t max_count = (file_bytes - kShardHeaderBytes) / width + 1;
    if (count > max_count || kShardHeaderBytes + count * width != file_bytes)
      user_error("token shard '{}' is {} bytes but its header says {} ids of {} bytes, i.e. {} "
                 "bytes; the file is truncated or corrupt (rerun `braid prepare`)", path,
                 file_bytes, count, width,
                 count > max_count ? std::string("more than the file") :
                                     std::to_string(kShardHeaderBytes + count * width));
    ids_ = h + kShardHeaderBytes;
    count_ = static_cast<int64_t>(count);
    vocab_size_ = static_cast<int>(vocab);
    width_ = static_cast<int>(width);
    // One scan at open, so no sampled batch can index past the embedding table later.
    for (int64_t i = 0; i < count_; ++i) {
      const int32_t v = (*this)[i];
      if (v < 0 || v >= vocab_size_)
        user_error("token shard '{}' holds id {} at position {}, but its vocab_size is {}; ids "
                   "must be in 0..{} (the file is corrupt; rerun `braid prepare`)", path, v, i,
                   vocab_size_, vocab_size_ - 1);
    }
  } catch (...) {
    close();
    throw;
  }
}

TokenShard::~TokenShard() { close(); }

void TokenShard::close() {
  if (map_) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
  map_ = nullptr;
  fd_ = -1;
  ids_ = nullptr;
}

TokenShard::TokenShard(TokenShard&& o) noexcept { *this = std::move(o); }

TokenShard& TokenShard::operator=(TokenShard&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    ids_ = std::exchange(o.ids_, nullptr);
    count_ = std::exchange(o.count_, 0);
    vocab_size_ = std::exchange(o.vocab_size_, 0);
    width_ = std::exchange(o.width_, 0);
  }
  return *this;
}

int32_t TokenShard::operator[](int64_t i) const {
  BRAID_CHECK(i >= 0 && i < count_, "index {} outside shard of {} ids", i, count_);
  if (width_ == 2) return get<uint16_t>(ids_ + i * 2);
  return static_cast<int32_t>(get<uint32_t>(ids_ + i * 4));
}

void TokenShard::read(int64_t offset, int64_t n, int32_t* out) const {
  BRAID_CHECK(offset >= 0 && n >= 0 && offset + n <= count_, "read [{}, {}) outside shard of {} ids",
              offset, offset + n, count_);
  if (width_ == 2) {
    for (int64_t i = 0; i < n; ++i) out[i] = get<uint16_t>(ids_ + (offset + i) * 2);
  } else {
    std::memcpy(out, ids_ + offset * 4, static_cast<size_t>(n) * 4);
  }
}

void check_shard_vocab(const TokenShard& shard, int model_vocab_size) {
  if (shard.vocab_size() > model_vocab_size)
    user_error("token shard '{}' was written with vocab_size {} but model.vocab_size is {}; set "
               "model.vocab_size to at least {}", shard.path(), shard.vocab_size(),
               model_vocab_size, shard.vocab_size());
}

}  // namespace braid
