// Activation checkpointing (core/models/checkpointing.h): full and selective recomputation
// give the gradients of the plain model bit for bit (inline and deferred weight gradients,
// grad-ready reports, two micro-batches in flight) and measurably less activation memory.
#include <gtest/gtest.h>

#include <map>

#include "core/models/checkpointing.h"
#include "kernel_test_util.h"
#include "model_test_util.h"

namespace braid {
namespace {

using model_test::grads_of;
using model_test::tiny;
using model_test::tokens_of;

struct Mode {
  std::string family, mode;
  int every;
};

class Checkpointing : public ::testing::TestWithParam<Mode> {};

// Forward, loss, backward of two micro-batches in flight (F0 F1 B1 B0), optionally deferring
// weight gradients; returns the losses and the grad-ready order.
std::pair<std::vector<double>, std::vector<std::string>> run(Transformer& m, bool defer) {
  ExecContext& ctx = test_ctx();
  const int V = m.config().vocab_size;
  MicroBatch m0(ctx, defer), m1(ctx, defer);
  std::vector<std::string> fired;
  const Tensor t0 = tokens_of(2, 6, V, 5), g0 = tokens_of(2, 6, V, 6);
  const Tensor t1 = tokens_of(2, 6, V, 7), g1 = tokens_of(2, 6, V, 8);
  const Tensor h0 = m.forward(t0, m0);
  const Tensor h1 = m.forward(t1, m1);
  m0.on_grad_ready = m1.on_grad_ready = [&](Parameter& p) { fired.push_back(p.name); };
  std::vector<double> losses;
  losses.push_back(m.loss(h1, g1, 0.05f, m1).sum);
  m.backward(Tensor(), m1);
  losses.push_back(m.loss(h0, g0, 0.05f, m0).sum);
  m.backward(Tensor(), m0);
  m1.run_deferred();
  m0.run_deferred();
  EXPECT_EQ(m0.stash_size() + m1.stash_size(), 0u);
  return {losses, fired};
}

TEST_P(Checkpointing, GradientsBitIdenticalToNoCheckpointing) {
  const Mode p = GetParam();
  const ModelConfig cfg = tiny(p.family, 3);
  ExecContext& ctx = test_ctx();
  for (bool defer : {false, true}) {
    Transformer plain(ctx, cfg), ckpt(ctx, cfg);
    plain.init_weights();
    ckpt.init_weights();
    const int wrapped = apply_checkpointing(ckpt, parse_enum<braid::Checkpointing>("mode", p.mode), p.every);
    if (p.mode == "full") {
      EXPECT_EQ(wrapped, (cfg.n_layer + p.every - 1) / p.every);
    } else {
      EXPECT_EQ(wrapped, 3 * cfg.n_layer);  // two norms and the activation per block
    }
    EXPECT_EQ(ckpt.parameters().size(), plain.parameters().size());
    const auto a = run(plain, defer);
    const auto b = run(ckpt, defer);
    EXPECT_EQ(a.first, b.first);
    EXPECT_EQ(a.second, b.second) << "grad-ready order";
    EXPECT_EQ(grads_of(plain), grads_of(ckpt));
    EXPECT_EQ(grads_of(plain).size(), plain.parameters().size());
    // Evaluation goes through the wrappers too.
    const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 1), tgt = tokens_of(2, 6, cfg.vocab_size, 2);
    EXPECT_EQ(plain.forward_loss(ctx, tok, tgt).sum, ckpt.forward_loss(ctx, tok, tgt).sum);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Checkpointing,
                         ::testing::Values(Mode{"gpt2", "full", 1}, Mode{"gpt2", "full", 2},
                                           Mode{"gpt2", "selective", 1}, Mode{"llama", "full", 1},
                                           Mode{"llama", "full", 2}, Mode{"llama", "selective", 1}),
                         [](const auto& info) {
                           return info.param.family + "_" + info.param.mode + "_every" +
                                  std::to_string(info.param.every);
                         });

// Peak activation bytes of one micro-batch's forward + backward on a fresh context.
int64_t activation_peak(const ModelConfig& cfg, const std::string& mode) {
  ExecContext ctx;
  Transformer m(ctx, cfg);
  m.init_weights();
  apply_checkpointing(m, parse_enum<braid::Checkpointing>("mode", mode), 1);
  const Tensor tok = tokens_of(4, 32, cfg.vocab_size, 3), tgt = tokens_of(4, 32, cfg.vocab_size, 4);
  ctx.allocator().reset_peaks();
  MicroBatch mb(ctx);
  m.forward_backward(mb, tok, tgt, 1.0f / 128);
  return ctx.allocator().stats().peak_bytes[static_cast<int>(MemCategory::Activations)];
}

TEST(CheckpointingMemory, PeakActivationsShrink) {
  for (const std::string family : {"gpt2", "llama"}) {
    ModelConfig cfg = tiny(family, 6);
    cfg.n_embd = 64;
    cfg.n_head = 4;
    cfg.context_length = 32;
    cfg.vocab_size = 64;
    if (family == "llama") {
      cfg.n_kv_head = 2;
      cfg.ffn_hidden = 172;
    }
    const int64_t none = activation_peak(cfg, "none");
    const int64_t selective = activation_peak(cfg, "selective");
    const int64_t full = activation_peak(cfg, "full");
    std::printf("%s activation peak: none %lld, selective %lld, full %lld bytes\n", family.c_str(),
                static_cast<long long>(none), static_cast<long long>(selective),
                static_cast<long long>(full));
    // Selective drops the norm and activation outputs (~a quarter of a block's stash); full
    // keeps one block input per block plus one block's stash.
    EXPECT_LT(selective, none * 0.85) << family;
    EXPECT_LT(full, none / 3) << family;
  }
}

TEST(CheckpointingMemory, UnknownModeIsRefused) {
  ExecContext& ctx = test_ctx();
  Transformer m(ctx, tiny("gpt2"));
  kernel_test::expect_error_with([&] { apply_checkpointing(m, static_cast<braid::Checkpointing>(7), 1); },
                                 {"mode 7", "none, full or selective"});
}

}  // namespace
}  // namespace braid
