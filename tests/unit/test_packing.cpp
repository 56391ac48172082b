// Packed sequences (data.packing): a batch holding several samples per row gives each sample
// the loss and the gradients it has alone, for both families (document-masked attention,
// positions restarting at every sample: learned for gpt2, RoPE for llama).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/micro_batch.h"
#include "core/models/transformer.h"
#include "kernel_test_util.h"
#include "model_test_util.h"

namespace braid {
namespace {

using model_test::grads_of;
using model_test::tiny;

using Grads = std::map<std::string, std::vector<float>>;

struct Sample {
  std::vector<int32_t> ids;  // n tokens: n - 1 inputs, n - 1 targets
};

// Sample s of the test: `n` ids from a seeded stream.
Sample make_sample(int n, int vocab, uint64_t seed) {
  Sample s;
  for (int i = 0; i < n; ++i)
    s.ids.push_back(static_cast<int32_t>(mix64(seed * 977 + static_cast<uint64_t>(i)) %
                                         static_cast<uint64_t>(vocab)));
  return s;
}

struct Packed {
  Tensor tokens, targets, starts;  // (B, T)
  // Sample i's positions: row, first position.
  std::vector<std::pair<int64_t, int64_t>> where;
};

// Rows of T positions filled with the samples of `rows` (indices into samples), the rest
// padding (token 0, target -1, one more span).
Packed pack(const std::vector<Sample>& samples, const std::vector<std::vector<int>>& rows,
            int64_t T) {
  const auto B = static_cast<int64_t>(rows.size());
  Packed p{Tensor::empty({B, T}, DType::I32), Tensor::empty({B, T}, DType::I32),
           Tensor::empty({B, T}, DType::I32), {}};
  p.where.resize(samples.size());
  for (int64_t b = 0; b < B; ++b) {
    int32_t* tok = p.tokens.i32() + b * T;
    int32_t* tgt = p.targets.i32() + b * T;
    int32_t* st = p.starts.i32() + b * T;
    int64_t pos = 0;
    for (int i : rows[static_cast<size_t>(b)]) {
      const auto& ids = samples[static_cast<size_t>(i)].ids;
      p.where[static_cast<size_t>(i)] = {b, pos};
      for (size_t j = 0; j + 1 < ids.size(); ++j, ++pos) {
        tok[pos] = ids[j];
        tgt[pos] = ids[j + 1];
        st[pos] = static_cast<int32_t>(p.where[static_cast<size_t>(i)].second);
      }
    }
    EXPECT_LE(pos, T);
    for (int64_t t = pos; t < T; ++t) {
      tok[t] = 0;
      tgt[t] = -1;
      st[t] = static_cast<int32_t>(pos);
    }
  }
  return p;
}

// Loss sum and gradients of one micro-batch (grad scale 1).
LossSum run(Transformer& m, const Tensor& tokens, const Tensor& targets, const Tensor& starts,
            Grads& grads) {
  m.zero_grad(test_ctx());
  MicroBatch mb(test_ctx());
  mb.sample_starts = starts;
  const LossSum ls = m.forward_backward(mb, tokens, targets, 1.0f);
  grads = grads_of(m);
  return ls;
}

void expect_grads_near(const Grads& got, const Grads& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    const std::vector<float>& g = got.at(name);
    ASSERT_EQ(g.size(), w.size());
    double max_err = 0, max_ref = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      max_err = std::max(max_err, std::abs(double(g[i]) - w[i]));
      max_ref = std::max(max_ref, std::abs(double(w[i])));
    }
    EXPECT_LE(max_err, 2e-5 + 1e-4 * max_ref) << what << ": " << name;
  }
}

class Packing : public ::testing::TestWithParam<std::string> {};

// The family's tiny model with room for a packed row of 16 positions.
ModelConfig packing_config(const std::string& family) {
  ModelConfig cfg = tiny(family);
  cfg.context_length = 16;
  return cfg;
}

