// `braid generate MODEL --prompt TEXT`: sample from a trained model with a KV cache.
#include <cstdio>
#include <memory>

#include "core/models/generate.h"
#include "data/tokenizer.h"
#include "launch/commands.h"
#include "launch/model_io.h"

namespace braid {

void add_generate_command(CLI::App& app) {
  struct Opts {
    std::string model, prompt = "\n", tokenizer;
    int tokens = 200, top_k = 40;
    float temperature = 0.8f;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand("generate", "Sample text from a checkpoint (KV-cache decoding)");
  c->add_option("model", o->model, "Checkpoint directory, run directory or HF directory")->required();
  c->add_option("--prompt", o->prompt, "Text to continue");
  c->add_option("--tokens", o->tokens, "Tokens to generate")->check(CLI::PositiveNumber);
  c->add_option("--temperature", o->temperature, "Softmax temperature; 0 is greedy")->check(CLI::NonNegativeNumber);
  c->add_option("--top-k", o->top_k, "Sample among the k most likely tokens (0: all)")->check(CLI::NonNegativeNumber);
  c->add_option("--seed", o->seed, "Sampling seed");
  c->add_option("--tokenizer", o->tokenizer, "tokenizer.json (default: the one saved in the run directory)");
  c->callback([o] {
    LoadedModel lm = load_model(o->model);
    const std::string tok_path = o->tokenizer.empty() ? lm.tokenizer : o->tokenizer;
    BRAID_USER_CHECK(!tok_path.empty(), "no tokenizer.json found near {}; pass --tokenizer", lm.source);
    std::unique_ptr<Tokenizer> tok = Tokenizer::load(tok_path);
    BRAID_USER_CHECK(tok->vocab_size() <= lm.model->config().vocab_size,
                     "{} has {} tokens but the model's vocabulary is {}", tok_path,
                     tok->vocab_size(), lm.model->config().vocab_size);
    SampleOptions so;
    so.max_new_tokens = o->tokens;
    so.temperature = o->temperature;
    so.top_k = o->top_k;
    so.seed = o->seed;
    std::fputs(o->prompt.c_str(), stdout);
    // Stream the text as it is produced; decode incrementally over the whole output so
    // multi-byte characters split across tokens print correctly.
    std::vector<int32_t> ids;
    size_t printed = 0;
    generate(*lm.ctx, *lm.model, tok->encode(o->prompt), so, [&](int32_t t) {
      ids.push_back(t);
      const std::string text = tok->decode(ids);
      std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
      std::fflush(stdout);
      printed = text.size();
    });
    std::fputs("\n", stdout);
  });
}

}  // namespace braid
