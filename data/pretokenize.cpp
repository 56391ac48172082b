// The BPE pre-split: classify bytes, cut runs of one class.
#include "data/pretokenize.h"

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

}  // namespace braid
