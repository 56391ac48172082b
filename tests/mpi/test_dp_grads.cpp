// Bucketed data-parallel gradients equal the single-rank gradients of the same global batch:
// each rank backpropagates its rows of the batch (over one or two accumulation micro-batches),
// the buckets sum over the DP group, and the result is compared with one process running the
// whole batch. Runs on 2, 3 and 4 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/models/transformer.h"
#include "parallel/grad_buckets.h"
#include "tests/mpi/mpi_test_util.h"
#include "tests/unit/model_test_util.h"

namespace braid::test {
namespace {

constexpr int kRowsPerRank = 2;  // rows of one micro-batch on one rank
constexpr int kT = 6;

// Rows [first, first + n) of the global batch `seed` (tokens or targets).
Tensor rows(int64_t first, int64_t n, int64_t total, uint64_t seed) {
  Tensor all = model_test::tokens_of(total, kT, 11, seed);
  return all.slice0(first, first + n).clone();
}

// Worst |a - b| / tolerance over every gradient element; <= 1 passes. A reordered sum's
// rounding error scales with its addends, not with a sum that cancels, so the tolerance has a
// term in the largest |b| of the element's tensor: f32, 1e-6 + 1e-4 |b| + 1e-5 max|b|; with
// per_tensor (16-bit sums), 1e-6 + 1e-4 max|b|.
double worst_ratio(const Transformer& a, const Transformer& b, bool per_tensor = false) {
  double worst = 0;
  for (size_t i = 0; i < a.parameters().size(); ++i) {
    const Tensor& ga = a.parameters()[i]->grad_if_any();
    const Tensor& gb = b.parameters()[i]->grad_if_any();
    EXPECT_EQ(ga.defined(), gb.defined()) << a.parameters()[i]->name;
    if (!ga.defined() || !gb.defined()) continue;
    double amax = 0;
    for (int64_t k = 0; k < gb.numel(); ++k)
      amax = std::max(amax, static_cast<double>(std::fabs(gb.f32()[k])));
    for (int64_t k = 0; k < ga.numel(); ++k) {
      const double x = ga.f32()[k], y = gb.f32()[k];
      const double tol =
          per_tensor ? 1e-6 + 1e-4 * amax : 1e-6 + 1e-4 * std::fabs(y) + 1e-5 * amax;
      worst = std::max(worst, std::fabs(x - y) / tol);
    }
  }
  return worst;
}

void check(const char* family, int accum, DType comm_dtype, double tolerance_ratio) {
  Communicator& comm = world().world();
  const int dp = comm.size(), r = comm.rank();
  const int64_t global_rows = static_cast<int64_t>(dp) * kRowsPerRank;
  // Sum semantics: every rank scales by 1 / (tokens of the whole step), so the gradient of
  // the global mean loss is the sum over ranks.
  const float scale = 1.0f / static_cast<float>(global_rows * accum * kT);
  ExecContext ctx;
  const ModelConfig cfg = model_test::tiny(family, 3);

  Transformer ref(ctx, cfg);  // the whole global batch in one process
  ref.init_weights();
  ref.zero_grad(ctx);
  for (int m = 0; m < accum; ++m) {
    MicroBatch mb(ctx);
    ref.forward_backward(mb, rows(0, global_rows, global_rows, 100 + m),
                         rows(0, global_rows, global_rows, 200 + m), scale);
  }

  Transformer model(ctx, cfg);
  model.init_weights();
  GradBucketOptions o;
  o.first_bucket_bytes = 512;  // several buckets even for the tiny model
  o.bucket_bytes = 2048;
  o.comm_dtype = comm_dtype;
  GradBuckets gb(ctx, model.parameters(), comm, o);
  ASSERT_GE(gb.buckets().size(), 3u);
  model.zero_grad(ctx);
  gb.begin_step(accum);
  for (int m = 0; m < accum; ++m) {
    MicroBatch mb(ctx);
    gb.attach(mb);
    model.forward_backward(mb, rows(r * kRowsPerRank, kRowsPerRank, global_rows, 100 + m),
                           rows(r * kRowsPerRank, kRowsPerRank, global_rows, 200 + m), scale);
  }
  gb.finish();
  const double worst = worst_ratio(model, ref, comm_dtype != DType::F32);
  EXPECT_LE(worst, tolerance_ratio)
      << family << " accum " << accum << " " << dtype_name(comm_dtype) << " on rank " << r;
  // The check can fail: without the reduction a rank holds only its share.
  if (dp > 1 && comm_dtype == DType::F32) {
    Transformer alone(ctx, cfg);
    alone.init_weights();
    alone.zero_grad(ctx);
    MicroBatch mb(ctx);
    alone.forward_backward(mb, rows(r * kRowsPerRank, kRowsPerRank, global_rows, 100),
                           rows(r * kRowsPerRank, kRowsPerRank, global_rows, 200), scale);
    EXPECT_GT(worst_ratio(alone, ref), 10.0);
  }
}

// f32: see worst_ratio. Not bit-exact: the single rank's GEMMs sum the weight gradient
// over all rows at once, the DP run sums per-rank partials and then adds them across ranks, a
// different summation order in f32.
TEST(DpGrads, BucketedAllReduceEqualsSingleRankGradients) {
  for (const char* family : {"gpt2", "llama"}) check(family, 1, DType::F32, 1.0);
}

TEST(DpGrads, WithGradientAccumulation) {
  for (const char* family : {"gpt2", "llama"}) check(family, 2, DType::F32, 1.0);
}

// bf16 on the wire: 8 mantissa bits, so each addend and each partial sum is rounded by up to
// 2^-9 of its size; sums that cancel make that large relative to the element, so the bound is
// 1e-6 + 1e-2 max|ref| over the tensor (ratio 100 of the f32 bound, per tensor).
TEST(DpGrads, Bf16AllReduce) { check("gpt2", 1, DType::BF16, 100.0); }

}  // namespace
}  // namespace braid::test
