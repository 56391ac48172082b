// The vocab-parallel cross-entropy steps (core/kernels/cross_entropy.h, vocab_slice_*) on three
// simulated ranks' logit blocks, with the collectives done by hand: every step bit for bit
// against a serial float loop with the same operation order, and losses and gradient against a
// double-precision softmax over the whole (unpadded) vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/cpu/vec_math.h"
#include "core/kernels/cross_entropy.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using kernel_test::bitwise_equal;
using kernel_test::expect_close;
using kernel_test::expect_error_with;

constexpr int64_t kN = 7, kVocab = 10, kRanks = 3, kRows = 4;  // padded vocabulary 12
constexpr float kScale = 0.37f;

// (N, kRanks * kRows) logits; the two padding columns hold large values that must not count.
Tensor full_logits() {
  Tensor t = kernel_test::random_tensor({kN, kRanks * kRows}, 11, -4.0, 4.0);
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t j = kVocab; j < kRanks * kRows; ++j) t.f32()[i * kRanks * kRows + j] = 50.0f;
  return t;
}

// Rank r's (N, kRows) block: columns [r kRows, (r + 1) kRows).
Tensor block_of(const Tensor& full, int64_t r) {
  Tensor b = Tensor::empty({kN, kRows});
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t j = 0; j < kRows; ++j)
      b.f32()[i * kRows + j] = full.f32()[i * kRanks * kRows + r * kRows + j];
  return b;
}

// Targets in every rank's block, the last real row, and ignored rows.
Tensor targets() { return Tensor::from_vector_i32({3, -1, 9, 0, 5, 8, -1}, {kN}); }

struct RankResult {
  Tensor losses, grad;  // (N); this rank's (N, kRows) d loss / d logit
};

// The kernels on every rank, with all-reduce Max and Sum done in rank order.
std::vector<RankResult> run_kernels(const Tensor& full, const Tensor& tgt) {
  ExecContext& ctx = test_ctx();
  std::vector<Tensor> blocks, mx, st;
  for (int64_t r = 0; r < kRanks; ++r) {
    blocks.push_back(block_of(full, r));
    mx.push_back(Tensor::empty({kN}));
    st.push_back(kernel_test::nan_tensor({2 * kN}));
    Tensor tl = st[r].slice0(kN, 2 * kN);
    vocab_slice_partials(ctx, mx[r], tl, blocks[r], tgt, VocabSlice{r * kRows, kVocab});
  }
  Tensor m = mx[0].clone();
  for (int64_t r = 1; r < kRanks; ++r)
    for (int64_t i = 0; i < kN; ++i) m.f32()[i] = std::max(m.f32()[i], mx[r].f32()[i]);
  for (int64_t r = 0; r < kRanks; ++r) {
    Tensor se = st[r].slice0(0, kN);
    vocab_slice_exp(ctx, blocks[r], se, m, VocabSlice{r * kRows, kVocab});
  }
  Tensor s = st[0].clone();
  for (int64_t r = 1; r < kRanks; ++r)
    for (int64_t i = 0; i < 2 * kN; ++i) s.f32()[i] += st[r].f32()[i];
  std::vector<RankResult> out;
  for (int64_t r = 0; r < kRanks; ++r) {
    RankResult res{kernel_test::nan_tensor({kN}), blocks[r]};
    vocab_slice_losses(ctx, res.losses, s.slice0(0, kN), m, s.slice0(kN, 2 * kN), tgt);
    vocab_slice_grad(ctx, res.grad, s.slice0(0, kN), tgt, VocabSlice{r * kRows, kVocab}, kScale);
    out.push_back(res);
  }
  return out;
}

// The same steps as one serial float loop each (the order the kernels promise).
std::vector<RankResult> run_serial(const Tensor& full, const Tensor& tgt_t) {
  const int32_t* tgt = tgt_t.i32();
  std::vector<Tensor> blocks;
  std::vector<float> m(kN, -std::numeric_limits<float>::infinity()), se(kN, 0.0f), tl(kN, 0.0f);
  for (int64_t r = 0; r < kRanks; ++r) {
    blocks.push_back(block_of(full, r));
    const int64_t real = std::max<int64_t>(0, std::min(kRows, kVocab - r * kRows));
    for (int64_t i = 0; i < kN; ++i) {
      float mr = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < real; ++j) mr = std::max(mr, blocks[r].f32()[i * kRows + j]);
      m[i] = r == 0 ? mr : std::max(m[i], mr);
    }
  }
  std::vector<float> ser(kRanks * kN), tlr(kRanks * kN, 0.0f);
  for (int64_t r = 0; r < kRanks; ++r) {
    const int64_t real = std::max<int64_t>(0, std::min(kRows, kVocab - r * kRows));
    float* lg = blocks[r].f32();
    for (int64_t i = 0; i < kN; ++i) {
      const int64_t local = tgt[i] - r * kRows;
      if (tgt[i] >= 0 && local >= 0 && local < real) tlr[r * kN + i] = lg[i * kRows + local];
      // The exponentials and their sum are the CPU's row primitive at the context's level
      // (checked against double in test_kernels_cpu_blocks.cpp); the rest of this reference is
      // plain float arithmetic.
      ser[r * kN + i] = cpu::exp_shifted_sum_row(test_ctx().cpu_isa(), lg + i * kRows, real, m[i]);
    }
  }
  for (int64_t i = 0; i < kN; ++i) {
    se[i] = ser[i];
    tl[i] = tlr[i];
    for (int64_t r = 1; r < kRanks; ++r) {
      se[i] += ser[r * kN + i];
      tl[i] += tlr[r * kN + i];
    }
  }
  std::vector<RankResult> out;
  for (int64_t r = 0; r < kRanks; ++r) {
    const int64_t real = std::max<int64_t>(0, std::min(kRows, kVocab - r * kRows));
    RankResult res{Tensor::empty({kN}), blocks[r]};
    float* lg = res.grad.f32();
    for (int64_t i = 0; i < kN; ++i) {
      res.losses.f32()[i] = tgt[i] < 0 ? 0.0f : std::log(se[i]) + m[i] - tl[i];
      const float inv = tgt[i] < 0 ? 0.0f : kScale / se[i];
      for (int64_t j = 0; j < kRows; ++j)
        lg[i * kRows + j] = j < real ? lg[i * kRows + j] * inv : 0;
      const int64_t local = tgt[i] - r * kRows;
      if (tgt[i] >= 0 && local >= 0 && local < real) lg[i * kRows + local] -= kScale;
    }
    out.push_back(res);
  }
  return out;
}

