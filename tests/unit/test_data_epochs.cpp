// Epochs and packing (data/epochs.h, Loader's epoch mode): shuffles without replacement, greedy
// packing of whole samples, overlong samples, data-parallel ranks' disjoint parts.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "data/loader.h"
#include "data/prepare.h"
#include "data_test_util.h"

namespace braid {
namespace {

using testing::TempDir;

// train.bin with samples of the given lengths; sample i's tokens are all 100 + i (so a row
// says which sample each token came from), and train.flags.bin marks the sample starts
// (every token trained, but the first token of sample 1, to see the loss mask).
struct SampleShard {
  TempDir dir{"epochs"};
  std::string path = dir.file("train.bin");
  explicit SampleShard(const std::vector<int>& lengths) {
    std::vector<int32_t> ids, flags;
    for (size_t i = 0; i < lengths.size(); ++i)
      for (int j = 0; j < lengths[i]; ++j) {
        ids.push_back(100 + static_cast<int32_t>(i));
        int32_t f = kFlagTrained | (j == 0 ? kFlagSampleStart : 0);
        if (i == 1 && j == 1) f &= ~kFlagTrained;
        flags.push_back(f);
      }
    write_shard(path, ids, 200);
    write_shard(dir.file(kTrainFlagsFile), flags, 4);
  }
};

DataConfig epoch_config() {
  DataConfig c;
  c.dir = "unused";
  c.micro_batch = 2;
  c.seq_len = 8;
  c.grad_accum = 1;
  c.seed = 5;
  c.prefetch = 0;
  c.epochs = 2;
  return c;
}

TEST(DataEpochs, OrderIsASeededPermutationPerEpoch) {
  const auto a = epoch_order(1, 0, 50), b = epoch_order(1, 0, 50), c = epoch_order(1, 1, 50),
             d = epoch_order(2, 0, 50);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  std::vector<int64_t> sorted = c;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
}

TEST(DataEpochs, OverlongSamplesAreTruncatedOrDroppedAndCounted) {
  // seq_len 8: a sample may hold 9 tokens; 12 and 10 are too long, 1 has nothing to predict.
  SampleShard s({3, 12, 9, 1, 10, 4});
  TokenShard shard(s.path), flags(s.dir.file(kTrainFlagsFile));
  DataConfig c = epoch_config();
  EpochUnits u = index_epoch_units(shard, &flags, c);
  EXPECT_TRUE(u.samples);
  EXPECT_EQ(u.truncated, 2);
  EXPECT_EQ(u.dropped, 0);
  EXPECT_EQ(u.too_short, 1);
  EXPECT_EQ(u.longest, 12);
  ASSERT_EQ(u.units.size(), 5u);
  EXPECT_EQ(u.units[1].length, 9);  // truncated to seq_len + 1
  c.overlong = Overlong::Drop;
  u = index_epoch_units(shard, &flags, c);
  EXPECT_EQ(u.truncated, 0);
  EXPECT_EQ(u.dropped, 2);
  ASSERT_EQ(u.units.size(), 3u);
  // Nothing left: a clear error naming the shard and the way out.
  SampleShard only_long({20, 30});
  TokenShard shard2(only_long.path), flags2(only_long.dir.file(kTrainFlagsFile));
  const std::string msg =
      testing::user_error_of([&] { (void)index_epoch_units(shard2, &flags2, c); });
  EXPECT_NE(msg.find("2 samples longer than seq_len + 1 = 9 tokens were dropped"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(only_long.path), std::string::npos) << msg;
}

// Every row of global sequences [0, n): which samples it holds (by token value), checking
// that no target crosses into another sample and that sample starts match.
std::vector<std::vector<int>> rows_of(EpochStream& st, const TokenShard& shard,
                                      const TokenShard* flags, int64_t n, int T) {
  std::vector<std::vector<int>> rows;
  std::vector<int32_t> tok(T), tgt(T), starts(T);
  for (int64_t g = 0; g < n; ++g) {
    st.fill_row(shard, flags, g, tok.data(), tgt.data(), starts.data());
    std::vector<int> row;
    for (int t = 0; t < T; ++t) {
      const bool first = t == 0 || starts[t] != starts[t - 1];
      EXPECT_TRUE(starts[t] == t || starts[t] == starts[t - 1]);
      if (tgt[t] != -1) {
        EXPECT_EQ(tgt[t], tok[t]) << "a target from another sample at " << t;
      }
      if (first && tgt[t] != -1) row.push_back(tok[t] - 100);
      if (first && tgt[t] == -1 && tok[t] == 101) row.push_back(1);  // masked first target
    }
    rows.push_back(row);
  }
  return rows;
}

TEST(DataEpochs, PackingPutsEverySampleOnceInAnEpoch) {
  SampleShard s({3, 5, 9, 2, 4, 6, 3, 2});  // inputs 2, 4, 8, 1, 3, 5, 2, 1 = 26
  TokenShard shard(s.path), flags(s.dir.file(kTrainFlagsFile));
  DataConfig c = epoch_config();
  EpochStream st(index_epoch_units(shard, &flags, c), c);
  ASSERT_TRUE(st.packed());
  const int64_t n0 = st.sequences_in_epoch(0), n1 = st.sequences_in_epoch(1);
  EXPECT_GE(n0, 4);  // 26 inputs need at least 4 rows of 8
  EXPECT_LT(n0, 8);  // and packing needs fewer than one row per sample
  EXPECT_EQ(st.total_sequences(), n0 + n1);
  const auto rows = rows_of(st, shard, &flags, n0 + n1 + 1, 8);
  for (int e = 0; e < 2; ++e) {
    std::multiset<int> seen;
    for (int64_t g = e == 0 ? 0 : n0; g < (e == 0 ? n0 : n0 + n1); ++g)
      seen.insert(rows[static_cast<size_t>(g)].begin(), rows[static_cast<size_t>(g)].end());
    EXPECT_EQ(seen, (std::multiset<int>{0, 1, 2, 3, 4, 5, 6, 7})) << "epoch " << e;
  }
  EXPECT_TRUE(rows.back().empty());  // past data.epochs: padding only
  // The loss mask: sample 1's first target (its token 1) is not trained.
  std::vector<int32_t> tok(8), tgt(8), starts(8);
  for (int64_t g = 0; g < n0; ++g) {
    st.fill_row(shard, &flags, g, tok.data(), tgt.data(), starts.data());
    for (int t = 0; t < 8; ++t)
      if (tok[t] == 101 && starts[t] == t) {
        EXPECT_EQ(tgt[t], -1);
      }
  }
  // Without packing: one sample per sequence.
  c.packing = false;
  EpochStream one(index_epoch_units(shard, &flags, c), c);
  EXPECT_FALSE(one.packed());
  EXPECT_EQ(one.sequences_in_epoch(0), 8);
}

// Validation on sample-structured data packs the samples as training does, in shard order
// (the same batches whatever the seed), every sample once per pass, the loss mask applied;
// data-parallel ranks split the sequences. Without packing it keeps fixed windows.
TEST(DataEpochs, PackedValidationHoldsEverySampleOnceInShardOrder) {
  SampleShard s({3, 5, 9, 2, 4, 6, 3, 2});  // inputs 2, 4, 8, 1, 3, 5, 2, 1 = 26
  DataConfig c = epoch_config();
  c.epochs = 0;
  const ValidationSet v(s.path, c);
  ASSERT_TRUE(v.packed());
  const int T = c.seq_len, B = c.micro_batch;
  std::vector<int> seen;  // samples in the order the pass meets them
  int64_t masked_first = 0, padded_rows = 0;
  for (int64_t i = 0; i < v.num_batches(); ++i) {
    const Batch b = v.val_batch(i);
    ASSERT_TRUE(b.sample_starts.defined());
    for (int r = 0; r < B; ++r) {
      const int32_t *tok = b.tokens.i32() + r * T, *tgt = b.targets.i32() + r * T,
                    *st = b.sample_starts.i32() + r * T;
      bool any = false;
      for (int t = 0; t < T; ++t) {
        ASSERT_TRUE(st[t] == t || (t > 0 && st[t] == st[t - 1])) << "row " << r << " pos " << t;
        if (tgt[t] != -1) {
          EXPECT_EQ(tgt[t], tok[t]) << "a target from another sample";
          any = true;
        }
        if (st[t] == t && tok[t] != 0) seen.push_back(tok[t] - 100);
        masked_first += tok[t] == 101 && st[t] == t && tgt[t] == -1;
      }
      padded_rows += !any;
    }
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));  // each once, in shard order
  EXPECT_EQ(masked_first, 1);                                   // the loss mask
  EXPECT_LT(padded_rows, B);  // only the last batch's rows past the last sequence
  // The seed does not change validation batches.
  DataConfig other = c;
  other.seed = 99;
  const Batch a = v.val_batch(0), o = ValidationSet(s.path, other).val_batch(0);
  EXPECT_TRUE(std::equal(a.tokens.i32(), a.tokens.i32() + B * T, o.tokens.i32()));
  // Two data-parallel ranks: batch i of rank r holds sequences (2i + r) * B ..., so together
  // they hold what one rank's batches hold.
  const ValidationSet r0(s.path, c, 0, 2), r1(s.path, c, 1, 2);
  EXPECT_EQ(r0.num_batches(), (v.num_batches() * B + 2 * B - 1) / (2 * B));
  const Batch b0 = r0.val_batch(0), b1 = r1.val_batch(0), w0 = v.val_batch(0);
  EXPECT_TRUE(std::equal(b0.tokens.i32(), b0.tokens.i32() + B * T, w0.tokens.i32()));
  if (v.num_batches() > 1) {
    const Batch w1 = v.val_batch(1);
    EXPECT_TRUE(std::equal(b1.tokens.i32(), b1.tokens.i32() + B * T, w1.tokens.i32()));
  }
  // data.packing: false keeps fixed windows (no sample starts).
  c.packing = false;
  const ValidationSet windows(s.path, c);
  EXPECT_FALSE(windows.packed());
  EXPECT_FALSE(windows.val_batch(0).sample_starts.defined());
}

TEST(DataEpochs, PlainTextEpochsCoverEveryWindowOnce) {
  TempDir dir("epochs_text");
  std::vector<int32_t> ids(8 * 10 + 1);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  write_shard(dir.file("train.bin"), ids, 100);
  TokenShard shard(dir.file("train.bin"));
  DataConfig c = epoch_config();
  EpochStream st(index_epoch_units(shard, nullptr, c), c);
  EXPECT_FALSE(st.packed());
  ASSERT_EQ(st.sequences_in_epoch(0), 10);
  std::set<int32_t> firsts;
  std::vector<int32_t> tok(8), tgt(8);
  for (int64_t g = 0; g < 10; ++g) {
    st.fill_row(shard, nullptr, g, tok.data(), tgt.data(), nullptr);
    firsts.insert(tok[0]);
    for (int t = 0; t < 8; ++t) EXPECT_EQ(tgt[t], tok[t] + 1);
  }
  EXPECT_EQ(firsts.size(), 10u);  // every window once
}

// The rows a loader returns for steps [0, steps), as (sample values of each row).
std::vector<std::vector<int32_t>> loader_rows(const std::string& path, const DataConfig& c,
                                              int offset, int stride, int steps) {
  Loader l(path, c, 0, 1, 0, offset, stride);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < steps * c.grad_accum; ++i) {
    const Batch b = l.next();
    EXPECT_TRUE(b.sample_starts.defined());
    for (int r = 0; r < c.micro_batch; ++r)
      out.emplace_back(b.tokens.i32() + r * c.seq_len, b.tokens.i32() + (r + 1) * c.seq_len);
  }
  return out;
}

TEST(DataEpochs, DataParallelRanksSplitTheSameSequences) {
  SampleShard s({3, 5, 9, 2, 4, 6, 3, 2, 7, 4, 5, 2});
  DataConfig one = epoch_config();
  one.grad_accum = 2;  // one rank: 2 micro-batches of 2 rows per step
  const auto whole = loader_rows(s.path, one, 0, 1, 3);
  DataConfig two = one;
  two.grad_accum = 1;  // two ranks: one micro-batch each, the same 4 rows per step
  const auto r0 = loader_rows(s.path, two, 0, 2, 3), r1 = loader_rows(s.path, two, 1, 2, 3);
  // Step s of the one-rank run = rank 0's then rank 1's rows of step s.
  for (int step = 0; step < 3; ++step)
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(whole[static_cast<size_t>(step * 4 + r)], r0[static_cast<size_t>(step * 2 + r)]);
      EXPECT_EQ(whole[static_cast<size_t>(step * 4 + 2 + r)],
                r1[static_cast<size_t>(step * 2 + r)]);
    }
  // A loader started at step 2 gives the uninterrupted loader's step 2.
  Loader resumed(s.path, one, 0, 1, 2, 0, 1);
  const Batch b = resumed.next();
  EXPECT_EQ(std::vector<int32_t>(b.tokens.i32(), b.tokens.i32() + one.seq_len), whole[8]);
}

}  // namespace
}  // namespace braid
