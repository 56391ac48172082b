// CUDA softmax cross-entropy against its CPU twin: the fused LM head (several row chunks with
// the last one short, ignored targets, grad_scale, dw accumulated onto a non-zero gradient, a
// frozen head, forward only, a rejected target), the loss sum, and the vocab-parallel steps on a
// block with padding columns and on a block of padding only.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/kernels/cross_entropy.h"
#include "core/kernels/cuda/cross_entropy.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

constexpr float kGradScale = 0.37f;

// Targets in [0, vocab) with every fifth ignored (from row 3), and the first and last
// vocabulary rows used.
Tensor targets_for(int64_t n, int64_t vocab, uint64_t seed) {
  Tensor t = random_tokens({n}, static_cast<int32_t>(vocab), seed);
  for (int64_t i = 3; i < n; i += 5) t.i32()[i] = -1;
  if (n > 1) t.i32()[1] = 0;
  if (n > 2) t.i32()[2] = static_cast<int32_t>(vocab - 1);
  return t;
}

// Exactly equal, infinities included.
::testing::AssertionResult same(const Tensor& got, const Tensor& expected) {
  const std::vector<float> g = values(got), e = values(expected);
  if (g.size() != e.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == e[i]) && !(std::isnan(g[i]) && std::isnan(e[i])))
      return ::testing::AssertionFailure() << "[" << i << "] " << g[i] << " vs " << e[i];
  return ::testing::AssertionSuccess();
}

class GpuLmHead : public GpuTest, public ::testing::WithParamInterface<DType> {
 protected:
  // The fused head on both backends from the same inputs; compares losses, dx and dw.
  void check(int64_t n, int64_t c, int64_t vocab, bool with_dx, bool with_dw, uint64_t seed) {
    const DType dt = GetParam();
    Tensor x = random_host({n, c}, dt, seed), w = random_host({vocab, c}, dt, seed + 1);
    Tensor tgt = targets_for(n, vocab, seed + 2);
    Tensor dw0 = random_host({vocab, c}, DType::F32, seed + 3);
    Tensor losses_cpu = Tensor::empty({n}), dx_cpu = with_dx ? Tensor::empty({n, c}, dt) : Tensor();
    Tensor dw_cpu = with_dw ? dw0.clone() : Tensor();
    lm_head_cross_entropy(cpu(), losses_cpu, dx_cpu, dw_cpu, x, w, tgt, kGradScale);

    Tensor losses = poisoned({n}, DType::F32), dx = with_dx ? poisoned({n, c}, dt) : Tensor();
    Tensor dw = with_dw ? up(dw0) : Tensor();
    lm_head_cross_entropy(gpu(), losses, dx, dw, up(x), up(w), up(tgt), kGradScale);
    const std::string what = fmt::format("{}x{} V {} {}", n, c, vocab, dtype_name(dt));
    EXPECT_TRUE(close(losses, losses_cpu, 1e-4, 1e-4)) << "losses " << what;
    // With 16-bit weights the GPU rounds the logits' gradient to their dtype for the GEMMs.
    const double g_atol = dt == DType::F32 ? 1e-5 : atol_for(dt);
    const double g_rtol = dt == DType::F32 ? 1e-4 : rtol_for(dt);
    if (with_dx) {
      EXPECT_TRUE(close(dx, dx_cpu, g_atol, g_rtol)) << "dx " << what;
    }
    if (with_dw) {
      EXPECT_TRUE(close(dw, dw_cpu, g_atol, g_rtol)) << "dw " << what;
    }
  }
};

TEST_P(GpuLmHead, SmallShapesMatchCpu) {
  check(1, 8, 5, true, true, 1);
  check(17, 33, 257, true, true, 10);
  check(17, 33, 257, false, false, 20);  // forward only
  check(17, 33, 257, true, false, 30);   // frozen head
}

TEST_P(GpuLmHead, SeveralChunksWithAShortLastOne) {
  const int64_t vocab = 300007, c = 24;
  const int64_t chunk = cuda::lm_head_chunk_rows(int64_t{1} << 20, vocab);
  ASSERT_GT(chunk, 1);
  check(2 * chunk + 17, c, vocab, true, true, 40);
}

TEST_P(GpuLmHead, RejectsABadTargetBeforeWriting) {
  const DType dt = GetParam();
  Tensor x = up(random_host({9, 8}, dt, 50)), w = up(random_host({11, 8}, dt, 51));
  Tensor tgt = targets_for(9, 11, 52);
  tgt.i32()[7] = 11;
  Tensor dw0 = random_host({11, 8}, DType::F32, 53);
  Tensor losses = poisoned({9}, DType::F32), dx = poisoned({9, 8}, dt), dw = up(dw0);
  EXPECT_THROW(lm_head_cross_entropy(gpu(), losses, dx, dw, x, w, up(tgt), 1.0f), Error);
  EXPECT_TRUE(same(dw, dw0)) << "dw was written";
}

