// BpeTokenizer: encoding by merge rank, decoding by byte table, JSON form.
#include "data/bpe_tokenizer.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/pretokenize.h"

namespace braid {

// Merges every non-overlapping (a, b) left to right, the one rule encoding and training share.
void merge_pair(std::vector<int32_t>& ids, int32_t a, int32_t b, int32_t merged) {
  size_t w = 0;
  for (size_t i = 0; i < ids.size();) {
    if (i + 1 < ids.size() && ids[i] == a && ids[i + 1] == b) {
      ids[w++] = merged;
      i += 2;
    } else {
      ids[w++] = ids[i++];
    }
  }
  ids.resize(w);
}

BpeTokenizer::BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges)
    : merges_(std::move(merges)) {
  bytes_.reserve(256 + merges_.size());
  for (int b = 0; b < 256; ++b) bytes_.emplace_back(1, static_cast<char>(b));
  rank_.reserve(merges_.size());
  for (size_t i = 0; i < merges_.size(); ++i) {
    auto [a, b] = merges_[i];
    const int32_t id = static_cast<int32_t>(256 + i);
    BRAID_CHECK(a >= 0 && b >= 0 && a < id && b < id, "merge {} ({}, {}) refers to a later token",
                i, a, b);
    BRAID_CHECK(rank_.emplace(bpe_pair_key(a, b), static_cast<int32_t>(i)).second,
                "merge {} ({}, {}) is a duplicate", i, a, b);
    bytes_.push_back(bytes_[a] + bytes_[b]);
  }
}

void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  std::vector<int32_t> ids(chunk.size());
  for (size_t i = 0; i < chunk.size(); ++i) ids[i] = static_cast<unsigned char>(chunk[i]);
  // Chunks are short (a word), so a quadratic lowest-rank-first loop is fast enough and
  // reproduces training: training applied merge r to every word after merges < r.
  while (ids.size() > 1) {
    int32_t best = std::numeric_limits<int32_t>::max();
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      auto it = rank_.find(bpe_pair_key(ids[i], ids[i + 1]));
      if (it != rank_.end() && it->second < best) best = it->second;
    }
    if (best == std::numeric_limits<int32_t>::max()) break;
    auto [a, b] = merges_[best];
    merge_pair(ids, a, b, 256 + best);
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 2);
  // Natural text repeats words constantly; caching chunk encodings makes encode ~linear.
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;
  std::vector<int32_t> tmp;
  for (std::string_view chunk : pretokenize(text)) {
    auto it = cache.find(chunk);
    if (it == cache.end()) {
      tmp.clear();
      encode_chunk(chunk, tmp);
      it = cache.emplace(chunk, tmp).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      user_error("token id {} at position {} is outside the BPE tokenizer's vocabulary (0..{})",
                 ids[i], i, vocab_size() - 1);
    out += bytes_[ids[i]];
  }
  return out;
}

nlohmann::json BpeTokenizer::to_json() const {
  nlohmann::json m = nlohmann::json::array();
  for (auto [a, b] : merges_) m.push_back({a, b});
  return {{"type", "bpe"},
          {"vocab_size", vocab_size()},
          {"pretokenize", "braid-v1"},
          {"merges", std::move(m)}};
}

}  // namespace braid
