// JSONL inputs of `braid prepare`: one sample per line, either plain text (a configurable
// field) or a prompt/completion pair whose prompt is not trained on.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace braid {

// A run of text in a sample and whether its tokens are trained on (loss mask 1).
struct TextPiece {
  std::string text;
  bool trained = true;
};

// One sample: pieces encoded one after another (each piece on its own, so no token spans a
// prompt/completion boundary).
struct JsonlSample {
  std::vector<TextPiece> pieces;
};

// Whether path is read as JSONL (its name ends in .jsonl) rather than as one text document.
bool is_jsonl_path(std::string_view path);

// The samples of one JSONL file, in line order; blank lines are skipped. Each line must be a
// JSON object with either a string field `text_field` (all trained) or string fields
// "prompt" and "completion" (the prompt not trained). A line that is not JSON, a line that is
// not an object, a missing or non-string field, and chat data ("messages") are a
// braid::UserError naming path:line and what would be right.
std::vector<JsonlSample> read_jsonl_samples(const std::string& path, std::string_view bytes,
                                            const std::string& text_field);

}  // namespace braid
