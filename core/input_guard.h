// Guards for reading files a user names: refuse what is not a regular file before a blocking
// open, and bound JSON nesting before a recursive parser or printer can overflow the stack.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace braid {

// Deepest JSON nesting ([ and {) braid accepts. Every file braid reads (safetensors header,
// tokenizer, HF config.json, manifest, meta.json) nests fewer than 10 levels.
inline constexpr size_t kMaxJsonDepth = 64;

// Throws braid::UserError "<what> '<path>' nests JSON N levels deep ..." when text nests
// arrays/objects deeper than max_depth. A linear scan that knows strings and escapes, so the
// check itself needs no stack.
void check_json_depth(std::string_view text, const std::string& what, const std::string& path,
                      size_t max_depth = kMaxJsonDepth);

// Opens path read-only and returns the descriptor, or throws braid::UserError naming `what`
// (e.g. "token shard") and the path when it is missing, unreadable, or not a regular file
// (directory, named pipe, socket, device). The open uses O_NONBLOCK so a FIFO with no writer
// cannot hang it; the type is checked on the opened descriptor (fstat), so the file cannot be
// swapped between the check and the open. O_NONBLOCK is cleared before returning.
int open_regular_file(const std::string& path, std::string_view what);

// Reads a whole regular file (open_regular_file rules), e.g. a JSON or YAML document.
std::string read_regular_file(const std::string& path, std::string_view what);

}  // namespace braid
