// BpeTokenizer: byte-level BPE (256 byte tokens + learned merges) and its trainer.
#pragma once

#include <span>
#include <string>
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

// Learns merges on texts until the vocabulary has vocab_size tokens (or no adjacent pair is
// left). Each step merges the most frequent adjacent pair within pre-split chunks; ties go to
// the smallest (left, right) ids, so the result depends only on the texts. vocab_size must be
// in [256, 1<<24].
BpeTokenizer train_bpe(std::span<const std::string> texts, int vocab_size);

// Key of an adjacent pair in the merge tables.
inline uint64_t bpe_pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace braid
