// Chat templates: a conversation (system/user/assistant messages) rendered as the model's
// tokenizer_config.json `chat_template` renders it, for the template families braid knows.
//
// No Jinja engine is used: the known templates (Llama 2 chat, Llama 3 Instruct, Mistral
// Instruct, Qwen2 / ChatML, Zephyr / TinyLlama) are recognised by their exact text (whitespace
// at the ends, and "\n" written as an escape or as a newline, do not matter) and rendered by
// code that gives the same text as transformers' apply_chat_template. Any other template is a
// braid::UserError naming where it came from and the supported families.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/jsonl_input.h"

namespace braid {

class Tokenizer;

enum class ChatFamily { Llama2, Llama3, Mistral, ChatMl, Zephyr };

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

// The messages of a chat sample (`where` leads errors, e.g. "data.jsonl:3"): a non-empty JSON
// list of objects with a role (system, user, assistant) and string content.
std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& messages,
                                             const std::string& where);

class ChatTemplate {
 public:
  // The family of template text `tmpl` (UserError naming `source` when it is none of the known
  // templates). bos_token / eos_token: the tokenizer's token texts (bos may be empty when the
  // family does not use it).
  static ChatTemplate recognise(std::string_view tmpl, const std::string& bos_token,
                                const std::string& eos_token, const std::string& source);

  // The template of an HF tokenizer (its tokenizer_config.json chat_template, kept with the
  // tokenizer); UserError naming `source` when the tokenizer has none or it is unknown.
  static ChatTemplate of_tokenizer(const Tokenizer& tok, const std::string& source);

  // The conversation as the template renders it, split into pieces: assistant content and the
  // end-of-turn token that closes it are trained, everything else is not. With
  // add_generation_prompt the text ends with what opens an assistant turn. A conversation the
  // template refuses (roles not alternating, a system message the family has no place for)
  // is a UserError whose message starts with `where`.
  std::vector<TextPiece> render(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, const std::string& where) const;

  ChatFamily family() const { return family_; }
  // "llama2", "llama3", "mistral", "chatml", "zephyr".
  std::string_view family_name() const;
  // The token text that ends an assistant turn (where generation stops).
  const std::string& end_of_turn() const { return end_of_turn_; }

 private:
  ChatFamily family_ = ChatFamily::ChatMl;
  std::string bos_, eos_, end_of_turn_;
  std::string default_system_;  // ChatML: system turn added when the first message is not one
  bool space_after_eos_ = false;  // Mistral v0.1: ' ' after every assistant turn's eos
};

// Token ids of the pieces' concatenation, encoded whole (as apply_chat_template tokenizes the
// rendered text), and each token's trained flag (1: the loss counts it). A token that spans a
// piece boundary takes the flag of the later piece.
struct EncodedChat {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;
};
EncodedChat encode_chat(const Tokenizer& tok, const std::vector<TextPiece>& pieces);

// Python's str.strip() (Jinja's trim): Unicode whitespace removed at both ends of UTF-8 text.
std::string py_strip(std::string_view s);

}  // namespace braid
