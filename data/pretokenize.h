// The pre-split applied before BPE: merges never cross the chunk boundaries it draws.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace braid {

// Splits text into chunks, GPT-2 style but ASCII-only and regex-free:
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

}  // namespace braid
