// The BPE pre-splits: the legacy byte-class rule and PCRE2 patterns.
#include "data/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace braid {

namespace {

enum class Cls { Letter, Digit, Space, Other };

Cls classify(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return Cls::Letter;
  if (c >= '0' && c <= '9') return Cls::Digit;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return Cls::Space;
  return Cls::Other;
}

Cls cls_at(std::string_view s, size_t i) { return classify(static_cast<unsigned char>(s[i])); }

}  // namespace

size_t pretokenize_chunk_end(std::string_view text, size_t start) {
  const size_t n = text.size();
  size_t i = start;
  // A single space glues onto the run that follows it.
  if (text[i] == ' ' && i + 1 < n && cls_at(text, i + 1) != Cls::Space) ++i;
  Cls c = cls_at(text, i);
  size_t j = i + 1;
  while (j < n && cls_at(text, j) == c) ++j;
  // Leave a final ' ' of a whitespace run to the word after it.
  if (c == Cls::Space && j < n && j - start > 1 && text[j - 1] == ' ') --j;
  return j;
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> chunks;
  for (size_t i = 0; i < text.size();) {
    const size_t j = pretokenize_chunk_end(text, i);
    chunks.push_back(text.substr(i, j - i));
    i = j;
  }
  return chunks;
}

const char* const kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct PreSplit::Impl {
  std::string pattern;
  pcre2_code* code = nullptr;
  ~Impl() { pcre2_code_free(code); }
};

namespace {

// One match-data block per thread, big enough for the whole-match offsets of any pattern.
struct MatchData {
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  ~MatchData() { pcre2_match_data_free(md); }
};

// Length of the (possibly invalid) UTF-8 sequence at s[i], at least 1.
size_t utf8_seq_len(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  return std::min(n, s.size() - i);
}

}  // namespace

PreSplit PreSplit::legacy() { return PreSplit(); }

PreSplit PreSplit::regex(const std::string& pattern) {
  auto impl = std::make_shared<Impl>();
  impl->pattern = pattern;
  int err = 0;
  PCRE2_SIZE at = 0;
  // MATCH_INVALID_UTF: byte-level text may hold invalid UTF-8, which then simply never
  // matches (see the class comment) instead of failing the whole match.
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  if (!impl->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    user_error("pre-split pattern does not compile at offset {}: {} (pattern: {})", at,
               reinterpret_cast<const char*>(msg), pattern);
  }
  pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if absent
  PreSplit p;
  p.impl_ = std::move(impl);
  return p;
}

const std::string& PreSplit::pattern() const {
  static const std::string none;
  return impl_ ? impl_->pattern : none;
}

size_t PreSplit::chunk_end(std::string_view text, size_t start) const {
  if (!impl_) return pretokenize_chunk_end(text, start);
  thread_local MatchData data;
  const int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                             start, 0, data.md, nullptr);
  if (rc < 0) {
    // No match in the rest: with a pattern that covers every character (GPT-2's does) only
    // invalid UTF-8 is left; it forms one chunk.
    return text.size();
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
  if (ov[0] > start) return ov[0];           // unmatched bytes before the match
  if (ov[1] > start) return ov[1];           // the match
  return start + utf8_seq_len(text, start);  // an empty match: one character
}

std::vector<std::string_view> PreSplit::split(std::string_view text) const {
  std::vector<std::string_view> chunks;
  for (size_t i = 0; i < text.size();) {
    const size_t j = chunk_end(text, i);
    chunks.push_back(text.substr(i, j - i));
    i = j;
  }
  return chunks;
}

}  // namespace braid
