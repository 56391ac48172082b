// The known chat templates, recognised by their text and rendered as Jinja renders them.
#include "data/chat_template.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/chat_template_texts.h"
#include "data/hf_bpe.h"
#include "data/tokenizer.h"

namespace braid {

namespace {

// The templates as published in the families' tokenizer_config.json, in canonical form
// (canonical() below). tools/make_chat_fixtures.py reads them from here.
constexpr std::string_view kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}"
    "{% endif %}{% endfor %}";
constexpr std::string_view kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
constexpr std::string_view kMistralHead =
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}";
constexpr std::string_view kMistralTail =
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}";
constexpr std::string_view kMistralV01Eos = "{{ message['content'] + eos_token + ' ' }}";
constexpr std::string_view kMixtralEos = "{{ message['content'] + eos_token}}";
constexpr std::string_view kChatMlBody =
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
constexpr std::string_view kQwen2Head =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\n";  // + default system message +
constexpr std::string_view kQwen2Mid = "<|im_end|>\n' }}{% endif %}";
constexpr std::string_view kZephyr =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
    "{{ '<|user|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n"
    "{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
    "{% endfor %}";

// Template text as compared: ends trimmed, CRLF as LF, the escape \n as a newline (a JSON file
// may hold either inside the template's string literals; Jinja reads both as a newline).
std::string canonical(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\\' && i + 1 < t.size() && t[i + 1] == 'n') {
      out.push_back('\n');
      ++i;
    } else if (t[i] == '\r' && i + 1 < t.size() && t[i + 1] == '\n') {
      continue;
    } else {
      out.push_back(t[i]);
    }
  }
  const size_t b = out.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return out.substr(b, out.find_last_not_of(" \t\r\n") - b + 1);
}

template <size_t N>
std::string joined_pieces(const std::string_view (&pieces)[N]) {
  std::string s;
  for (std::string_view p : pieces) s += p;
  return s;
}

// The newer templates, held as published (chat_template_texts.h), in canonical form.
struct Published {
  std::string_view name;
  ChatFamily family;
  const std::string text;
  bool date_from_clock = false;     // Llama 3.2: strftime_now's date
  std::string_view default_system;  // Qwen2.5: the system turn of a conversation without one
};
const std::vector<Published>& published_templates() {
  static const std::vector<Published> all = {
      {"llama3.1", ChatFamily::Llama3Dated, canonical(joined_pieces(chat_text::kLlama31Pieces)),
       false, ""},
      {"llama3.2", ChatFamily::Llama3Dated, canonical(joined_pieces(chat_text::kLlama32Pieces)),
       true, ""},
      {"qwen2.5", ChatFamily::ChatMl, canonical(chat_text::kQwen25), false,
       "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
      {"mistral-v0.2", ChatFamily::MistralV02, canonical(chat_text::kMistralV02), false, ""},
      {"mistral-v0.3", ChatFamily::MistralV03, canonical(chat_text::kMistralV03), false, ""},
  };
  return all;
}

// Collects rendered text, joining neighbours with the same flag.
struct PieceList {
  std::vector<TextPiece> pieces;
  void add(std::string text, bool trained) {
    if (text.empty()) return;
    if (!pieces.empty() && pieces.back().trained == trained)
      pieces.back().text += text;
    else
      pieces.push_back({std::move(text), trained});
  }
};

// Length of the UTF-8 character starting at s[i] (1 for a stray byte).
size_t utf8_len(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  return i + n <= s.size() ? n : 1;
}

uint32_t code_point(std::string_view s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k])); };
  switch (n) {
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    case 4: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
    default: return b(0);
  }
}

