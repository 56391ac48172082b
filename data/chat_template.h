// Chat templates: a conversation (system/user/assistant messages) rendered as the model's
// tokenizer_config.json `chat_template` renders it, for the template families braid knows.
//
// No Jinja engine is used: the known templates (Llama 2 chat, Llama 3 / 3.1 / 3.2 / 3.3 Instruct,
// Mistral Instruct v0.1 / v0.2 / v0.3, Qwen2 / Qwen2.5 / ChatML, Zephyr / TinyLlama) are
// recognised by their exact text (whitespace
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

// Llama3Dated: Llama 3.1 / 3.2 / 3.3 (a system turn with the knowledge cutoff and a date);
// MistralV02: the system message opens the first user turn; MistralV03: the last one.
enum class ChatFamily { Llama2, Llama3, Mistral, ChatMl, Zephyr, Llama3Dated, MistralV02, MistralV03 };

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
  // "llama2", "llama3", "llama3.1" (also 3.3), "llama3.2", "mistral", "mistral-v0.2",
  // "mistral-v0.3", "chatml", "qwen2.5", "zephyr".
  std::string_view family_name() const { return name_; }
  // Llama 3.1 / 3.2 / 3.3: the "Today Date: ..." of the system turn. Unset, it is what
  // transformers renders when apply_chat_template gets no date_string: 3.1 and 3.3's templates
  // write "26 Jul 2024", 3.2's today's date ("%d %b %Y", local time, as strftime_now).
  void set_date_string(std::string date) { date_string_ = std::move(date); }
  std::string date_string() const;
  // The token text that ends an assistant turn (where generation stops).
  const std::string& end_of_turn() const { return end_of_turn_; }

 private:
  ChatFamily family_ = ChatFamily::ChatMl;
  std::string name_ = "chatml";
  std::string bos_, eos_, end_of_turn_;
  std::string date_string_;      // Llama3Dated: set_date_string's, else the template's default
  bool date_from_clock_ = false;  // Llama 3.2: today's date by default
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
