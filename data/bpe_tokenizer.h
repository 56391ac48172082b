// BpeTokenizer: byte-level BPE (256 byte tokens + learned merges) and its trainer.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/tokenizer.h"

namespace braid {

// Replaces every non-overlapping (a, b) in ids, left to right, by `merged`.
void merge_pair(std::vector<int32_t>& ids, int32_t a, int32_t b, int32_t merged);

class BpeTokenizer final : public Tokenizer {
 public:
  // merges[i] = (left, right) makes token 256 + i; both ids must be < 256 + i.
  // Invalid merges are a braid::Error (load() checks files before building).
  explicit BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int vocab_size() const override { return 256 + static_cast<int>(merges_.size()); }
  std::string kind() const override { return "bpe"; }
  nlohmann::json to_json() const override;

  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }
  // The bytes token id stands for.
  const std::string& token_bytes(int32_t id) const { return bytes_[id]; }

 private:
  // Applies merges by rank to one pre-split chunk, exactly as training did.
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::unordered_map<uint64_t, int32_t> rank_;  // pair key -> merge index
  std::vector<std::string> bytes_;              // id -> bytes
};

// How often each distinct pre-split chunk occurs in the training text: all that training
// needs, so the text itself can be read piece by piece and dropped. Memory grows with the
// number of distinct chunks (words), not with the length of the text.
class BpeChunkCounts {
 public:
  // Counts the chunks of text: a whole text, or a piece of one cut on a chunk boundary
  // (ChunkStream cuts a text that way; a cut elsewhere would count other chunks).
  void add(std::string_view text);

  bool empty() const { return counts_.empty(); }
  size_t distinct() const { return counts_.size(); }
  int64_t total() const { return total_; }
  int64_t count(std::string_view chunk) const;

  // (chunk, count) pairs in byte order of the chunks: the fixed word order of training.
  std::vector<std::pair<std::string_view, int64_t>> sorted() const;

 private:
  // Looks up chunks by string_view without building a std::string per chunk.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> counts_;
  int64_t total_ = 0;
};

// Learns merges on the counted chunks until the vocabulary has vocab_size tokens (or no
// adjacent pair is left). Each step merges the most frequent adjacent pair within chunks; ties
// go to the smallest (left, right) ids, so the result depends only on the counts. vocab_size
// must be in [256, 1<<24].
BpeTokenizer train_bpe(const BpeChunkCounts& counts, int vocab_size);

// The same on whole texts (each text is pre-split on its own).
BpeTokenizer train_bpe(std::span<const std::string> texts, int vocab_size);

// Key of an adjacent pair in the merge tables.
inline uint64_t bpe_pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace braid