// Python's str.isspace() for one code point.
bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& messages,
                                             const std::string& where) {
  if (!messages.is_array() || messages.empty())
    user_error("{}: 'messages' is {}; expected a non-empty list of {{\"role\": ..., "
               "\"content\": ...}} objects",
               where, messages.is_array() ? "an empty list" : messages.type_name());
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& m = messages[i];
    if (!m.is_object())
      user_error("{}: message {} is a JSON {}; expected an object with 'role' and 'content'",
                 where, i + 1, m.type_name());
    for (const char* key : {"role", "content"}) {
      if (!m.contains(key))
        user_error("{}: message {} has no '{}'; expected 'role' (system, user or assistant) "
                   "and 'content' (a string)",
                   where, i + 1, key);
      if (!m[key].is_string())
        user_error("{}: message {}: '{}' is {}; expected a string", where, i + 1, key,
                   m[key].type_name());
    }
    const std::string& role = m["role"].get_ref<const std::string&>();
    if (role != "system" && role != "user" && role != "assistant")
      user_error("{}: message {} has role '{}'; expected system, user or assistant", where, i + 1,
                 role);
    out.push_back({role, m["content"].get<std::string>()});
  }
  return out;
}

std::string py_strip(std::string_view s) {
  // Walk the characters once, remembering where the first and after the last non-space are.
  size_t first = s.size(), end = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_len(s, i);
    if (!py_space(code_point(s, i, n))) {
      first = std::min(first, i);
      end = i + n;
    }
    i += n;
  }
  return first < end ? std::string(s.substr(first, end - first)) : std::string();
}

ChatTemplate ChatTemplate::recognise(std::string_view tmpl, const std::string& bos_token,
                                     const std::string& eos_token, const std::string& source) {
  const std::string t = canonical(tmpl);
  ChatTemplate c;
  c.bos_ = bos_token;
  c.eos_ = eos_token;
  bool known = true;
  const auto published = std::find_if(published_templates().begin(), published_templates().end(),
                                       [&](const Published& p) { return p.text == t; });
  if (published != published_templates().end()) {
    c.family_ = published->family;
    c.name_ = std::string(published->name);
    c.date_from_clock_ = published->date_from_clock;
    c.default_system_ = std::string(published->default_system);
  } else if (t == kLlama2) {
    c.family_ = ChatFamily::Llama2;
    c.name_ = "llama2";
  } else if (t == kLlama3) {
    c.family_ = ChatFamily::Llama3;
    c.name_ = "llama3";
  } else if (t == std::string(kMistralHead) + std::string(kMistralV01Eos) + std::string(kMistralTail)) {
    c.family_ = ChatFamily::Mistral;
    c.name_ = "mistral";
    c.space_after_eos_ = true;
  } else if (t == std::string(kMistralHead) + std::string(kMixtralEos) + std::string(kMistralTail)) {
    c.family_ = ChatFamily::Mistral;
    c.name_ = "mistral";
  } else if (t == "{% for message in messages %}" + std::string(kChatMlBody)) {
    c.family_ = ChatFamily::ChatMl;
  } else if (t == kZephyr) {
    c.family_ = ChatFamily::Zephyr;
    c.name_ = "zephyr";
  } else if (t.starts_with(kQwen2Head) && t.ends_with(kChatMlBody)) {
    // Qwen2: a default system message between the head and the body.
    const std::string_view rest =
        std::string_view(t).substr(kQwen2Head.size(), t.size() - kQwen2Head.size() - kChatMlBody.size());
    const size_t mid = rest.find(kQwen2Mid);
    known = mid != std::string_view::npos && mid + kQwen2Mid.size() == rest.size() &&
            rest.substr(0, mid).find_first_of("'\\") == std::string_view::npos;
    c.family_ = ChatFamily::ChatMl;
    if (known) c.default_system_ = std::string(rest.substr(0, mid));
  } else {
    known = false;
  }
  if (!known)
    user_error("{}: the chat template is not one braid can render; supported are the templates of "
               "Llama 2 chat ([INST] <<SYS>>), Llama 3 / 3.1 / 3.2 / 3.3 Instruct "
               "(<|start_header_id|>), Mistral Instruct v0.1 / v0.2 / v0.3 and Mixtral ([INST]), "
               "Qwen2 / Qwen2.5 Instruct and ChatML (<|im_start|>) and Zephyr / TinyLlama chat "
               "(<|user|>), as their models publish them (without tool calling)",
               source);
  const bool llama3 = c.family_ == ChatFamily::Llama3 || c.family_ == ChatFamily::Llama3Dated;
  c.end_of_turn_ = llama3                            ? "<|eot_id|>"
                   : c.family_ == ChatFamily::ChatMl ? "<|im_end|>"
                                                     : eos_token;
  const bool needs_bos = c.family_ != ChatFamily::ChatMl && c.family_ != ChatFamily::Zephyr;
  if (needs_bos && bos_token.empty())
    user_error("{}: the {} chat template uses bos_token, but the tokenizer configuration has "
               "none; set bos_token in tokenizer_config.json",
               source, c.family_name());
  if (c.end_of_turn_.empty())
    user_error("{}: the {} chat template ends turns with eos_token, but the tokenizer "
               "configuration has none; set eos_token in tokenizer_config.json",
               source, c.family_name());
  return c;
}

