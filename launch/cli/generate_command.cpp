// `braid generate MODEL --prompt TEXT`: sample from a trained model with a KV cache; past the
// context length the window slides (decoding restarts from the last half of the context).
// With --chat the prompt is a user message rendered by the model's chat template, and
// sampling stops at the template's end-of-turn token.
#include <cstdio>
#include <memory>

#include "core/models/generate.h"
#include "core/random.h"
#include "data/chat_template.h"
#include "data/hf_bpe.h"
#include "data/tokenizer.h"
#include "launch/cli/commands.h"
#include "launch/io/model_io.h"

namespace braid {

namespace {

void print_ids(const std::vector<int32_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
  std::printf("\n");
}

}  // namespace

void add_generate_command(CLI::App& app) {
  struct Opts {
    ModelOptions placement;
    std::string model, prompt = "\n", tokenizer, system;
    int tokens = 200, top_k = 40;
    float temperature = 0.8f;
    uint64_t seed = 0;
    bool ids = false, no_adapter = false, chat = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand("generate", "Sample text from a checkpoint (KV-cache decoding)");
  c->add_option("model", o->model, "Checkpoint directory, run directory or HF directory")
      ->required();
  c->add_option("--prompt", o->prompt, "Text to continue")->default_str("\\n");
  c->add_option("--tokens", o->tokens,
                "Tokens to generate; past the model's context the window slides (decoding "
                "restarts from the last half of the context)")
      ->check(CLI::Range(1, 1 << 30));
  c->add_option("--temperature", o->temperature, "Softmax temperature; 0 is greedy")
      ->check(CLI::Range(0.0, 100.0));
  c->add_option("--top-k", o->top_k, "Sample among the k most likely tokens (0: all)");
  c->add_option("--seed", o->seed, "Sampling seed (a non-negative integer)");
  c->add_flag("--chat", o->chat,
              "The prompt is a user message: render it with the model's chat template "
              "(tokenizer_config.json chat_template) and its generation prompt, print only the "
              "reply, and stop at the template's end-of-turn token");
  c->add_option("--system", o->system, "With --chat: a system message before the prompt");
  c->add_option("--tokenizer", o->tokenizer,
                "Tokenizer file (default: the one saved with the model)");
  c->add_flag("--ids", o->ids, "Print the token ids (prompt, then generated) instead of text");
  c->add_flag("--no-adapter", o->no_adapter,
              "On a LoRA run: sample from the base model alone (by default its adapters are "
              "applied)");
  add_model_options(c, o->placement);
  c->callback([o] {
    LoadedModel lm = load_model(o->model, o->placement, !o->no_adapter);
    if (lm.adapter_modules > 0) std::fprintf(stderr, "note: %s\n", lm.adapter_note().c_str());
    const std::string tok_path = o->tokenizer.empty() ? lm.tokenizer : o->tokenizer;
    BRAID_USER_CHECK(!tok_path.empty(), "no tokenizer file found near {}; pass --tokenizer",
                     lm.source);
    BRAID_USER_CHECK(o->chat || o->system.empty(), "--system needs --chat");
    std::unique_ptr<Tokenizer> tok = load_tokenizer_path(tok_path);
    const ModelConfig& mc = lm.model->config();
    BRAID_USER_CHECK(tok->vocab_size() <= mc.vocab_size,
                     "{} has {} tokens but the model's vocabulary is {}", tok_path,
                     tok->vocab_size(), mc.vocab_size);
    BRAID_USER_CHECK(o->top_k <= mc.vocab_size, "--top-k {} exceeds the vocabulary ({} tokens)",
                     o->top_k, mc.vocab_size);
    std::optional<int32_t> stop;
    std::string prompt_text = o->prompt;
    if (o->chat) {
      const ChatTemplate tmpl = ChatTemplate::of_tokenizer(*tok, tok_path);
      std::vector<ChatMessage> messages;
      if (!o->system.empty()) messages.push_back({"system", o->system});
      messages.push_back({"user", o->prompt});
      prompt_text.clear();
      for (const TextPiece& p : tmpl.render(messages, /*add_generation_prompt=*/true, "--chat"))
        prompt_text += p.text;
      const std::vector<int32_t> eot = tok->encode(tmpl.end_of_turn());
      BRAID_USER_CHECK(eot.size() == 1,
                       "{}: the chat template's end-of-turn token '{}' is not one "
                       "token of the tokenizer",
                       tok_path, tmpl.end_of_turn());
      stop = eot[0];
    }
    std::vector<int32_t> all = tok->encode(prompt_text);
    BRAID_USER_CHECK(!all.empty(), "--prompt encodes to no tokens; give a non-empty prompt");
    const size_t keep = static_cast<size_t>(std::max(1, mc.context_length / 2));
    if (all.size() >= static_cast<size_t>(mc.context_length))
      std::fprintf(stderr,
                   "note: the prompt has %zu tokens; the model sees its last %zu (context %d)\n",
                   all.size(), keep, mc.context_length);
    if (o->ids) {
      print_ids(all);
    } else if (!o->chat) {  // a chat prints the reply alone
      std::fputs(o->prompt.c_str(), stdout);
    }
    // Stream the text as it is produced; decode incrementally over the whole output so
    // multi-byte characters split across tokens print correctly.
    std::vector<int32_t> out;
    size_t printed = 0;
    int left = o->tokens;
    for (uint64_t round = 0; left > 0; ++round) {
      std::vector<int32_t> window = all;
      if (window.size() >= static_cast<size_t>(mc.context_length))
        window.assign(all.end() - static_cast<std::ptrdiff_t>(keep), all.end());
      SampleOptions so;
      so.max_new_tokens = left;
      so.temperature = o->temperature;
      so.top_k = o->top_k;
      so.seed = round == 0 ? o->seed : mix64(o->seed ^ (round * 0x9E3779B97F4A7C15ull));
      so.stop_token = stop;
      const std::vector<int32_t> got = generate(*lm.ctx, *lm.model, window, so, [&](int32_t t) {
        if (stop && t == *stop && !o->ids) return;  // the end of the turn is not printed
        out.push_back(t);
        if (o->ids) return;
        const std::string text = tok->decode(out);
        std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
        std::fflush(stdout);
        printed = text.size();
      });
      BRAID_CHECK(!got.empty(), "generate produced no token");
      all.insert(all.end(), got.begin(), got.end());
      left -= static_cast<int>(got.size());
      if (stop && got.back() == *stop) break;
    }
    if (o->ids)
      print_ids(out);
    else
      std::fputs("\n", stdout);
  });
}

}  // namespace braid
