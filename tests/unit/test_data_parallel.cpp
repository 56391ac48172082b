// DataParallel on a group of one (what a one-process run trains through): two micro-batches of
// a real model with a bf16 wire type give exactly the gradients of plain accumulation, every
// gradient in its bucket, and ZeRO-1 stays off; the bucket of a late contribution waits for
// finish() while the others have started during the backward.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/models/transformer.h"
#include "model_test_util.h"
#include "parallel/data_parallel.h"
#include "parallel/self_communicator.h"

namespace braid {
namespace {

using model_test::grads_of;
using model_test::tiny;
using model_test::tokens_of;

void two_micro_batches(ExecContext& ctx, Transformer& m, DataParallel* dp, int vocab) {
  for (int i = 0; i < 2; ++i) {
    MicroBatch mb(ctx);
    if (dp) dp->attach(mb);
    const Tensor tok = tokens_of(2, 6, vocab, 20 + i), tgt = tokens_of(2, 6, vocab, 30 + i);
    m.loss(m.forward(tok, mb), tgt, 0.05f, mb);
    m.backward(Tensor(), mb);
  }
}

TEST(DataParallel, GroupOfOneGivesPlainAccumulationBitForBit) {
  const ModelConfig cfg = tiny("gpt2");
  ExecContext ctx;
  Transformer ref(ctx, cfg), m(ctx, cfg);
  ref.init_weights();
  m.init_weights();
  SelfCommunicator self("dp");
  DataParallelOptions o;
  o.buckets.first_bucket_bytes = 1024;  // several buckets
  o.buckets.bucket_bytes = 4096;
  o.buckets.comm_dtype = DType::BF16;
  o.shard_optimizer = true;  // no effect on a group of one
  // The tied embedding as a late contribution, as a pipeline run reports it.
  Parameter* late = m.tied_embedding();
  ASSERT_NE(late, nullptr);
  DataParallel dp(ctx, m.parameters(), {late}, self, o);
  EXPECT_FALSE(dp.sharded());
  EXPECT_EQ(dp.size(), 1);
  EXPECT_GE(dp.buckets().buckets().size(), 3u);
  EXPECT_THROW(dp.bind_parameters(ctx, DType::F32), Error);
  for (int step = 0; step < 2; ++step) {
    ref.zero_grad(ctx);
    m.zero_grad(ctx);
    dp.begin_step(2);
    two_micro_batches(ctx, ref, nullptr, cfg.vocab_size);
    two_micro_batches(ctx, m, &dp, cfg.vocab_size);
    // Buckets start in order: those before the late parameter's have, it and the rest wait.
    const auto& bs = dp.buckets().buckets();
    size_t late_bucket = bs.size();
    for (size_t i = 0; i < bs.size(); ++i)
      for (const GradBuckets::Slot& s : bs[i].slots)
        if (s.param == late) late_bucket = i;
    ASSERT_LT(late_bucket, bs.size());
    for (size_t i = 0; i < bs.size(); ++i) EXPECT_EQ(bs[i].started, i < late_bucket) << i;
    dp.finish();
    EXPECT_EQ(grads_of(ref), grads_of(m)) << "step " << step;
  }
  for (const GradBuckets::Bucket& b : dp.buckets().buckets())
    for (const GradBuckets::Slot& s : b.slots) EXPECT_TRUE(s.param->grad().same_storage(b.flat));
}

}  // namespace
}  // namespace braid
