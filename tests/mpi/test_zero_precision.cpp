// ZeRO-1 with bf16/f16 compute weights (optim/zero_adamw.h) against unsharded mixed precision
// (optim/master_weights.h + AdamW) on the same reduced gradients: the same 16-bit weights
// after every step, bit for bit, f32 masters and moments of 1/dp per rank, whole masters
// gathered for checkpoints and loaded back. Runs on 2, 3 and 4 ranks (3: padded buckets).
#include <gtest/gtest.h>

#include <map>

#include "core/kernels/elementwise.h"
#include "core/models/transformer.h"
#include "optim/adamw.h"
#include "optim/master_weights.h"
#include "optim/zero_adamw.h"
#include "parallel/data_parallel.h"
#include "tests/mpi/mpi_test_util.h"
#include "tests/unit/kernel_test_util.h"
#include "tests/unit/model_test_util.h"

namespace braid::test {
namespace {

int64_t live(ExecContext& ctx, MemCategory c) {
  return ctx.allocator().stats().live_bytes[static_cast<int>(c)];
}

// Step `step`'s gradient of parameter i: a seeded tensor on rank 0 and zeros elsewhere, so the
// reduce-scatter sum is that tensor exactly (no rounding), whatever the group size.
Tensor grad_of(const Parameter& p, size_t i, int step, int rank) {
  Tensor g = kernel_test::random_tensor(p.value.shape(), 1000 * step + i);
  if (rank != 0) g.fill_(0.0f);
  return g;
}

void check(DType compute) {
  Communicator& comm = world().world();
  const int dp = comm.size(), rank = comm.rank();
  const ModelConfig cfg = model_test::tiny("gpt2", 2);
  OptimConfig oc;
  oc.lr = 1e-2f;
  // Reference: every parameter whole, f32 masters beside 16-bit weights, plain AdamW.
  ExecContext ref_ctx;
  Transformer ref(ref_ctx, cfg);
  ref.init_weights();
  MasterWeights mw(ref_ctx, ref.parameters(), compute);
  AdamW ref_opt(ref_ctx, mw.params(), oc);
  // ZeRO-1 on its own context, so its memory is counted apart.
  ExecContext ctx;
  Transformer model(ctx, cfg);
  model.init_weights();
  DataParallelOptions o;
  o.buckets.first_bucket_bytes = 512;  // several buckets even for the tiny model
  o.buckets.bucket_bytes = 2048;
  o.shard_optimizer = true;
  DataParallel ddp(ctx, model.parameters(), {}, comm, o);
  const GradBuckets& gb = ddp.buckets();
  ASSERT_GE(gb.buckets().size(), 3u);
  ZeroAdamW zero(ctx, ddp, oc, compute);
  for (Parameter* p : model.parameters()) ASSERT_EQ(p->value.dtype(), compute) << p->name;
  // Masters and moments: this rank's shard of each bucket only (the padded bucket / dp), one
  // block per bucket, which the allocator rounds up to 64 bytes below 4 KiB (core/memory.cpp).
  int64_t shard_elems = 0, shard_bytes = 0;
  for (size_t b = 0; b < gb.buckets().size(); ++b) {
    ASSERT_LE(gb.shard_numel(b) * 4, 4096);
    shard_elems += gb.shard_numel(b);
    shard_bytes += (gb.shard_numel(b) * 4 + 63) / 64 * 64;
  }
  EXPECT_EQ(shard_elems * dp, gb.total_numel());
  EXPECT_EQ(live(ctx, MemCategory::MasterWeights), shard_bytes) << "rank " << rank;
  EXPECT_EQ(live(ctx, MemCategory::OptimizerState), 2 * shard_bytes) << "rank " << rank;

  const auto params = model.parameters(), ref_params = ref.parameters();
  for (int step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      params[i]->grad().copy_from(grad_of(*params[i], i, step, rank));
      ref_params[i]->grad().copy_from(grad_of(*params[i], i, step, 0));
    }
    ddp.finish();
    zero.step(1e-2f);
    mw.step(ref_opt, 1e-2f);
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(kernel_test::bitwise_equal(params[i]->value, ref_params[i]->value))
          << params[i]->name << " after step " << step << " on rank " << rank;
  }
  // Checkpoints: the gathered masters are the whole f32 masters, on every rank.
  std::map<std::string, Tensor> whole;
  for (auto& [n, t] : mw.named_masters()) whole.emplace(n, t.clone());
  const auto gathered = zero.gather_masters();
  EXPECT_EQ(gathered.size(), whole.size());
  for (const auto& [n, t] : gathered)
    EXPECT_TRUE(kernel_test::bitwise_equal(t, whole.at(n))) << n << " on rank " << rank;
  // Loading: take the shards of other masters, and the 16-bit weights follow them.
  std::map<std::string, Tensor> file;
  for (const auto& [n, t] : whole) file[n] = kernel_test::random_tensor(t.shape(), 7).clone();
  zero.load_masters([&](const std::string& n) { return file.at(n); });
  for (Parameter* p : model.parameters())
    EXPECT_TRUE(kernel_test::bitwise_equal(p->value, file.at(p->name).to(compute))) << p->name;
  for (const auto& [n, t] : zero.gather_masters())
    EXPECT_TRUE(kernel_test::bitwise_equal(t, file.at(n))) << n << " on rank " << rank;
}

TEST(ZeroPrecision, Bf16ShardsEqualWholeMasters) { check(DType::BF16); }
TEST(ZeroPrecision, F16ShardsEqualWholeMasters) { check(DType::F16); }

}  // namespace
}  // namespace braid::test
