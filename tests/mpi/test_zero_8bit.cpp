// ZeRO-1 with adamw8bit (optim/zero_adamw.h) against the unsharded 8-bit AdamW (optim/adamw.h)
// on the same reduced gradients: buckets aligned to the 2048-element blocks, so every rank holds
// whole blocks and the weights equal the unsharded optimizer's bit for bit after every step, in
// f32 and with bf16 compute weights; each rank's checkpoint pieces are the matching slices of
// the unsharded codes and absmax, and load_state takes them back. Runs on 2, 3 and 4 ranks.
#include <gtest/gtest.h>

#include <map>

#include "core/models/transformer.h"
#include "optim/adamw.h"
#include "optim/master_weights.h"
#include "optim/zero_adamw.h"
#include "parallel/data_parallel.h"
#include "parallel/scalar_reduce.h"
#include "tests/mpi/mpi_test_util.h"
#include "tests/unit/kernel_test_util.h"
#include "tests/unit/model_test_util.h"

namespace braid::test {
namespace {

// Step `step`'s gradient of parameter i: a seeded tensor on rank 0 and zeros elsewhere, so the
// reduce-scatter sum is that tensor exactly, whatever the group size.
Tensor grad_of(const Parameter& p, size_t i, int step, int rank) {
  Tensor g = kernel_test::random_tensor(p.value.shape(), 1000 * step + i);
  if (rank != 0) g.fill_(0.0f);
  return g;
}

// A GPT-2 whose block linears (64 x 192, 64 x 256, ...) span several 8-bit blocks, beside
// small f32-moment parameters (biases, norms).
ModelConfig model_config() {
  ModelConfig cfg = model_test::tiny("gpt2", 2);
  cfg.n_embd = 64;
  cfg.n_head = 4;
  return cfg;
}

OptimConfig optim_config() {
  OptimConfig oc;
  oc.name = "adamw8bit";
  oc.lr = 1e-2f;
  return oc;
}

DataParallelOptions dp_options(int64_t align) {
  DataParallelOptions o;
  o.buckets.first_bucket_bytes = 4 * 5000;  // several buckets, shards splitting parameters
  o.buckets.bucket_bytes = 4 * 30000;
  o.buckets.align = align;
  o.buckets.align_min_numel = kAdam8bitMinNumel;
  o.shard_optimizer = true;
  return o;
}

// Elements [begin, begin + piece.numel()) of the flattened `whole`, bit for bit.
bool piece_matches(const Tensor& piece, const Tensor& whole, int64_t begin) {
  return kernel_test::bitwise_equal(
      piece, whole.view({whole.numel()}).slice0(begin, begin + piece.numel()));
}

void check(DType compute) {
  Communicator& comm = world().world();
  const int rank = comm.rank();
  const ModelConfig cfg = model_config();
  const OptimConfig oc = optim_config();
  ExecContext ref_ctx;
  Transformer ref(ref_ctx, cfg);
  ref.init_weights();
  std::optional<MasterWeights> mw;
  if (compute != DType::F32) mw.emplace(ref_ctx, ref.parameters(), compute);
  AdamW ref_opt(ref_ctx, mw ? mw->params() : ref.parameters(), oc);
  ExecContext ctx;
  Transformer model(ctx, cfg);
  model.init_weights();
  DataParallel ddp(ctx, model.parameters(), {}, comm, dp_options(kAdam8bitBlock));
  const GradBuckets& gb = ddp.buckets();
  ASSERT_GE(gb.buckets().size(), 2u);
  for (size_t b = 0; b < gb.buckets().size(); ++b) {
    ASSERT_EQ(gb.shard_numel(b) % kAdam8bitBlock, 0) << "bucket " << b;
    for (const GradBuckets::Slot& s : gb.buckets()[b].slots)
      if (s.numel >= kAdam8bitMinNumel) {
        ASSERT_EQ(s.offset % kAdam8bitBlock, 0) << s.param->name;
      }
  }
  ZeroAdamW zero(ctx, ddp, oc, compute);
  // Some parameter is split between ranks (the test would be weak otherwise).
  bool split = false;
  for (size_t b = 0; b < gb.buckets().size(); ++b)
    for (const GradBuckets::Slot& s : gb.buckets()[b].slots)
      for (int r = 1; r < comm.size(); ++r) {
        const int64_t cut = r * gb.shard_numel(b);
        split =
            split || (s.offset < cut && cut < s.offset + s.numel && s.numel >= kAdam8bitMinNumel);
      }
  EXPECT_TRUE(split);

  const auto params = model.parameters(), ref_params = ref.parameters();
  for (int step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      params[i]->grad().copy_from(grad_of(*params[i], i, step, rank));
      ref_params[i]->grad().copy_from(grad_of(*params[i], i, step, 0));
    }
    ddp.finish();
    zero.step(1e-2f);
    if (mw)
      mw->step(ref_opt, 1e-2f);
    else
      ref_opt.step(1e-2f);
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(kernel_test::bitwise_equal(params[i]->value, ref_params[i]->value))
          << params[i]->name << " after step " << step << " on rank " << rank;
  }
  // Checkpoint pieces: slices of the unsharded optimizer's state, codes and absmax alike.
  std::map<std::string, Tensor> whole;
  for (const auto& [n, t] : ref_opt.state_tensors()) whole.emplace(n, t);
  nlohmann::json records;
  const auto pieces = zero.state_tensors(&records);
  int codes = 0;
  for (const auto& [n, t] : pieces) {
    ASSERT_TRUE(whole.count(n)) << n;
    const int64_t begin = records.at(n).at("flat_begin").get<int64_t>();
    EXPECT_EQ(records.at(n).at("global_shape").get<Shape>(), whole.at(n).shape()) << n;
    EXPECT_TRUE(piece_matches(t, whole.at(n), begin)) << n << " on rank " << rank;
    codes += n.ends_with("_codes");
  }
  EXPECT_GT(codes, 0);
  // Loading: each rank takes its slices of other whole tensors.
  std::map<std::string, Tensor> file;
  uint64_t seed = 11;
  for (const auto& [n, t] : whole) {
    Tensor f = Tensor::zeros(t.shape(), t.dtype());
    if (t.dtype() == DType::U8) {
      for (int64_t i = 0; i < f.numel(); ++i)
        f.data<uint8_t>()[i] = static_cast<uint8_t>(mix64(seed + i) & 0xff);
    } else {
      f.copy_from(kernel_test::random_tensor(t.shape(), seed, 0.0, 1.0));
    }
    ++seed;
    file.emplace(n, f);
  }
  zero.load_state([&](const std::string& n) { return file.at(n); }, 3);
  for (const auto& [n, t] : zero.state_tensors(&records))
    EXPECT_TRUE(piece_matches(t, file.at(n), records.at(n).at("flat_begin").get<int64_t>()))
        << n << " on rank " << rank;
  // An absmax of another block count (another layout's) is refused by name.
  std::map<std::string, Tensor> bad = file;
  for (auto& [n, t] : bad)
    if (n.ends_with("_absmax")) t = Tensor::zeros({t.numel() + 1}, DType::F32);
  try {
    zero.load_state([&](const std::string& n) { return bad.at(n); }, 3);
    ADD_FAILURE() << "an absmax of the wrong size was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("_absmax"), std::string::npos) << e.what();
  }
}

TEST(Zero8bit, F32ShardsEqualUnsharded) { check(DType::F32); }
TEST(Zero8bit, Bf16ShardsEqualUnsharded) { check(DType::BF16); }

// Without the alignment some shard boundary cuts an 8-bit block: refused, naming the option.
TEST(Zero8bit, UnalignedBucketsAreRefused) {
  Communicator& comm = world().world();
  ExecContext ctx;
  Transformer model(ctx, model_config());
  model.init_weights();
  DataParallel ddp(ctx, model.parameters(), {}, comm, dp_options(1));
  const GradBuckets& gb = ddp.buckets();
  bool cut = false;  // the same on every rank: the layout is
  for (size_t b = 0; b < gb.buckets().size(); ++b)
    for (const GradBuckets::Slot& s : gb.buckets()[b].slots)
      for (int r = 1; r < comm.size(); ++r) {
        const int64_t at = r * gb.shard_numel(b) - s.offset;
        cut = cut ||
              (s.numel >= kAdam8bitMinNumel && at > 0 && at < s.numel && at % kAdam8bitBlock != 0);
      }
  if (!cut) GTEST_SKIP() << "no block is cut on " << comm.size() << " ranks";
  double refused = 0.0;
  try {
    ZeroAdamW zero(ctx, ddp, optim_config());  // a rank whose shard holds whole blocks builds
  } catch (const std::exception& e) {
    refused = 1.0;
    EXPECT_NE(std::string(e.what()).find("GradBucketOptions::align"), std::string::npos)
        << e.what();
  }
  // Both ranks beside a cut block refuse.
  EXPECT_GE(all_sum_doubles(comm, {refused})[0], 2.0);
}

}  // namespace
}  // namespace braid::test