TEST_P(Packing, EachSampleGetsItsLossAndGradientsAlone) {
  const ModelConfig cfg = packing_config(GetParam());
  Transformer model(test_ctx(), cfg);
  model.init_weights();
  const int64_t T = 16;
  // Row 0: three samples (5 + 4 + 6 = 15 inputs, one padding); row 1: one sample then padding.
  std::vector<Sample> samples;
  const int lengths[] = {6, 5, 7, 9};
  for (int i = 0; i < 4; ++i) samples.push_back(make_sample(lengths[i], cfg.vocab_size, 31 + i));
  const Packed p = pack(samples, {{0, 1, 2}, {3}}, T);

  for (size_t i = 0; i < samples.size(); ++i) {
    SCOPED_TRACE("sample " + std::to_string(i));
    const auto& ids = samples[i].ids;
    const auto n = static_cast<int64_t>(ids.size()) - 1;
    // Alone: a (1, n) batch.
    Tensor tok = Tensor::empty({1, n}, DType::I32), tgt = Tensor::empty({1, n}, DType::I32);
    for (int64_t j = 0; j < n; ++j) {
      tok.i32()[j] = ids[static_cast<size_t>(j)];
      tgt.i32()[j] = ids[static_cast<size_t>(j) + 1];
    }
    Grads alone, packed;
    const LossSum la = run(model, tok, tgt, Tensor(), alone);
    // Packed: the whole batch, with only this sample's targets counted.
    Tensor masked = p.targets.clone();
    const auto [row, first] = p.where[i];
    for (int64_t t = 0; t < masked.numel(); ++t)
      if (t < row * T + first || t >= row * T + first + n) masked.i32()[t] = -1;
    const LossSum lp = run(model, p.tokens, masked, p.starts, packed);
    EXPECT_EQ(lp.count, la.count);
    EXPECT_NEAR(lp.sum, la.sum, 1e-5 * std::max(1.0, std::abs(la.sum)));
    expect_grads_near(packed, alone, "packed vs alone");
  }
}

TEST_P(Packing, WithoutSampleStartsSamplesSeeEachOther) {
  // The same packed batch without its sample starts: later samples attend to earlier ones
  // (and sit at later positions), so their losses change. Guards the test above.
  const ModelConfig cfg = packing_config(GetParam());
  Transformer model(test_ctx(), cfg);
  model.init_weights();
  std::vector<Sample> samples;
  for (int i = 0; i < 2; ++i) samples.push_back(make_sample(7, cfg.vocab_size, 50 + i));
  const Packed p = pack(samples, {{0, 1}}, 16);
  Grads g1, g2;
  const LossSum with = run(model, p.tokens, p.targets, p.starts, g1);
  const LossSum without = run(model, p.tokens, p.targets, Tensor(), g2);
  EXPECT_EQ(with.count, without.count);
  EXPECT_GT(std::abs(with.sum - without.sum), 1e-4);
}

// Evaluation (forward_loss, which validation runs) on a packed batch: each sample's loss is the
// one it has alone, so a packed validation pass scores the samples as they are.
TEST_P(Packing, EvaluationOfAPackedBatchScoresEachSampleAlone) {
  const ModelConfig cfg = packing_config(GetParam());
  Transformer model(test_ctx(), cfg);
  model.init_weights();
  std::vector<Sample> samples;
  const int lengths[] = {6, 5, 7, 9};
  for (int i = 0; i < 4; ++i) samples.push_back(make_sample(lengths[i], cfg.vocab_size, 71 + i));
  const Packed p = pack(samples, {{0, 1, 2}, {3}}, 16);
  double alone_sum = 0;
  int64_t alone_count = 0;
  for (const Sample& s : samples) {
    const auto n = static_cast<int64_t>(s.ids.size()) - 1;
    Tensor tok = Tensor::empty({1, n}, DType::I32), tgt = Tensor::empty({1, n}, DType::I32);
    for (int64_t j = 0; j < n; ++j) {
      tok.i32()[j] = s.ids[static_cast<size_t>(j)];
      tgt.i32()[j] = s.ids[static_cast<size_t>(j) + 1];
    }
    const LossSum l = model.forward_loss(test_ctx(), tok, tgt);
    alone_sum += l.sum;
    alone_count += l.count;
  }
  const LossSum packed = model.forward_loss(test_ctx(), p.tokens, p.targets, p.starts);
  EXPECT_EQ(packed.count, alone_count);
  EXPECT_NEAR(packed.sum, alone_sum, 1e-5 * std::max(1.0, std::abs(alone_sum)));
  // Without the sample starts the later samples see the earlier ones.
  const LossSum unmasked = model.forward_loss(test_ctx(), p.tokens, p.targets);
  EXPECT_GT(std::abs(unmasked.sum - alone_sum), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Families, Packing, ::testing::Values("gpt2", "llama"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace braid
