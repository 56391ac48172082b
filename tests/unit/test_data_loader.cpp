// Sampler and Loader: pure-function batches, rank partitioning, prefetch == no prefetch,
// resume, shutdown, and fixed validation windows.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "core/error.h"
#include "data/loader.h"
#include "data_test_util.h"

namespace braid {
namespace {

using testing::TempDir;

// A shard whose id at position i is i, so a window's first token is its start offset.
struct PositionShard {
  TempDir dir{"loader"};
  std::string path = dir.file("train.bin");
  explicit PositionShard(int n) {
    std::vector<int32_t> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = i;
    write_shard(path, ids, n);
  }
};

DataConfig small_config() {
  DataConfig c;
  c.dir = "unused";
  c.micro_batch = 3;
  c.seq_len = 16;
  c.grad_accum = 2;
  c.seed = 42;
  c.prefetch = 0;
  return c;
}

std::vector<int32_t> as_vec(const Tensor& t) { return {t.i32(), t.i32() + t.numel()}; }

bool same(const Batch& a, const Batch& b) {
  return as_vec(a.tokens) == as_vec(b.tokens) && as_vec(a.targets) == as_vec(b.targets);
}

TEST(DataSampler, PureFunctionOfSeedStepMicro) {
  PositionShard f(5000);
  TokenShard s(f.path);
  DataConfig c = small_config();
  Batch a = sample_train_batch(s, c, 7, 1, 0, 1);
  EXPECT_EQ(a.tokens.shape(), (Shape{3, 16}));
  EXPECT_EQ(a.tokens.dtype(), DType::I32);
  EXPECT_TRUE(same(a, sample_train_batch(s, c, 7, 1, 0, 1)));
  EXPECT_FALSE(same(a, sample_train_batch(s, c, 8, 1, 0, 1)));
  EXPECT_FALSE(same(a, sample_train_batch(s, c, 7, 0, 0, 1)));
  DataConfig c2 = c;
  c2.seed = 43;
  EXPECT_FALSE(same(a, sample_train_batch(s, c2, 7, 1, 0, 1)));
}

TEST(DataSampler, TargetsAreNextTokensOfContiguousWindows) {
  PositionShard f(300);
  TokenShard s(f.path);
  DataConfig c = small_config();
  for (int step = 0; step < 50; ++step) {
    Batch b = sample_train_batch(s, c, step, 0, 0, 1);
    for (int r = 0; r < c.micro_batch; ++r) {
      const int32_t* x = b.tokens.i32() + r * c.seq_len;
      const int32_t* y = b.targets.i32() + r * c.seq_len;
      EXPECT_GE(x[0], 0);
      EXPECT_LE(x[0] + c.seq_len, 299);  // the last target is still inside the shard
      for (int t = 0; t < c.seq_len; ++t) {
        EXPECT_EQ(x[t], x[0] + t);
        EXPECT_EQ(y[t], x[t] + 1);
      }
    }
  }
}

TEST(DataSampler, StartsCoverTheShardUniformly) {
  // 4 buckets of starts; each should get about a quarter of 4000 draws.
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4000; ++i) ++counts[train_window_start(1, i, 0, 0, 400) / 100];
  for (int k : counts) EXPECT_NEAR(k, 1000, 150);
}

TEST(DataSampler, RanksPartitionTheGlobalBatch) {
  PositionShard f(60000);
  TokenShard s(f.path);
  DataConfig c = small_config();
  c.micro_batch = 2;
  Batch r0 = sample_train_batch(s, c, 5, 1, 0, 2);
  Batch r1 = sample_train_batch(s, c, 5, 1, 1, 2);
  EXPECT_FALSE(same(r0, r1));
  // Same global batch (4 rows) on one rank: rows 0-1 are rank 0's, rows 2-3 rank 1's.
  DataConfig c4 = c;
  c4.micro_batch = 4;
  auto whole = as_vec(sample_train_batch(s, c4, 5, 1, 0, 1).tokens);
  auto a = as_vec(r0.tokens), b = as_vec(r1.tokens);
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_EQ(a, whole);
}

TEST(DataLoader, PrefetchGivesTheSameBatchesAsNoPrefetch) {
  PositionShard f(5000);
  DataConfig c0 = small_config(), c3 = small_config();
  c3.prefetch = 3;
  Loader l0(f.path, c0), l3(f.path, c3);
  for (int i = 0; i < 20; ++i) {
    const int64_t step = l3.step();
    const int micro = l3.micro();
    EXPECT_EQ(step, i / 2);
    EXPECT_EQ(micro, i % 2);
    Batch b3 = l3.next();
    EXPECT_TRUE(same(l0.next(), b3)) << "batch " << i;
    EXPECT_TRUE(same(b3, sample_train_batch(l3.shard(), c3, step, micro, 0, 1)));
  }
}

TEST(DataLoader, ResumeAndSeekEqualContinuing) {
  PositionShard f(5000);
  DataConfig c = small_config();
  c.prefetch = 2;
  Loader run(f.path, c);
  std::vector<Batch> all;
  for (int i = 0; i < 12; ++i) all.push_back(run.next());  // steps 0..5
  Loader resumed(f.path, c, 0, 1, 3);
  for (int i = 6; i < 12; ++i) EXPECT_TRUE(same(resumed.next(), all[i])) << i;
  resumed.seek(1);
  EXPECT_EQ(resumed.step(), 1);
  for (int i = 2; i < 8; ++i) EXPECT_TRUE(same(resumed.next(), all[i])) << i;
}

TEST(DataLoader, DestroysCleanlyMidStream) {
  PositionShard f(5000);
  DataConfig c = small_config();
  c.prefetch = 4;
  for (int round = 0; round < 30; ++round) {
    Loader l(f.path, c);
    for (int i = 0; i < round % 3; ++i) l.next();
    if (round % 5 == 0) l.seek(round);
  }  // each destructor must stop and join the producer without hanging
  SUCCEED();
}

TEST(DataLoader, RejectsShardShorterThanOneWindow) {
  PositionShard f(16);  // seq_len 16 needs 17 tokens
  DataConfig c = small_config();
  try {
    Loader l(f.path, c);
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(f.path), std::string::npos) << e.what();
  }
}

