// BpeTokenizer: encoding by merge rank, decoding by byte table, JSON form.
#include "data/bpe_tokenizer.h"

#include <algorithm>
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

std::string BpeTokenizer::problem(const std::vector<std::pair<int32_t, int32_t>>& merges,
                                  const std::vector<SpecialToken>& specials,
                                  const std::vector<int32_t>& token_ids) {
  std::unordered_map<uint64_t, size_t> seen;
  for (size_t i = 0; i < merges.size(); ++i) {
    auto [a, b] = merges[i];
    const int64_t id = 256 + static_cast<int64_t>(i);
    if (a < 0 || b < 0 || a >= id || b >= id)
      return fmt::format(
          "merges[{}] is [{}, {}]; ids must be in 0..{} (tokens made before this "
          "merge)",
          i, a, b, id - 1);
    auto [it, fresh] = seen.emplace(bpe_pair_key(a, b), i);
    if (!fresh)
      return fmt::format("merges[{}] [{}, {}] duplicates merges[{}]; every pair may be merged once", i,
                         a, b, it->second);
  }
  if (!token_ids.empty() && token_ids.size() != 256 + merges.size())
    return fmt::format("token_ids has {} entries; expected 256 + {} merges = {}", token_ids.size(),
                       merges.size(), 256 + merges.size());
  for (size_t i = 0; i < token_ids.size(); ++i)
    if (token_ids[i] < 0 || token_ids[i] >= (int32_t{1} << 30))
      return fmt::format("token_ids[{}] is {}; expected an id in 0..2^30", i, token_ids[i]);
  // Special ids must stand for nothing else, or decode(encode(text)) would change the text.
  std::unordered_map<int32_t, bool> ordinary;
  for (size_t i = 0; i < 256 + merges.size(); ++i)
    if (!ordinary.emplace(token_ids.empty() ? int32_t(i) : token_ids[i], true).second)
      return fmt::format("token id {} stands for two different tokens", token_ids[i]);
  std::unordered_map<int32_t, size_t> special_ids;
  std::unordered_map<std::string, size_t> special_texts;
  for (size_t i = 0; i < specials.size(); ++i) {
    const SpecialToken& t = specials[i];
    if (t.id < 0 || t.id >= (int32_t{1} << 30) || t.content.empty())
      return fmt::format("special token {} '{}' needs an id in 0..2^30 and non-empty text", t.id,
                         t.content);
    if (ordinary.count(t.id))
      return fmt::format("special token '{}' has id {}, which is also an ordinary token", t.content,
                         t.id);
    if (!special_ids.emplace(t.id, i).second || !special_texts.emplace(t.content, i).second)
      return fmt::format("special token '{}' (id {}) repeats the id or text of another", t.content,
                         t.id);
  }
  return "";
}

BpeTokenizer::BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges, PreSplit split,
                           std::vector<SpecialToken> specials, std::vector<int32_t> token_ids,
                           bool ignore_merges)
    : merges_(std::move(merges)),
      split_(std::move(split)),
      specials_(std::move(specials)),
      ext_(std::move(token_ids)),
      ignore_merges_(ignore_merges) {
  const std::string bad = problem(merges_, specials_, ext_);
  BRAID_CHECK(bad.empty(), "{}", bad);
  bytes_.reserve(256 + merges_.size());
  for (int b = 0; b < 256; ++b) bytes_.emplace_back(1, static_cast<char>(b));
  rank_.reserve(merges_.size());
  for (size_t i = 0; i < merges_.size(); ++i) {
    auto [a, b] = merges_[i];
    rank_.emplace(bpe_pair_key(a, b), static_cast<int32_t>(i));
    bytes_.push_back(bytes_[a] + bytes_[b]);
  }
  int32_t max_id = static_cast<int32_t>(bytes_.size()) - 1;
  for (int32_t e : ext_) max_id = std::max(max_id, e);
  for (const SpecialToken& t : specials_) max_id = std::max(max_id, t.id);
  vocab_size_ = max_id + 1;
  int_of_ext_.assign(static_cast<size_t>(vocab_size_), -1);
  for (size_t i = bytes_.size(); i-- > 0;) int_of_ext_[external_id(i)] = static_cast<int32_t>(i);
  for (size_t i = 0; i < specials_.size(); ++i)
    if (specials_[i].content == "<|endoftext|>" || eot_ < 0) eot_ = static_cast<int>(i);
  if (ignore_merges_)
    for (size_t i = 0; i < bytes_.size(); ++i) whole_.emplace(bytes_[i], external_id(i));
}

