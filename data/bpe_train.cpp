// BpeChunkCounts and train_bpe: greedy most-frequent-pair merging with incremental pair counts.
#include <algorithm>
#include <queue>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/pretokenize.h"

namespace braid {

namespace {

struct Word {
  std::vector<int32_t> ids;
  int64_t freq;
};

struct HeapEntry {
  int64_t count;
  uint64_t key;
  // priority_queue pops the largest: more frequent first, then the smaller (left, right).
  bool operator<(const HeapEntry& o) const {
    return count != o.count ? count < o.count : key > o.key;
  }
};


}  // namespace

void BpeChunkCounts::add(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t end = split_.chunk_end(text, i);
    const std::string_view chunk = text.substr(i, end - i);
    auto it = counts_.find(chunk);
    if (it == counts_.end()) it = counts_.emplace(std::string(chunk), 0).first;
    ++it->second;
    ++total_;
    i = end;
  }
}

int64_t BpeChunkCounts::count(std::string_view chunk) const {
  auto it = counts_.find(chunk);
  return it == counts_.end() ? 0 : it->second;
}

std::vector<std::pair<std::string_view, int64_t>> BpeChunkCounts::sorted() const {
  std::vector<std::pair<std::string_view, int64_t>> out(counts_.begin(), counts_.end());
  std::sort(out.begin(), out.end());  // fixed word order: output independent of hashing
  return out;
}

BpeTokenizer train_bpe(std::span<const std::string> texts, int vocab_size, PreSplit split) {
  BpeChunkCounts counts(std::move(split));
  for (const std::string& text : texts) counts.add(text);
  return train_bpe(counts, vocab_size);
}

BpeTokenizer train_bpe(const BpeChunkCounts& counts, int vocab_size) {
  if (vocab_size < 256 || vocab_size > (1 << 24))
    user_error("BPE vocab_size is {}; expected 256..{} (256 byte tokens + merges)", vocab_size,
               1 << 24);

  // Training works on distinct words weighted by their counts.
  std::vector<Word> words;
  {
    const std::vector<std::pair<std::string_view, int64_t>> sorted = counts.sorted();
    words.reserve(sorted.size());
    for (const auto& [s, n] : sorted) {
      Word w{std::vector<int32_t>(s.size()), n};
      for (size_t i = 0; i < s.size(); ++i) w.ids[i] = static_cast<unsigned char>(s[i]);
      words.push_back(std::move(w));
    }
  }

  std::unordered_map<uint64_t, int64_t> pair_count;
  // Words that may contain a pair (may hold duplicates and stale entries; checked on use).
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (size_t wi = 0; wi < words.size(); ++wi) {
    const Word& w = words[wi];
    for (size_t i = 0; i + 1 < w.ids.size(); ++i) {
      uint64_t k = bpe_pair_key(w.ids[i], w.ids[i + 1]);
      pair_count[k] += w.freq;
      where[k].push_back(static_cast<int32_t>(wi));
    }
  }
  // Lazy max-heap: an entry is live only while its count equals pair_count's.
  std::priority_queue<HeapEntry> heap;
  for (auto& [k, n] : pair_count) heap.push({n, k});

  std::vector<std::pair<int32_t, int32_t>> merges;
  std::vector<int32_t> visited(words.size(), -1);  // merge index that last touched a word
  std::unordered_map<uint64_t, int64_t> delta;
  while (256 + static_cast<int>(merges.size()) < vocab_size) {
    uint64_t key = 0;
    bool found = false;
    while (!heap.empty()) {
      HeapEntry e = heap.top();
      heap.pop();
      auto it = pair_count.find(e.key);
      if (it != pair_count.end() && it->second == e.count && e.count > 0) {
        key = e.key;
        found = true;
        break;
      }
    }
    if (!found) break;  // every word is a single token: nothing left to merge
    const int32_t a = static_cast<int32_t>(key >> 32);
    const int32_t b = static_cast<int32_t>(key & 0xffffffffu);
    const int32_t merged = 256 + static_cast<int32_t>(merges.size());
    const int32_t stamp = static_cast<int32_t>(merges.size());
    merges.emplace_back(a, b);

    std::vector<int32_t> candidates = std::move(where[key]);
    where.erase(key);
    delta.clear();
    for (int32_t wi : candidates) {
      if (visited[wi] == stamp) continue;
      visited[wi] = stamp;
      Word& w = words[wi];
      // Words are short: recount the whole word rather than patching neighbours.
      for (size_t i = 0; i + 1 < w.ids.size(); ++i)
        delta[bpe_pair_key(w.ids[i], w.ids[i + 1])] -= w.freq;
      merge_pair(w.ids, a, b, merged);
      for (size_t i = 0; i + 1 < w.ids.size(); ++i) {
        uint64_t k = bpe_pair_key(w.ids[i], w.ids[i + 1]);
        delta[k] += w.freq;
        // Only pairs with the new token are new to this word; others are already listed.
        if (w.ids[i] == merged || w.ids[i + 1] == merged) where[k].push_back(wi);
      }
    }
    for (auto& [k, d] : delta) {
      if (d == 0) continue;
      int64_t& n = pair_count[k];
      n += d;
      BRAID_CHECK(n >= 0, "negative pair count {} after merge {}", n, stamp);
      if (n > 0) heap.push({n, k});
      else pair_count.erase(k);
    }
  }
  return BpeTokenizer(std::move(merges), counts.presplit());
}

}  // namespace braid