ChatTemplate ChatTemplate::of_tokenizer(const Tokenizer& tok, const std::string& source) {
  const auto* hf = dynamic_cast<const HfBpeTokenizer*>(&tok);
  if (!hf || !hf->config().contains("chat_template"))
    user_error("{} has no chat template; chat data and --chat need a Hugging Face tokenizer "
               "whose tokenizer_config.json (or chat_template.jinja) holds the model's "
               "chat_template",
               source);
  auto token_text = [&](const char* key) {
    const nlohmann::json& c = hf->config();
    if (!c.contains(key) || c[key].is_null()) return std::string();
    const nlohmann::json& v = c[key];
    return v.is_string() ? v.get<std::string>() : v.value("content", std::string());
  };
  return recognise(hf->config()["chat_template"].get<std::string>(), token_text("bos_token"),
                   token_text("eos_token"), source);
}

std::string ChatTemplate::date_string() const {
  if (!date_string_.empty()) return date_string_;
  if (!date_from_clock_) return "26 Jul 2024";
  // transformers' strftime_now: datetime.now().strftime(format), local time.
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%d %b %Y", &local);
  return std::string(buf, n);
}

std::vector<TextPiece> ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                            bool add_generation_prompt,
                                            const std::string& where) const {
  if (messages.empty()) user_error("{}: the conversation has no messages", where);
  PieceList out;
  // Families that take a first system message apart: the turns after it alternate.
  const bool system_apart = family_ == ChatFamily::Llama2 || family_ == ChatFamily::MistralV02 ||
                            family_ == ChatFamily::MistralV03;
  const bool sys_first = system_apart && messages[0].role == "system";
  const auto alternate = [&](size_t turn, const ChatMessage& m) {
    if ((m.role == "user") != (turn % 2 == 0))
      user_error("{}: the {} chat template needs the messages{} to alternate user/assistant/"
                 "user/..., starting with user; message {} is '{}'",
                 where, family_name(), system_apart ? " after an optional first system message" : "",
                 turn + 1 + sys_first, m.role);
  };
  const auto only_user_assistant = [&](size_t i, const ChatMessage& m) {
    user_error("{}: message {} is a '{}' message; the {} chat template supports only user and "
               "assistant messages{}",
               where, i + 1, m.role, family_name(),
               system_apart ? " after an optional first system message" : "");
  };
  switch (family_) {
    case ChatFamily::Llama2: {
      const bool sys = messages[0].role == "system";
      for (size_t i = sys ? 1 : 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        const size_t turn = i - (sys ? 1 : 0);
        if (m.role == "system")
          user_error("{}: message {} is a system message; the llama2 chat template takes one "
                     "only as the first message",
                     where, i + 1);
        alternate(turn, m);
        const std::string content =
            turn == 0 && sys ? "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + m.content
                             : m.content;
        if (m.role == "user")
          out.add(fmt::format("{}[INST] {} [/INST]", bos_, py_strip(content)), false);
        else
          out.add(fmt::format(" {} {}", py_strip(content), eos_), true);
      }
      break;
    }
    case ChatFamily::Llama3:
      out.add(bos_, false);
      for (const ChatMessage& m : messages) {
        out.add(fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n", m.role), false);
        out.add(py_strip(m.content) + "<|eot_id|>", m.role == "assistant");
      }
      if (add_generation_prompt) out.add("<|start_header_id|>assistant<|end_header_id|>\n\n", false);
      break;
    case ChatFamily::Mistral:
      out.add(bos_, false);
      for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        alternate(i, m);
        if (m.role == "user") {
          out.add("[INST] " + m.content + " [/INST]", false);
        } else if (m.role == "assistant") {
          out.add(m.content + eos_, true);
          if (space_after_eos_) out.add(" ", false);
        } else {
          only_user_assistant(i, m);
        }
      }
      break;
    case ChatFamily::MistralV02:
    case ChatFamily::MistralV03: {
      const bool v3 = family_ == ChatFamily::MistralV03;
      const size_t first = sys_first ? 1 : 0;
      // v0.3 checks the alternation of the whole conversation before writing anything.
      if (v3)
        for (size_t i = first; i < messages.size(); ++i) alternate(i - first, messages[i]);
      out.add(bos_, false);
      for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (!v3) alternate(i - first, m);
        // v0.2: the system message opens the first user turn; v0.3: the last message, when
        // that is a user turn (so a conversation ending with the assistant loses it).
        const bool with_system =
            sys_first && (v3 ? i + 1 == messages.size() : i == first);
        const std::string sys = with_system ? messages[0].content + "\n\n" : "";
        if (m.role == "user") {
          out.add(v3 ? "[INST] " + sys + m.content + "[/INST]"
                     : " [INST] " + sys + m.content + " [/INST]",
                  false);
        } else if (m.role == "assistant") {
          out.add(" ", false);
          out.add((v3 ? py_strip(m.content) : m.content) + eos_, true);
        } else {
          only_user_assistant(i, m);
        }
      }
      break;
    }
    case ChatFamily::Llama3Dated: {
      out.add(bos_, false);
      const bool sys = messages[0].role == "system";
      out.add("<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
              "2023\nToday Date: " +
                  date_string() + "\n\n" + (sys ? py_strip(messages[0].content) : "") +
                  "<|eot_id|>",
              false);
      for (size_t i = sys ? 1 : 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        out.add(fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n", m.role), false);
        out.add(py_strip(m.content) + "<|eot_id|>", m.role == "assistant");
      }
      if (add_generation_prompt) out.add("<|start_header_id|>assistant<|end_header_id|>\n\n", false);
      break;
    }
    case ChatFamily::ChatMl:
      if (!default_system_.empty() && messages[0].role != "system")
        out.add("<|im_start|>system\n" + default_system_ + "<|im_end|>\n", false);
      for (const ChatMessage& m : messages) {
        out.add(fmt::format("<|im_start|>{}\n", m.role), false);
        out.add(m.content + "<|im_end|>", m.role == "assistant");
        out.add("\n", false);
      }
      if (add_generation_prompt) out.add("<|im_start|>assistant\n", false);
      break;
    case ChatFamily::Zephyr:
      for (const ChatMessage& m : messages) {
        out.add(fmt::format("<|{}|>\n", m.role), false);
        out.add(m.content + eos_, m.role == "assistant");
        out.add("\n", false);
      }
      if (add_generation_prompt) out.add("<|assistant|>\n", false);
      break;
  }
  return std::move(out.pieces);
}

EncodedChat encode_chat(const Tokenizer& tok, const std::vector<TextPiece>& pieces) {
  std::string text;
  for (const TextPiece& p : pieces) text += p.text;
  EncodedChat e;
  e.ids = tok.encode(text);
  e.trained.assign(e.ids.size(), 0);
  // Where each piece's tokens start: the tokens the text before it encodes to, as far as they
  // agree with the whole text's (a token spanning the boundary goes to the later piece).
  size_t at = 0, from = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const size_t end_byte = at + pieces[i].text.size();
    size_t to = e.ids.size();
    if (i + 1 < pieces.size()) {
      const std::vector<int32_t> before = tok.encode(std::string_view(text).substr(0, end_byte));
      const auto [a, b] = std::mismatch(before.begin(), before.end(), e.ids.begin(), e.ids.end());
      to = std::max(from, static_cast<size_t>(a - before.begin()));
    }
    std::fill(e.trained.begin() + static_cast<std::ptrdiff_t>(from),
              e.trained.begin() + static_cast<std::ptrdiff_t>(to), pieces[i].trained ? 1 : 0);
    from = to;
    at = end_byte;
  }
  return e;
}

}  // namespace braid
