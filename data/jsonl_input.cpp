// Parsing of JSONL samples for `braid prepare`.
#include "data/jsonl_input.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/chat_template.h"

namespace braid {

bool is_jsonl_path(std::string_view path) { return path.ends_with(".jsonl"); }

namespace {

const std::string& string_field(const nlohmann::json& obj, const char* key,
                                const std::string& path, int64_t line) {
  const nlohmann::json& v = obj.at(key);
  if (!v.is_string())
    user_error("{}:{}: field '{}' is {}; expected a string", path, line, key, v.type_name());
  return v.get_ref<const std::string&>();
}

}  // namespace

std::vector<JsonlSample> read_jsonl_samples(const std::string& path, std::string_view bytes,
                                            const std::string& text_field,
                                            const ChatTemplateSource& chat) {
  std::vector<JsonlSample> out;
  int64_t line_no = 0;
  size_t at = 0;
  while (at < bytes.size()) {
    size_t end = bytes.find('\n', at);
    if (end == std::string_view::npos) end = bytes.size();
    std::string_view line = bytes.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json obj = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded())
      user_error("{}:{}: the line is not valid JSON; expected one JSON object per line, such as "
                 "{{\"{}\": \"...\"}} or {{\"prompt\": \"...\", \"completion\": \"...\"}}",
                 path, line_no, text_field);
    if (!obj.is_object())
      user_error("{}:{}: the line is a JSON {}; expected a JSON object", path, line_no,
                 obj.type_name());
    JsonlSample s;
    if (obj.contains("prompt") || obj.contains("completion")) {
      if (!obj.contains("prompt") || !obj.contains("completion"))
        user_error("{}:{}: has '{}' without '{}'; a prompt/completion sample needs both", path,
                   line_no, obj.contains("prompt") ? "prompt" : "completion",
                   obj.contains("prompt") ? "completion" : "prompt");
      s.pieces.push_back({string_field(obj, "prompt", path, line_no), false});
      s.pieces.push_back({string_field(obj, "completion", path, line_no), true});
    } else if (obj.contains(text_field)) {
      s.pieces.push_back({string_field(obj, text_field.c_str(), path, line_no), true});
    } else if (obj.contains("messages")) {
      const std::string where = fmt::format("{}:{}", path, line_no);
      const std::vector<ChatMessage> messages = parse_chat_messages(obj["messages"], where);
      if (messages.back().role != "assistant")
        user_error("{}: the last message is from the {}; a conversation to train on ends with "
                   "an assistant message",
                   where, messages.back().role);
      const ChatTemplate* tmpl = nullptr;
      try {
        tmpl = &chat();
      } catch (const UserError& e) {
        user_error("{}: {}", where, e.what());
      }
      s.pieces = tmpl->render(messages, /*add_generation_prompt=*/false, where);
      s.chat = true;
    } else {
      user_error("{}:{}: no '{}' field, no 'prompt'/'completion' pair and no 'messages'; "
                 "expected one of them (choose the text field with --text-field)",
                 path, line_no, text_field);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace braid
