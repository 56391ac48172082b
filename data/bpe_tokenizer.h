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

#include "data/pretokenize.h"
#include "data/tokenizer.h"

namespace braid {

// Replaces every non-overlapping (a, b) in ids, left to right, by `merged`.
void merge_pair(std::vector<int32_t>& ids, int32_t a, int32_t b, int32_t merged);

// A token that is matched in text before the pre-split and never merged (e.g. the
// end-of-text token that `braid prepare` puts between documents).
struct SpecialToken {
  int32_t id;
  std::string content;
  bool operator==(const SpecialToken&) const = default;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // merges[i] = (left, right) makes internal token 256 + i; both ids must be < 256 + i.
  // token_ids, when given, is the external id of every internal token (256 bytes, then one per
  // merge), as an imported Hugging Face vocabulary numbers them; empty means the identity.
  // ignore_merges: a chunk that is a whole token of the vocabulary becomes that token without
  // merging (HF's BPE option of that name). Invalid arguments are a braid::Error; files are
  // checked with problem() first.
  explicit BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges,
                        PreSplit split = PreSplit::legacy(),
                        std::vector<SpecialToken> specials = {},
                        std::vector<int32_t> token_ids = {}, bool ignore_merges = false);

  // What is wrong with these arguments, or "" when the constructor would accept them.
  static std::string problem(const std::vector<std::pair<int32_t, int32_t>>& merges,
                             const std::vector<SpecialToken>& specials,
                             const std::vector<int32_t>& token_ids);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int vocab_size() const override { return vocab_size_; }
  std::string kind() const override { return "bpe"; }
  nlohmann::json to_json() const override;
  std::optional<int32_t> eot_id() const override;

  // A copy with `content` added as a special token with the next free id, marked as the
  // end-of-text token.
  BpeTokenizer with_eot(const std::string& content) const;
  // Marks the special token with this text as the end-of-text token; false if there is none.
  bool mark_eot(const std::string& content);

  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }
  const PreSplit& presplit() const { return split_; }
  const std::vector<SpecialToken>& specials() const { return specials_; }
  bool ignore_merges() const { return ignore_merges_; }
  // External id of internal token i (256 bytes, then merges).
  int32_t external_id(size_t internal) const {
    return ext_.empty() ? int32_t(internal) : ext_[internal];
  }
  // The bytes internal token i stands for.
  const std::string& internal_bytes(size_t internal) const { return bytes_[internal]; }
  // The bytes token id stands for (the content of a special token).
  const std::string& token_bytes(int32_t id) const;

 private:
  // Applies merges by rank to one pre-split chunk, exactly as training did.
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;

  std::vector<std::pair<int32_t, int32_t>> merges_;
  PreSplit split_;
  std::vector<SpecialToken> specials_;
  std::vector<int32_t> ext_;         // internal -> external id; empty: identity
  std::vector<int32_t> int_of_ext_;  // external id -> internal, -1 for none
  bool ignore_merges_ = false;
  std::unordered_map<std::string, int32_t> whole_;  // bytes -> external id (ignore_merges)
  int eot_ = -1;                                    // index into specials_
  int vocab_size_ = 0;
  std::unordered_map<uint64_t, int32_t> rank_;  // pair key -> merge index
  std::vector<std::string> bytes_;              // internal id -> bytes
};

// How often each distinct pre-split chunk occurs in the training text: all that training
// needs, so the text itself can be read piece by piece and dropped. Memory grows with the
// number of distinct chunks (words), not with the length of the text.
class BpeChunkCounts {
 public:
  explicit BpeChunkCounts(PreSplit split = PreSplit::legacy()) : split_(std::move(split)) {}
  const PreSplit& presplit() const { return split_; }

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
  PreSplit split_;
};

// Learns merges on the counted chunks until the vocabulary has vocab_size tokens (or no
// adjacent pair is left). Each step merges the most frequent adjacent pair within chunks; ties
// go to the smallest (left, right) ids, so the result depends only on the counts. vocab_size
// must be in [256, 1<<24].
BpeTokenizer train_bpe(const BpeChunkCounts& counts, int vocab_size);

// The same on whole texts (each text is pre-split on its own with `split`).
BpeTokenizer train_bpe(std::span<const std::string> texts, int vocab_size,
                       PreSplit split = PreSplit::legacy());

// Key of an adjacent pair in the merge tables.
inline uint64_t bpe_pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace braid