TEST(KernelsVocabSlice, StepsMatchTheSerialLoopBitForBit) {
  const Tensor full = full_logits(), tgt = targets();
  const std::vector<RankResult> got = run_kernels(full, tgt), want = run_serial(full, tgt);
  for (int64_t r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(bitwise_equal(got[r].losses, want[r].losses)) << "losses on rank " << r;
    EXPECT_TRUE(bitwise_equal(got[r].grad, want[r].grad)) << "gradient on rank " << r;
  }
}

TEST(KernelsVocabSlice, LossesAndGradientMatchDoubleSoftmax) {
  const Tensor full = full_logits(), tgt = targets();
  const std::vector<RankResult> got = run_kernels(full, tgt);
  std::vector<double> loss(kN, 0.0), grad(kN * kRanks * kRows, 0.0);
  for (int64_t i = 0; i < kN; ++i) {
    const int32_t t = tgt.i32()[i];
    if (t < 0) continue;
    const float* l = full.f32() + i * kRanks * kRows;
    double m = -1e300, s = 0;
    for (int64_t j = 0; j < kVocab; ++j) m = std::max(m, double(l[j]));
    for (int64_t j = 0; j < kVocab; ++j) s += std::exp(l[j] - m);
    loss[i] = std::log(s) + m - l[t];
    for (int64_t j = 0; j < kVocab; ++j)
      grad[i * kRanks * kRows + j] = kScale * (std::exp(l[j] - m) / s - (j == t));
  }
  for (int64_t r = 0; r < kRanks; ++r) {
    expect_close(got[r].losses, loss, 1e-6, 1e-5, "losses");
    std::vector<double> block(kN * kRows);
    for (int64_t i = 0; i < kN; ++i)
      for (int64_t j = 0; j < kRows; ++j)
        block[i * kRows + j] = grad[i * kRanks * kRows + r * kRows + j];
    expect_close(got[r].grad, block, 1e-7, 1e-5, "gradient");
  }
}

TEST(KernelsVocabSlice, BlockOfPaddingOnlyGivesNothing) {
  // A rank whose rows all lie past the vocabulary: no max, no target, a zero gradient.
  ExecContext& ctx = test_ctx();
  Tensor logits = kernel_test::random_tensor({kN, kRows}, 3);
  const Tensor tgt = targets();
  const VocabSlice pad{kVocab + 2, kVocab};
  EXPECT_EQ(pad.real(kRows), 0);
  Tensor mx = kernel_test::nan_tensor({kN}), tl = kernel_test::nan_tensor({kN});
  vocab_slice_partials(ctx, mx, tl, logits, tgt, pad);
  Tensor se = Tensor::empty({kN});
  se.fill_(1.0f);
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_EQ(mx.f32()[i], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(tl.f32()[i], 0.0f);
  }
  vocab_slice_grad(ctx, logits, se, tgt, pad, kScale);
  EXPECT_TRUE(bitwise_equal(logits, Tensor::zeros({kN, kRows})));
}

TEST(KernelsVocabSlice, RejectsTargetsOutsideTheVocabularyBeforeWriting) {
  ExecContext& ctx = test_ctx();
  const Tensor logits = kernel_test::random_tensor({3, kRows}, 4);
  Tensor mx = Tensor::zeros({3}), tl = Tensor::zeros({3});
  for (int32_t bad : {static_cast<int32_t>(kVocab), int32_t{-2}}) {
    const Tensor tgt = Tensor::from_vector_i32({1, bad, 2}, {3});
    expect_error_with(
        [&] {
          vocab_slice_partials(ctx, mx, tl, logits, tgt, VocabSlice{0, kVocab});
        },
        {"vocab_slice_partials", std::to_string(bad), "row 1", "[-1, 10)"});
    EXPECT_TRUE(bitwise_equal(mx, Tensor::zeros({3})));
  }
  Tensor half = Tensor::zeros({3, kRows}, DType::BF16);
  expect_error_with(
      [&] {
        vocab_slice_exp(ctx, half, mx, tl, VocabSlice{0, kVocab});
      },
      {"vocab_slice_exp", "logits", "f32"});
  Tensor block = Tensor::zeros({3, kRows}), short_rows = Tensor::zeros({2});
  const Tensor tgt = Tensor::from_vector_i32({1, 2, 3}, {3});
  expect_error_with(
      [&] {
        vocab_slice_grad(ctx, block, short_rows, tgt, VocabSlice{0, kVocab}, 1.0f);
      },
      {"vocab_slice_grad", "sum_exp", "(3)"});
}

}  // namespace
}  // namespace braid
