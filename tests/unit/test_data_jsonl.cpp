// JSONL inputs of braid prepare, the per-token loss mask they store, and the loss it gives:
// flags written beside the shards, masked targets, bad lines, prompt tokens adding no gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/micro_batch.h"
#include "data/jsonl_input.h"
#include "data/prepare.h"
#include "data/sampler.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "data_test_util.h"
#include "model_test_util.h"

namespace braid {
namespace {

using testing::TempDir;
using testing::write_text;

std::vector<int32_t> all_ids(const std::string& path) {
  TokenShard s(path);
  std::vector<int32_t> ids(static_cast<size_t>(s.size()));
  if (s.size() > 0) s.read(0, s.size(), ids.data());
  return ids;
}

PrepareOptions byte_options(const TempDir& d, double val_fraction = 0.0) {
  PrepareOptions o;
  o.inputs = {d.file("in")};
  o.out_dir = d.file("out");
  o.tokenizer = "byte";
  o.eot = "none";
  o.val_fraction = val_fraction;
  return o;
}

using testing::user_error_of;

TEST(DataJsonl, PromptCompletionTokensAreMaskedAndSamplesMarked) {
  TempDir d("jsonl_mask");
  std::filesystem::create_directories(d.file("in"));
  write_text(d.file("in/a.jsonl"),
             "{\"prompt\": \"Q1 \", \"completion\": \"yes\"}\n"
             "\n"
             "{\"text\": \"plain\"}\n"
             "{\"prompt\": \"Q2\", \"completion\": \"no\"}\n");
  const PrepareSummary s = prepare(byte_options(d, 0.34));  // floor(3 * 0.34) = 1 sample held out
  EXPECT_EQ(s.jsonl_samples, 3);
  EXPECT_TRUE(s.flags);
  const auto tok = Tokenizer::load(d.file("out/" + std::string(kTokenizerFile)));
  EXPECT_EQ(tok->decode(all_ids(d.file("out/train.bin"))), "Q1 yesplain");
  EXPECT_EQ(tok->decode(all_ids(d.file("out/val.bin"))), "Q2no");
  EXPECT_EQ(s.untrained_train_tokens, 3);
  // bit 0: trained, bit 1: first token of a sample.
  EXPECT_EQ(all_ids(d.file("out/train.flags.bin")),
            (std::vector<int32_t>{2, 0, 0, 1, 1, 1, 3, 1, 1, 1, 1}));
  EXPECT_EQ(all_ids(d.file("out/val.flags.bin")), (std::vector<int32_t>{2, 0, 1, 1}));
  const nlohmann::json meta = nlohmann::json::parse(testing::read_text(d.file("out/meta.json")));
  EXPECT_EQ(meta["untrained_train_tokens"], 3);
  EXPECT_EQ(meta["flags"], "train.flags.bin");
}

TEST(DataJsonl, TextFieldIsConfigurableAndBpeFlagsMatchTheShard) {
  TempDir d("jsonl_field");
  std::filesystem::create_directories(d.file("in"));
  std::string lines;
  for (int i = 0; i < 20; ++i)
    lines += nlohmann::json{{"body", testing::sample_text(30, static_cast<uint32_t>(i))}}.dump() + "\n";
  write_text(d.file("in/b.jsonl"), lines);
  write_text(d.file("in/c.txt"), testing::sample_text(200));
  PrepareOptions o = byte_options(d, 0.1);
  o.tokenizer = "bpe";
  o.eot = "auto";
  o.text_field = "body";
  const PrepareSummary s = prepare(o);
  EXPECT_EQ(s.jsonl_samples, 20);
  EXPECT_EQ(s.documents, 21);
  EXPECT_EQ(s.untrained_train_tokens, 0);
  for (const char* name : {"train", "val"}) {
    const auto ids = all_ids(d.file(std::string("out/") + name + ".bin"));
    const auto flags = all_ids(d.file(std::string("out/") + name + ".flags.bin"));
    ASSERT_EQ(ids.size(), flags.size()) << name;
    int64_t starts = 0;
    for (int32_t f : flags) {
      EXPECT_TRUE(f & kFlagTrained);
      starts += (f & kFlagSampleStart) ? 1 : 0;
    }
    // train: 18 samples + the text document; val: 2 samples + the document's end
    EXPECT_EQ(starts, std::string(name) == "train" ? 19 : 3) << name;
  }
  // The default field name no longer matches: the line is refused with its file and line.
  o.text_field = "text";
  o.force = true;
  const std::string msg = user_error_of([&] { prepare(o); });
  EXPECT_NE(msg.find("b.jsonl:1: no 'text' field"), std::string::npos) << msg;
}

TEST(DataJsonl, BadLinesNameFileAndLineAndWriteNothing) {
  struct Case {
    std::string body, expected;
  };
  const std::vector<Case> cases = {
      {"{\"text\": \"ok\"}\n{\"text\": \"cut\n", "x.jsonl:2: the line is not valid JSON"},
      {"{\"text\": \"ok\"}\n[1, 2]\n", "x.jsonl:2: the line is a JSON array"},
      {"{\"content\": \"hi\"}\n", "x.jsonl:1: no 'text' field"},
      {"{\"text\": 5}\n", "x.jsonl:1: field 'text' is number; expected a string"},
      {"{\"prompt\": \"p\"}\n", "x.jsonl:1: has 'prompt' without 'completion'"},
      {"{\"messages\": []}\n", "x.jsonl:1: 'messages' is an empty list"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", "
       "\"content\": \"yo\"}]}\n",
       "x.jsonl:1: chat data ('messages') is rendered by the model's chat template; pass "
       "--tokenizer"},
  };
  for (const Case& c : cases) {
    TempDir d("jsonl_bad");
    std::filesystem::create_directories(d.file("in"));
    write_text(d.file("in/x.jsonl"), c.body);
    const std::string msg = user_error_of([&] { prepare(byte_options(d)); });
    EXPECT_NE(msg.find(c.expected), std::string::npos) << "got: " << msg;
    EXPECT_FALSE(std::filesystem::exists(d.file("out"))) << c.expected;
  }
}

TEST(DataJsonl, UntrainedTargetsAreIgnoredUnlessTrainOnAll) {
  TempDir d("jsonl_targets");
  std::vector<int32_t> ids(40), flags(40);
  for (int i = 0; i < 40; ++i) {
    ids[static_cast<size_t>(i)] = i % 7;
    flags[static_cast<size_t>(i)] = (i % 5 < 2) ? 0 : kFlagTrained;  // 2 of every 5 untrained
  }
  write_shard(d.file("train.bin"), ids, 7);
  write_shard(d.file("train.flags.bin"), flags, 4);
  const TokenShard shard(d.file("train.bin"));
  DataConfig cfg;
  cfg.micro_batch = 3;
  cfg.seq_len = 9;
  const std::optional<TokenShard> f = open_loss_flags(shard, cfg);
  ASSERT_TRUE(f.has_value());
  const Batch masked = sample_train_batch(shard, cfg, 4, 0, 0, 1, &*f);
  const Batch full = sample_train_batch(shard, cfg, 4, 0, 0, 1);
  int64_t ignored = 0;
  for (int64_t i = 0; i < masked.targets.numel(); ++i) {
    const int32_t t = full.targets.i32()[i], m = masked.targets.i32()[i];
    if (m == -1) {
      ++ignored;
    } else {
      EXPECT_EQ(m, t);
    }
  }
  EXPECT_GT(ignored, 0);
  // Row by row: exactly the targets whose shard position has flag 0 are ignored.
  for (int b = 0; b < cfg.micro_batch; ++b) {
    const int64_t start = train_window_start(cfg.seed, 4, 0, b, shard.size() - cfg.seq_len);
    for (int t = 0; t < cfg.seq_len; ++t) {
      const bool trained = flags[static_cast<size_t>(start + 1 + t)] & kFlagTrained;
      EXPECT_EQ(masked.targets.i32()[b * cfg.seq_len + t] == -1, !trained) << b << " " << t;
    }
  }
  cfg.train_on = TrainOn::All;
  EXPECT_FALSE(open_loss_flags(shard, cfg).has_value());
  // A flags file that does not match its shard is refused.
  cfg.train_on = TrainOn::Completions;
  write_shard(d.file("train.flags.bin"), std::span(flags).first(39), 4);
  const std::string msg = user_error_of([&] { (void)open_loss_flags(shard, cfg); });
  EXPECT_NE(msg.find("holds 39 values"), std::string::npos) << msg;
}

// The masked loss is the mean over trained targets, and its gradient is exactly the mean of
// the trained positions' gradients: prompt positions contribute nothing.
TEST(DataJsonl, PromptTargetsContributeNoGradient) {
  using model_test::grads_of;
  const ModelConfig cfg = model_test::tiny("llama");
  ExecContext ctx;
  Transformer m(ctx, cfg);
  m.init_weights();
  const int64_t B = 2, T = 8;
  const Tensor tok = model_test::tokens_of(B, T, cfg.vocab_size, 5);
  const Tensor all = model_test::tokens_of(B, T, cfg.vocab_size, 6);
  // Positions t < 3 of each row are the prompt (flag 0).
  std::vector<int32_t> flags(static_cast<size_t>(B * T + 1));
  for (int64_t i = 0; i < B * T; ++i) flags[static_cast<size_t>(i + 1)] = (i % T) < 3 ? 0 : 1;
  TempDir d("jsonl_grad");
  write_shard(d.file("f.bin"), flags, 4);
  const TokenShard f(d.file("f.bin"));
  Tensor masked = Tensor::empty({B, T}, DType::I32);
  std::copy(all.i32(), all.i32() + B * T, masked.i32());
  apply_loss_mask(f, 0, static_cast<int>(B * T), masked.i32());
  const int64_t trained = B * (T - 3);

  auto run = [&](const Tensor& targets, float scale) {
    m.zero_grad(ctx);
    MicroBatch mb(ctx);
    const LossSum ls = m.forward_backward(mb, tok, targets, scale);
    return std::make_pair(ls, grads_of(m));
  };
  const auto [ls_masked, g_masked] = run(masked, 1.0f / static_cast<float>(trained));
  EXPECT_EQ(ls_masked.count, trained);
  // The sum of the single-position gradients of the trained positions, and their losses.
  std::map<std::string, std::vector<double>> g_sum;
  double loss_sum = 0;
  bool prompt_grad_nonzero = false;
  for (int64_t i = 0; i < B * T; ++i) {
    Tensor one = Tensor::empty({B, T}, DType::I32);
    for (int64_t j = 0; j < B * T; ++j) one.i32()[j] = j == i ? all.i32()[i] : -1;
    const auto [ls, g] = run(one, 1.0f);
    if (masked.i32()[i] == -1) {
      for (const auto& [name, v] : g)
        for (float x : v) prompt_grad_nonzero |= x != 0.0f;
      continue;
    }
    loss_sum += ls.sum;
    for (const auto& [name, v] : g) {
      auto& acc = g_sum[name];
      acc.resize(v.size());
      for (size_t k = 0; k < v.size(); ++k) acc[k] += v[k];
    }
  }
  EXPECT_TRUE(prompt_grad_nonzero);  // unmasked, a prompt target would have moved the weights
  EXPECT_NEAR(ls_masked.sum, loss_sum, 1e-4 * std::abs(loss_sum));
  ASSERT_EQ(g_masked.size(), g_sum.size());
  for (const auto& [name, v] : g_masked)
    for (size_t k = 0; k < v.size(); ++k)
      EXPECT_NEAR(v[k], g_sum[name][k] / static_cast<double>(trained), 1e-5) << name << " " << k;
}

}  // namespace
}  // namespace braid
