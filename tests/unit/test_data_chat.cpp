// Chat templates against transformers' apply_chat_template (text and token ids, stored by
// tools/make_chat_fixtures.py), the loss mask of chat samples, and bad chat data.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/file_util.h"
#include "data/hf_bpe.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data_test_util.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;
using testing::user_error_of;
using testing::write_text;

const std::string kData = BRAID_SOURCE_DIR "/tests/data";

const json& reference() {
  static const json r = read_json_file(kData + "/chat/reference.json", "reference");
  return r;
}

const json& find_case(const std::string& name) {
  for (const json& c : reference()["cases"])
    if (c["name"] == name) return c;
  throw std::runtime_error("no case " + name);
}

// The case's tokenizer with its bos/eos and chat template, as tokenizer_config.json gives them.
std::unique_ptr<Tokenizer> case_tokenizer(const json& c) {
  auto tok = load_tokenizer_path(kData + "/" + c["tokenizer"].get<std::string>() + "/tokenizer.json");
  json cfg = {{"bos_token", c["bos_token"]},
              {"eos_token", c["eos_token"]},
              {"chat_template", c["chat_template"]}};
  dynamic_cast<HfBpeTokenizer&>(*tok).apply_config(cfg, "test config");
  return tok;
}

// A model folder (tokenizer.json + tokenizer_config.json) for the case, for braid prepare.
void write_model_folder(const json& c, const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(kData + "/" + c["tokenizer"].get<std::string>() + "/tokenizer.json",
                dir / "tokenizer.json");
  json cfg = {{"bos_token", c["bos_token"]},
              {"eos_token", c["eos_token"]},
              {"chat_template", c["chat_template"]}};
  write_text((dir / "tokenizer_config.json").string(), cfg.dump(1));
}

std::vector<ChatMessage> messages_of(const json& conv) {
  return parse_chat_messages(conv["messages"], "test");
}

std::string joined(const std::vector<TextPiece>& pieces) {
  std::string s;
  for (const TextPiece& p : pieces) s += p.text;
  return s;
}

std::vector<int32_t> all_ids(const std::string& path) {
  TokenShard s(path);
  std::vector<int32_t> ids(static_cast<size_t>(s.size()));
  if (s.size() > 0) s.read(0, s.size(), ids.data());
  return ids;
}

// The case's template, with the date_string the fixtures pinned (Llama 3.2) given to braid too.
ChatTemplate case_template(const json& c, const Tokenizer& tok) {
  ChatTemplate t = ChatTemplate::of_tokenizer(tok, "test");
  if (c.contains("template_kwargs")) t.set_date_string(c["template_kwargs"]["date_string"]);
  return t;
}

class ChatFamilyCase : public ::testing::TestWithParam<const char*> {};