std::optional<int32_t> BpeTokenizer::eot_id() const {
  if (eot_ < 0) return std::nullopt;
  return specials_[static_cast<size_t>(eot_)].id;
}

BpeTokenizer BpeTokenizer::with_eot(const std::string& content) const {
  std::vector<SpecialToken> sp = specials_;
  sp.push_back({vocab_size_, content});
  BpeTokenizer t(merges_, split_, std::move(sp), ext_, ignore_merges_);
  t.eot_ = static_cast<int>(t.specials_.size()) - 1;
  return t;
}

bool BpeTokenizer::mark_eot(const std::string& content) {
  for (size_t i = 0; i < specials_.size(); ++i)
    if (specials_[i].content == content) {
      eot_ = static_cast<int>(i);
      return true;
    }
  return false;
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  for (const SpecialToken& t : specials_)
    if (t.id == id) return t.content;
  BRAID_CHECK(id >= 0 && id < vocab_size_ && int_of_ext_[id] >= 0, "no token {}", id);
  return bytes_[static_cast<size_t>(int_of_ext_[id])];
}

void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  if (ignore_merges_)
    if (auto it = whole_.find(std::string(chunk)); it != whole_.end()) {
      out.push_back(it->second);
      return;
    }
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
  for (int32_t id : ids) out.push_back(external_id(static_cast<size_t>(id)));
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  // Natural text repeats words constantly; caching chunk encodings makes encode ~linear.
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;
  std::vector<int32_t> tmp;
  for (size_t i = 0; i < text.size();) {
    const size_t j = split_.chunk_end(text, i);
    const std::string_view chunk = text.substr(i, j - i);
    i = j;
    auto it = cache.find(chunk);
    if (it == cache.end()) {
      tmp.clear();
      encode_chunk(chunk, tmp);
      it = cache.emplace(chunk, tmp).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 2);
  // Special tokens are found in the text first (leftmost, then longest); the text between
  // them is encoded normally.
  size_t at = 0;
  while (at < text.size()) {
    size_t best = std::string_view::npos;
    const SpecialToken* hit = nullptr;
    for (const SpecialToken& t : specials_) {
      const size_t p = text.find(t.content, at);
      if (p < best ||
          (p == best && p != std::string_view::npos && t.content.size() > hit->content.size()))
        best = p, hit = &t;
    }
    encode_ordinary(
        text.substr(at, best == std::string_view::npos ? std::string_view::npos : best - at), out);
    if (!hit || best == std::string_view::npos) break;
    out.push_back(hit->id);
    at = best + hit->content.size();
  }
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size_)
      user_error("token id {} at position {} is outside the BPE tokenizer's vocabulary (0..{})", id,
                 i, vocab_size_ - 1);
    if (int_of_ext_[id] >= 0) {
      out += bytes_[static_cast<size_t>(int_of_ext_[id])];
      continue;
    }
    bool special = false;
    for (const SpecialToken& t : specials_)
      if (t.id == id) out += t.content, special = true;
    if (!special)
      user_error("token id {} at position {} stands for no text in this tokenizer", id, i);
  }
  return out;
}

nlohmann::json BpeTokenizer::to_json() const {
  nlohmann::json m = nlohmann::json::array();
  for (auto [a, b] : merges_) m.push_back({a, b});
  nlohmann::json j = {{"type", "bpe"}, {"vocab_size", vocab_size()}};
  if (split_.is_legacy()) {
    j["pretokenize"] = "braid-v1";  // format 1: readers that predate version 2 still load it
  } else {
    j["format_version"] = 2;
    j["pretokenize"] = "regex";
    j["pattern"] = split_.pattern();
  }
  j["merges"] = std::move(m);
  if (!ext_.empty()) j["token_ids"] = ext_;
  if (ignore_merges_) j["ignore_merges"] = true;
  if (!specials_.empty()) {
    nlohmann::json sp = nlohmann::json::array();
    for (const SpecialToken& t : specials_) sp.push_back({{"id", t.id}, {"content", t.content}});
    j["special_tokens"] = std::move(sp);
    j["eot"] = specials_[static_cast<size_t>(eot_)].content;
  }
  return j;
}

}  // namespace braid
