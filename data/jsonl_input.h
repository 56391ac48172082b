// JSONL inputs of `braid prepare`: one sample per line, either plain text (a configurable
// field), a prompt/completion pair whose prompt is not trained on, or a chat conversation
// (`messages`) rendered by the model's chat template with only the assistant turns trained.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

class ChatTemplate;

// A run of text in a sample and whether its tokens are trained on (loss mask 1).
struct TextPiece {
  std::string text;
  bool trained = true;
};

// One sample: pieces encoded one after another (each piece on its own, so no token spans a
// prompt/completion boundary), or, for a chat conversation, the rendered text encoded whole
// (data/chat_template.h: encode_chat) with no bos or eos added (the template has them).
struct JsonlSample {
  std::vector<TextPiece> pieces;
  bool chat = false;
};

// Gives the chat template `messages` lines are rendered with; called at the first such line
// (it throws a braid::UserError when there is none).
using ChatTemplateSource = std::function<const ChatTemplate&()>;

// Whether path is read as JSONL (its name ends in .jsonl) rather than as one text document.
bool is_jsonl_path(std::string_view path);

// The samples of one JSONL file, in line order; blank lines are skipped. Each line must be a
// JSON object with either a string field `text_field` (all trained) or string fields
// "prompt" and "completion" (the prompt not trained), or a field "messages": a list of
// {"role": "system" | "user" | "assistant", "content": string} objects, the last one from the
// assistant, rendered by chat(). A line that is not JSON, a line that is not an object, a
// missing or non-string field, a bad message, and a conversation the template refuses are a
// braid::UserError naming path:line and what would be right.
std::vector<JsonlSample> read_jsonl_samples(const std::string& path, std::string_view bytes,
                                            const std::string& text_field,
                                            const ChatTemplateSource& chat);


}  // namespace braid