TEST(DataValidation, FixedWindowsCoverTheShardOncePerPass) {
  PositionShard f(1000);
  DataConfig c = small_config();
  c.seq_len = 10;  // 99 windows of 11 tokens at stride 10
  ValidationSet v(f.path, c);
  EXPECT_EQ(v.num_batches(), 33);
  std::multiset<int32_t> starts;
  for (int i = 0; i < v.num_batches(); ++i) {
    Batch b = v.val_batch(i);
    for (int r = 0; r < c.micro_batch; ++r) {
      const int32_t x0 = b.tokens.i32()[r * c.seq_len];
      EXPECT_EQ(x0 % 10, 0);
      EXPECT_EQ(b.targets.i32()[r * c.seq_len + c.seq_len - 1], x0 + c.seq_len);
      starts.insert(x0);
    }
  }
  EXPECT_EQ(starts.size(), 99u);
  EXPECT_EQ(std::set<int32_t>(starts.begin(), starts.end()).size(), 99u);
  // Independent of the seed; the first batch is spread over the file, not its start.
  DataConfig other = c;
  other.seed = 999;
  EXPECT_TRUE(same(v.val_batch(4), ValidationSet(f.path, other).val_batch(4)));
  Batch first = v.val_batch(0);
  EXPECT_GT(std::abs(first.tokens.i32()[c.seq_len] - first.tokens.i32()[0]), 100);
}

TEST(DataValidation, RanksTakeDifferentWindows) {
  PositionShard f(1000);
  DataConfig c = small_config();
  ValidationSet r0(f.path, c, 0, 2), r1(f.path, c, 1, 2);
  EXPECT_FALSE(same(r0.val_batch(0), r1.val_batch(0)));
}

// Data-parallel loaders split a step's micro-batches: DP rank r's m-th micro-batch is the
// step's global micro-batch m * dp + r, so dp ranks with grad_accum A see exactly the batches
// of one rank with grad_accum dp * A, also when started (resumed) mid-run.
TEST(DataLoader, DataParallelRanksSplitTheOneRankStepsMicroBatches) {
  PositionShard f(5000);
  for (int dp : {2, 3}) {
    DataConfig one = small_config();
    one.grad_accum = 2 * dp;
    DataConfig per = small_config();
    per.grad_accum = 2;
    for (int64_t start : {0, 5}) {
      Loader single(f.path, one, 0, 1, start);
      std::vector<std::unique_ptr<Loader>> ranks;
      for (int r = 0; r < dp; ++r)
        ranks.push_back(std::make_unique<Loader>(f.path, per, 0, 1, start, r, dp));
      for (int step = 0; step < 3; ++step)
        for (int m = 0; m < per.grad_accum; ++m)
          for (int r = 0; r < dp; ++r)
            EXPECT_TRUE(same(ranks[r]->next(), single.next()))
                << "dp " << dp << " start " << start << " step " << step << " micro " << m;
    }
  }
}

}  // namespace
}  // namespace braid
