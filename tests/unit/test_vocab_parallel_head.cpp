// The vocab-parallel cross-entropy (parallel/tensor_parallel.h) on a group of one, in row
// chunks: the one-rank fused LM head's losses and gradients for every chunk size, in f32 and in
// bf16 (where both heads round the logits' gradient by the same rule), only one chunk of the
// logits in memory at a time, and bad targets refused before dw is touched. (The same head on
// tp = 2 and 4 ranks: tests/mpi/test_tensor_parallel.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "kernel_test_util.h"
#include "parallel/self_communicator.h"
#include "parallel/tensor_parallel.h"

namespace braid {
namespace {

using kernel_test::random_tensor;

constexpr int64_t kN = 23, kC = 16, kV = 37;

struct HeadOut {
  std::vector<float> losses, dx, dw;
};

std::vector<float> values(const Tensor& t) {
  Tensor f = t;
  if (t.dtype() != DType::F32) {
    f = Tensor::empty(t.shape());
    cast(test_ctx(), f, t);
  }
  return std::vector<float>(f.f32(), f.f32() + f.numel());
}

Tensor targets_of(int64_t n, int64_t v) {
  Tensor t = Tensor::empty({n}, DType::I32);
  for (int64_t i = 0; i < n; ++i) t.i32()[i] = i % 5 == 2 ? -1 : static_cast<int32_t>((7 * i) % v);
  return t;
}

// chunk < 0: the one-rank head (lm_head_cross_entropy); else the vocab-parallel one on a group
// of one with that many rows per chunk (0: the automatic rule). dw starts at 0.25 everywhere, so
// that accumulation (not overwriting) is checked too.
HeadOut run_head(ExecContext& ctx, DType dt, const Tensor& x32, const Tensor& w32,
                 const Tensor& targets, int64_t chunk) {
  Tensor x = Tensor::empty(x32.shape(), dt), w = Tensor::empty(w32.shape(), dt);
  cast(ctx, x, x32);
  cast(ctx, w, w32);
  const int64_t N = x.dim(0), C = x.dim(1), V = w.dim(0);
  Tensor losses = Tensor::zeros({N}), dx = Tensor::zeros({N, C}), dw = Tensor::empty({V, C});
  dw.fill_(0.25f);
  const float scale = 0.37f;
  if (chunk < 0) {
    lm_head_cross_entropy(ctx, losses, dx, dw, x, w, targets, scale);
  } else {
    SelfCommunicator tp("tp");
    const HeadLossFn head = vocab_parallel_cross_entropy(tp, V, 0, false, chunk);
    head(ctx, losses, dx, dw, x, w, targets, scale);
  }
  return {values(losses), values(dx), values(dw)};
}

// Largest |a - b| over the largest |b|.
double scaled_err(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, top = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(double(a[i]) - b[i]));
    top = std::max(top, std::fabs(double(b[i])));
  }
  return err / top;
}

class VocabParallelHead : public ::testing::TestWithParam<DType> {};

TEST_P(VocabParallelHead, ChunksGiveTheOneRankHead) {
  ExecContext& ctx = test_ctx();
  const DType dt = GetParam();
  const Tensor x = random_tensor({kN, kC}, 11, -2.0, 2.0), w = random_tensor({kV, kC}, 12);
  const Tensor tg = targets_of(kN, kV);
  const HeadOut ref = run_head(ctx, dt, x, w, tg, -1);
  // The same arithmetic but for the order of the softmax sums (here 1e-7 in both dtypes). In
  // bf16 a probability within that of a bf16 rounding boundary may round the other way, about
  // 1e-4 of dx's largest magnitude each time; 3e-4 allows that where leaving the gradient in f32
  // while the one-rank head rounds it (or the reverse) misses by 1.5e-3.
  const double tol = dt == DType::F32 ? 1e-5 : 3e-4;
  for (int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{22}, kN, int64_t{0}}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const HeadOut got = run_head(ctx, dt, x, w, tg, chunk);
    EXPECT_LT(scaled_err(got.losses, ref.losses), 1e-6);
    EXPECT_LT(scaled_err(got.dx, ref.dx), tol);
    EXPECT_LT(scaled_err(got.dw, ref.dw), tol);
    for (int64_t i = 0; i < kN; ++i)
      if (tg.i32()[i] < 0) {
        EXPECT_EQ(got.losses[i], 0.0f) << "ignored row " << i;
        for (int64_t c = 0; c < kC; ++c) EXPECT_EQ(got.dx[i * kC + c], 0.0f) << "ignored row " << i;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, VocabParallelHead, ::testing::Values(DType::F32, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return std::string(dtype_name(i.param));
                         });

// Only one chunk of the logits exists at a time: the call's memory high-water mark stays near
// chunk x V floats, where the whole block would be N x V.
TEST(VocabParallelHeadMemory, HoldsOneChunkOfLogits) {
  ExecContext ctx;
  constexpr int64_t N = 64, C = 8, V = 1000, chunk = 8;
  const Tensor x = random_tensor({N, C}, 21), w = random_tensor({V, C}, 22);
  const Tensor tg = targets_of(N, V);
  Tensor losses = ctx.zeros({N}), dx = ctx.zeros({N, C}), dw = ctx.zeros({V, C});
  SelfCommunicator tp("tp");
  const HeadLossFn head = vocab_parallel_cross_entropy(tp, V, 0, false, chunk);
  const int64_t before = ctx.allocator().stats().live_total;
  ctx.allocator().reset_peaks();
  head(ctx, losses, dx, dw, x, w, tg, 1.0f);
  const int64_t extra = ctx.allocator().stats().peak_total - before;
  const int64_t one_chunk = chunk * V * 4, whole = N * V * 4;
  EXPECT_LE(extra, one_chunk + 4096) << "bytes beyond the caller's tensors, " << one_chunk
                                     << " for one chunk of logits, " << whole << " for all";
}

// A target outside the vocabulary throws naming it before any chunk has added to dw.
TEST(VocabParallelHeadErrors, BadTargetLeavesDwUntouched) {
  ExecContext& ctx = test_ctx();
  const Tensor x = random_tensor({kN, kC}, 31), w = random_tensor({kV, kC}, 32);
  Tensor tg = targets_of(kN, kV);
  tg.i32()[kN - 1] = static_cast<int32_t>(kV);  // in the last chunk
  Tensor losses = Tensor::zeros({kN}), dx = Tensor::zeros({kN, kC}), dw = Tensor::zeros({kV, kC});
  SelfCommunicator tp("tp");
  const HeadLossFn head = vocab_parallel_cross_entropy(tp, kV, 0, false, 4);
  try {
    head(ctx, losses, dx, dw, x, w, tg, 1.0f);
    FAIL() << "expected an error for target " << kV;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("targets[22] = 37 is outside [-1, 37)"), std::string::npos) << msg;
  }
  for (float v : values(dw)) ASSERT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace braid