TEST_P(ChatFamilyCase, TextAndIdsMatchApplyChatTemplate) {
  const json& c = find_case(GetParam());
  const auto tok = case_tokenizer(c);
  const ChatTemplate t = case_template(c, *tok);
  EXPECT_EQ(t.family_name(), c["name"].get<std::string>() == "qwen2" ? "chatml" : c["name"].get<std::string>() == "mixtral" ? "mistral" : c["name"].get<std::string>());
  int checked = 0;
  for (const json& conv : c["conversations"]) {
    const bool gen = conv["add_generation_prompt"].get<bool>();
    const std::vector<ChatMessage> m = messages_of(conv);
    if (conv.contains("error")) {  // the template's raise_exception
      const std::string msg = user_error_of([&] { t.render(m, gen, "x.jsonl:7"); });
      EXPECT_EQ(msg.rfind("x.jsonl:7: ", 0), 0u) << msg;
      continue;
    }
    const std::vector<TextPiece> pieces = t.render(m, gen, "test");
    EXPECT_EQ(joined(pieces), conv["text"].get<std::string>()) << GetParam();
    const EncodedChat e = encode_chat(*tok, pieces);
    EXPECT_EQ(e.ids, conv["ids"].get<std::vector<int32_t>>()) << GetParam() << ": "
                                                              << conv["text"].get<std::string>();
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

TEST_P(ChatFamilyCase, OnlyAssistantContentAndItsEndOfTurnAreTrained) {
  const json& c = find_case(GetParam());
  const auto tok = case_tokenizer(c);
  const ChatTemplate t = case_template(c, *tok);
  const std::vector<int32_t> eot = tok->encode(t.end_of_turn());
  ASSERT_EQ(eot.size(), 1u) << t.end_of_turn();
  for (const json& conv : c["conversations"]) {
    if (conv.contains("error") || conv["add_generation_prompt"].get<bool>()) continue;
    const std::vector<ChatMessage> m = messages_of(conv);
    const EncodedChat e = encode_chat(*tok, t.render(m, false, "test"));
    ASSERT_EQ(e.trained.size(), e.ids.size());
    std::vector<int32_t> trained, untrained;
    int turns_ended = 0;
    for (size_t i = 0; i < e.ids.size(); ++i) {
      (e.trained[i] ? trained : untrained).push_back(e.ids[i]);
      turns_ended += e.trained[i] && e.ids[i] == eot[0];
      // Every trained run ends with the end-of-turn token.
      if (e.trained[i] && (i + 1 == e.ids.size() || !e.trained[i + 1])) {
        EXPECT_EQ(e.ids[i], eot[0]) << GetParam() << " token " << i;
      }
    }
    const std::string got_trained = tok->decode(trained), got_untrained = tok->decode(untrained);
    int assistant = 0;
    for (const ChatMessage& msg : m) {
      const std::string content = py_strip(msg.content);
      if (msg.role == "assistant") {
        ++assistant;
        EXPECT_NE(got_trained.find(content), std::string::npos) << GetParam() << ": " << content;
      } else {
        EXPECT_EQ(got_trained.find(content), std::string::npos) << GetParam() << ": " << content;
        // (Mistral v0.3 drops the system message of a conversation ending with the assistant.)
        if (conv["text"].get<std::string>().find(content) != std::string::npos) {
          EXPECT_NE(got_untrained.find(content), std::string::npos) << GetParam() << ": " << content;
        }
      }
    }
    EXPECT_EQ(turns_ended, assistant) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ChatFamilyCase,
                         ::testing::Values("llama2", "mistral", "mixtral", "zephyr", "llama3",
                                           "qwen2", "chatml", "llama3.1", "llama3.2", "qwen2.5",
                                           "mistral-v0.2", "mistral-v0.3"));

// Llama 3.1 / 3.3 write the template's fixed date and 3.2 today's, as transformers renders them
// when apply_chat_template gets no date_string; a given date wins.
TEST(ChatTemplate, LlamaDatesAreTheTemplatesDefaults) {
  const auto date_in = [](const ChatTemplate& t) {
    const std::string text = joined(t.render({{"user", "hi"}}, true, "t"));
    const std::string key = "Today Date: ";
    const size_t at = text.find(key);
    return at == std::string::npos ? std::string("(none)")
                                   : text.substr(at + key.size(), text.find('\n', at) - at - key.size());
  };
  const json& c31 = find_case("llama3.1");
  ChatTemplate t31 = ChatTemplate::recognise(c31["chat_template"].get<std::string>(),
                                             "<|begin_of_text|>", "<|eot_id|>", "t");
  EXPECT_EQ(date_in(t31), "26 Jul 2024");
  t31.set_date_string("01 Jan 2030");
  EXPECT_EQ(date_in(t31), "01 Jan 2030");
  const ChatTemplate t32 = ChatTemplate::recognise(find_case("llama3.2")["chat_template"].get<std::string>(),
                                                   "<|begin_of_text|>", "<|eot_id|>", "t");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char today[32];
  today[std::strftime(today, sizeof today, "%d %b %Y", &local)] = 0;
  EXPECT_EQ(date_in(t32), today);
}

TEST(ChatTemplate, ChangedNewerTemplatesAreRefused) {
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"llama3.1", "26 Jul 2024"}, {"llama3.2", "December 2023"},
      {"qwen2.5", "created by Alibaba Cloud"}, {"mistral-v0.2", "' [INST] '"},
      {"mistral-v0.3", "\"[INST] \""}};
  for (const auto& [name, text] : edits) {
    std::string tmpl = find_case(name)["chat_template"].get<std::string>();
    const size_t at = tmpl.find(text);
    ASSERT_NE(at, std::string::npos) << name << ": " << text;
    tmpl = tmpl.substr(0, at + 1) + "x" + tmpl.substr(at + 1);
    const std::string msg = user_error_of([&] { ChatTemplate::recognise(tmpl, "<s>", "</s>", "m"); });
    EXPECT_NE(msg.find("m: the chat template is not one braid can render"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Llama 3 / 3.1 / 3.2 / 3.3 Instruct"), std::string::npos) << msg;
  }
}

TEST(ChatTemplate, RecognisesEscapedNewlinesAndReadsQwenDefaultSystem) {
  // tokenizer_config.json files write "\n" inside the template's strings either way.
  std::string escaped = find_case("llama3")["chat_template"].get<std::string>();
  for (size_t at; (at = escaped.find('\n')) != std::string::npos;) escaped.replace(at, 1, "\\n");
  EXPECT_EQ(ChatTemplate::recognise("  " + escaped + "\n", "<s>", "</s>", "t").family(),
            ChatFamily::Llama3);
  std::string qwen = find_case("qwen2")["chat_template"].get<std::string>();
  const std::string def = "You are a helpful assistant.";
  qwen.replace(qwen.find(def), def.size(), "You are Braid.");
  const ChatTemplate t = ChatTemplate::recognise(qwen, "", "<|im_end|>", "t");
  EXPECT_EQ(t.family(), ChatFamily::ChatMl);
  EXPECT_EQ(joined(t.render({{"user", "hi"}}, true, "t")),
            "<|im_start|>system\nYou are Braid.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, UnknownTemplateIsRefusedNamingTheFamilies) {
  std::string changed = find_case("chatml")["chat_template"].get<std::string>();
  changed.replace(changed.find("<|im_end|>'"), 11, "<|im_end|> '");  // a space after each turn
  for (const std::string& tmpl : {changed, std::string("{{ messages }}")}) {
    const std::string msg =
        user_error_of([&] { ChatTemplate::recognise(tmpl, "<s>", "</s>", "m/tokenizer_config.json"); });
    EXPECT_NE(msg.find("m/tokenizer_config.json: the chat template is not one braid can render"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("Llama 3 / 3.1 / 3.2 / 3.3 Instruct"), std::string::npos) << msg;
  }
  // A tokenizer without a chat template.
  const auto tok = load_tokenizer_path(kData + "/hf_tokenizers/qwen2");
  const std::string msg = user_error_of([&] { ChatTemplate::of_tokenizer(*tok, "dir"); });
  EXPECT_NE(msg.find("dir has no chat template"), std::string::npos) << msg;
}

TEST(ChatTemplate, PyStripRemovesUnicodeWhitespace) {
  EXPECT_EQ(py_strip("\u3000 \t a b \n\u00a0"), "a b");
  EXPECT_EQ(py_strip(" \n "), "");
  EXPECT_EQ(py_strip("caf\u00e9"), "caf\u00e9");
}

TEST(ChatPrepare, ShardHoldsTheTemplateIdsWithAssistantTokensTrained) {
  TempDir d("chat_prepare");
  const json& c = find_case("llama3");
  write_model_folder(c, d.path() / "model");
  // Conversations 0 and 2 of the fixtures (the ones without a generation prompt).
  const json& convs = c["conversations"];
  fs::create_directories(d.path() / "in");
  write_text(d.file("in/chat.jsonl"), json({{"messages", convs[0]["messages"]}}).dump() + "\n" +
                                          json({{"messages", convs[2]["messages"]}}).dump() + "\n");
  PrepareOptions o;
  o.inputs = {d.file("in")};
  o.out_dir = d.file("out");
  o.tokenizer = d.file("model");
  o.val_fraction = 0;
  const PrepareSummary s = prepare(o);
  EXPECT_EQ(s.jsonl_samples, 2);
  std::vector<int32_t> want = convs[0]["ids"].get<std::vector<int32_t>>();
  const std::vector<int32_t> second = convs[2]["ids"].get<std::vector<int32_t>>();
  want.insert(want.end(), second.begin(), second.end());
  EXPECT_EQ(all_ids(d.file("out/train.bin")), want);  // no bos or eos added to the template's
  const std::vector<int32_t> flags = all_ids(d.file("out/train.flags.bin"));
  ASSERT_EQ(flags.size(), want.size());
  const auto tok = case_tokenizer(c);
  const ChatTemplate t = ChatTemplate::of_tokenizer(*tok, "t");
  const EncodedChat e0 = encode_chat(*tok, t.render(messages_of(convs[0]), false, "t"));
  int64_t untrained = 0;
  for (size_t i = 0; i < flags.size(); ++i) {
    const bool start = i == 0 || i == e0.ids.size();
    EXPECT_EQ((flags[i] & kFlagSampleStart) != 0, start) << i;
    if (i < e0.ids.size()) {
      EXPECT_EQ(flags[i] & kFlagTrained, e0.trained[i]) << i;
    }
    untrained += (flags[i] & kFlagTrained) == 0;
  }
  EXPECT_EQ(s.untrained_train_tokens, untrained);
  EXPECT_GT(untrained, 0);
  EXPECT_LT(untrained, static_cast<int64_t>(flags.size()));
  // The template travels with the tokenizer written beside the shards.
  const auto saved = Tokenizer::load(d.file("out/" + std::string(kTokenizerFile)));
  EXPECT_EQ(ChatTemplate::of_tokenizer(*saved, "saved").family(), ChatFamily::Llama3);
}

TEST(ChatPrepare, BadConversationsNameFileAndLineAndWriteNothing) {
  struct Case {
    std::string family, line, expected;
  };
  const std::string ok = R"({"role": "user", "content": "hi"})";
  const std::vector<Case> cases = {
      {"chatml", R"({"messages": {"role": "user"}})", "c.jsonl:2: 'messages' is object; expected a non-empty list"},
      {"chatml", R"({"messages": [{"role": "robot", "content": "x"}]})", "c.jsonl:2: message 1 has role 'robot'; expected system, user or assistant"},
      {"chatml", R"({"messages": [{"role": "user"}]})", "c.jsonl:2: message 1 has no 'content'"},
      {"chatml", R"({"messages": [{"role": "user", "content": 3}]})", "c.jsonl:2: message 1: 'content' is number; expected a string"},
      {"chatml", R"({"messages": [)" + ok + "]}", "c.jsonl:2: the last message is from the user; a conversation to train on ends with an assistant message"},
      {"mistral", R"({"messages": [{"role": "system", "content": "s"}, )" + ok + R"(, {"role": "assistant", "content": "a"}]})",
       "c.jsonl:2: the mistral chat template needs the messages to alternate"},
      {"llama2", R"({"messages": [)" + ok + R"(, {"role": "user", "content": "again"}, {"role": "assistant", "content": "a"}]})",
       "c.jsonl:2: the llama2 chat template needs the messages after an optional first system message to alternate"},
  };
  for (const Case& k : cases) {
    TempDir d("chat_bad");
    write_model_folder(find_case(k.family), d.path() / "model");
    fs::create_directories(d.path() / "in");
    write_text(d.file("in/c.jsonl"), R"({"messages": [)" + ok +
                                         R"(, {"role": "assistant", "content": "yo"}]})" "\n" +
                                         k.line + "\n");
    PrepareOptions o;
    o.inputs = {d.file("in")};
    o.out_dir = d.file("out");
    o.tokenizer = d.file("model");
    const std::string msg = user_error_of([&] { prepare(o); });
    EXPECT_NE(msg.find(k.expected), std::string::npos) << "got: " << msg;
    EXPECT_FALSE(fs::exists(d.file("out"))) << k.expected;
  }
}

}  // namespace
}  // namespace braid
