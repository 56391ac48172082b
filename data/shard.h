// Token shard files: a 32-byte header then raw little-endian token ids, memory-mapped to read.
//
// Header (little-endian):
//   0  char[8] magic "BRAIDTOK"
//   8  u32     version (1)
//   12 u32     dtype: bytes per id, 2 (u16, used when vocab_size <= 65536) or 4 (u32)
//   16 u32     vocab_size: every id is < vocab_size
//   20 u32     reserved (0), keeps count and the ids aligned
//   24 u64     count: number of ids that follow
//   32 ids
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace braid {

class AtomicFileWriter;

inline constexpr char kShardMagic[8] = {'B', 'R', 'A', 'I', 'D', 'T', 'O', 'K'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderBytes = 32;

// Streams ids into a shard file at path, so a corpus never has to be in memory at once. The
// ids go to path + ".tmp" through a buffer; finish() writes the final count into the header
// and renames the file over path. A writer destroyed before finish() (an exception half-way)
// leaves neither path nor the temp file behind, and an earlier file at path untouched.
// Every id must be in [0, vocab_size) (braid::Error otherwise: the caller produced them).
// I/O failures are braid::UserError naming the file.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, int vocab_size);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void append(std::span<const int32_t> ids);
  void finish();
  // Ids appended so far.
  int64_t count() const { return count_; }

 private:
  void flush();

  std::unique_ptr<AtomicFileWriter> file_;  // null once finished
  std::string buf_;                         // encoded ids not yet written, flushed at about 1 MiB
  int vocab_size_ = 0;
  int width_ = 0;
  int64_t count_ = 0;
};

// All of ids as one shard at path (a ShardWriter with one append).
void write_shard(const std::string& path, std::span<const int32_t> ids, int vocab_size);

// A read-only, memory-mapped shard. Opening validates the whole file once: a missing file,
// bad magic, unknown version or dtype, a size that does not match the header, and an id
// >= vocab_size are braid::UserError naming the file and what would be right.
class TokenShard {
 public:
  explicit TokenShard(const std::string& path);
  ~TokenShard();
  TokenShard(TokenShard&& o) noexcept;
  TokenShard& operator=(TokenShard&& o) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }
  int vocab_size() const { return vocab_size_; }
  int id_bytes() const { return width_; }

  int32_t operator[](int64_t i) const;
  // Copies ids [offset, offset + n) into out (bounds are a braid::Error).
  void read(int64_t offset, int64_t n, int32_t* out) const;

 private:
  void close();

  std::string path_;
  int fd_ = -1;
  void* map_ = nullptr;  // whole file
  size_t map_bytes_ = 0;
  const unsigned char* ids_ = nullptr;  // ids: (count_,) of width_ bytes each
  int64_t count_ = 0;
  int vocab_size_ = 0;
  int width_ = 0;
};

// The model must have an embedding row for every id the shard can hold.
// Throws braid::UserError naming the shard and model.vocab_size when shard vocab > model vocab.
void check_shard_vocab(const TokenShard& shard, int model_vocab_size);

}  // namespace braid
