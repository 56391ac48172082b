// The pre-split applied before BPE: merges never cross the chunk boundaries it draws.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

// Splits text into chunks, GPT-2 style but ASCII-only and regex-free (the "braid-v1" rule of
// tokenizer files written before format version 2):
//   [' '? letters]  letters are ASCII a-z, A-Z and every byte >= 0x80 (so UTF-8 characters
//                   stay whole inside words)
//   [' '? digits]
//   [' '? other]    a run of punctuation/symbols
//   [whitespace]    a run of spaces, tabs, newlines; a single trailing ' ' before a
//                   non-space is left to start the next chunk, so " word" stays one chunk.
// The chunks are views into text and concatenate back to exactly text.
std::vector<std::string_view> pretokenize(std::string_view text);

// End of the chunk that starts at start (< text.size()), for walking the chunks without a
// vector. The cut depends only on text[start, end] and on whether text ends right there, so
// every chunk but the last one of a prefix of a text is also a chunk of the whole text.
size_t pretokenize_chunk_end(std::string_view text, size_t start);

// GPT-2's pre-split pattern (also Hugging Face's ByteLevel pre-tokenizer): contractions, runs
// of Unicode letters or numbers or other symbols (each optionally led by one space), and
// whitespace runs that leave their last space to the next word.
extern const char* const kGpt2SplitPattern;

// A pre-split rule: the legacy "braid-v1" rule above, or a PCRE2 regular expression matched in
// UTF-8/Unicode mode (letters, numbers and spaces are Unicode classes). Every byte belongs to
// one chunk: bytes no match covers (invalid UTF-8) form chunks of their own, so decode(encode)
// stays exact for any bytes. Cheap to copy; safe to use from several threads.
class PreSplit {
 public:
  static PreSplit legacy();
  static PreSplit gpt2() { return regex(kGpt2SplitPattern); }
  // Throws braid::UserError when the pattern does not compile (message names the offset).
  static PreSplit regex(const std::string& pattern);

  bool is_legacy() const { return impl_ == nullptr; }
  // "" for the legacy rule.
  const std::string& pattern() const;

  // End of the chunk starting at start (< text.size()); see pretokenize_chunk_end.
  size_t chunk_end(std::string_view text, size_t start) const;
  std::vector<std::string_view> split(std::string_view text) const;

  // How many bytes before the end of a text-so-far may still change their chunking when more
  // text follows (look-ahead of the pattern: contractions, (?!\S), a UTF-8 character cut in
  // two). Chunks ending before that are final.
  static constexpr size_t kUnsettledBytes = 16;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace braid