// With several bad targets far apart (other threads and blocks of the search), the message
// names the first.
TEST_P(GpuLmHead, NamesTheFirstOfSeveralBadTargets) {
  const DType dt = GetParam();
  const int64_t N = 5000;
  Tensor x = up(random_host({N, 8}, dt, 60)), w = up(random_host({11, 8}, dt, 61));
  Tensor tgt = targets_for(N, 11, 62);
  tgt.i32()[4321] = 11;
  tgt.i32()[1700] = -2;
  tgt.i32()[2501] = 99;
  Tensor losses = poisoned({N}, DType::F32), dx = poisoned({N, 8}, dt),
         dw = up(random_host({11, 8}, DType::F32, 63));
  try {
    lm_head_cross_entropy(gpu(), losses, dx, dw, x, w, up(tgt), 1.0f);
    ADD_FAILURE() << "no error for bad targets";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("targets[1700] = -2"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuLmHead, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

class GpuLossSum : public GpuTest {};

TEST_F(GpuLossSum, MatchesCpu) {
  for (int64_t n : {1, 17, 100003}) {
    Tensor losses = random_host({n}, DType::F32, 60 + static_cast<uint64_t>(n), 0.0f, 10.0f);
    Tensor tgt = targets_for(n, 50, 61);
    const LossSum c = loss_sum(cpu(), losses, tgt), g = loss_sum(gpu(), up(losses), up(tgt));
    EXPECT_EQ(g.count, c.count) << n;
    EXPECT_NEAR(g.sum, c.sum, 1e-12 * c.sum) << n;
  }
}

class GpuVocabSlice : public GpuTest {
 protected:
  void run_slice(int64_t n, int64_t rows, const VocabSlice& slice);
};

// One rank's steps on both backends: (N, rows) logits whose columns are vocabulary rows
// [row_begin, row_begin + rows) of `vocab`, fed the same statistics on both sides at each step.
void GpuVocabSlice::run_slice(int64_t n, int64_t rows, const VocabSlice& slice) {
  Tensor logits = random_host({n, rows}, DType::F32, 70, -6.0f, 6.0f);
  Tensor tgt = targets_for(n, slice.vocab, 71);
  Tensor mx_c = Tensor::empty({n}), tl_c = Tensor::empty({n});
  vocab_slice_partials(cpu(), mx_c, tl_c, logits, tgt, slice);
  Tensor mx = poisoned({n}, DType::F32), tl = poisoned({n}, DType::F32);
  Tensor g_logits = up(logits), g_tgt = up(tgt);
  vocab_slice_partials(gpu(), mx, tl, g_logits, g_tgt, slice);
  EXPECT_TRUE(same(mx, mx_c)) << "row_max";
  EXPECT_TRUE(same(tl, tl_c)) << "target_logit";

  // A finite max for the exponentials, as the all-reduce over ranks gives.
  Tensor m = random_host({n}, DType::F32, 72, 5.0f, 6.0f);
  Tensor se_c = Tensor::empty({n});
  Tensor e_c = logits.clone();
  vocab_slice_exp(cpu(), e_c, se_c, m, slice);
  Tensor se = poisoned({n}, DType::F32);
  vocab_slice_exp(gpu(), g_logits, se, up(m), slice);
  EXPECT_TRUE(close(g_logits, e_c, 1e-6, 1e-5)) << "exp";
  EXPECT_TRUE(close(se, se_c, 1e-6, 1e-5)) << "sum_exp";

  // Steps 3 and 4 on the CPU's statistics, so each step is compared on its own.
  Tensor total = random_host({n}, DType::F32, 73, 1.0f, 3.0f);  // sum_exp over all ranks
  Tensor losses_c = Tensor::empty({n});
  vocab_slice_losses(cpu(), losses_c, total, m, tl_c, tgt);
  Tensor losses = poisoned({n}, DType::F32);
  Tensor g_total = up(total);
  vocab_slice_losses(gpu(), losses, g_total, up(m), up(tl_c), g_tgt);
  EXPECT_TRUE(close(losses, losses_c, 1e-6, 1e-6)) << "losses";

  Tensor grad_c = e_c.clone();
  vocab_slice_grad(cpu(), grad_c, total, tgt, slice, kGradScale);
  Tensor grad = up(e_c);
  vocab_slice_grad(gpu(), grad, g_total, g_tgt, slice, kGradScale);
  EXPECT_TRUE(same(grad, grad_c)) << "grad: the shared per-element arithmetic";
}

TEST_F(GpuVocabSlice, StepsMatchCpu) {
  run_slice(37, 67, VocabSlice{130, 180});  // 50 real columns, 17 padding
  run_slice(5, 300, VocabSlice{0, 1000});   // all real
  run_slice(11, 16, VocabSlice{200, 190});  // padding only
}

TEST_F(GpuVocabSlice, RejectsATargetOutsideTheVocabulary) {
  Tensor logits = up(random_host({4, 8}, DType::F32, 80));
  Tensor tgt = Tensor::from_vector_i32({1, -1, 20, 3}, {4});
  Tensor mx = poisoned({4}, DType::F32), tl = poisoned({4}, DType::F32);
  EXPECT_THROW(vocab_slice_partials(gpu(), mx, tl, logits, up(tgt), VocabSlice{0, 20}), Error);
}

}  // namespace
}  // namespace braid::gpu_test
