// The tensor-parallel copy kernels against element-by-element reference loops, in every dtype:
// seq_to_blocks / blocks_to_seq (sequence-parallel reorders) and extract_ranges /
// insert_ranges (shard copies), with the ShardSpec wrappers in core/parameter.h.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/kernels/seq_reorder.h"
#include "core/kernels/shard_copy.h"
#include "core/parameter.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using kernel_test::bitwise_equal;
using kernel_test::expect_error_with;

const DType kDtypes[] = {DType::F32, DType::BF16, DType::F16, DType::I32};

// Distinct bytes in every element (the kernels copy bytes, so any pattern is a valid value).
Tensor patterned(const Shape& shape, DType dtype, int seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = static_cast<unsigned char>(i * 131 + seed * 17 + 7);
  return t;
}

// Element i of a as element j of b, byte for byte.
bool same_element(const Tensor& a, int64_t i, const Tensor& b, int64_t j) {
  const size_t es = dtype_size(a.dtype());
  return std::memcmp(static_cast<const char*>(a.raw()) + i * es,
                     static_cast<const char*>(b.raw()) + j * es, es) == 0;
}

TEST(KernelsSeqReorder, BlocksAreRankMajorSlicesOfEverySequence) {
  ExecContext& ctx = test_ctx();
  for (DType dt : kDtypes)
    for (int n : {1, 2, 3}) {
      const int64_t B = 3, T = 6, C = 5, Tl = T / n;
      const Tensor seq = patterned({B, T, C}, dt, n);
      Tensor blocks = Tensor::empty({B * T * C}, dt);
      seq_to_blocks(ctx, blocks, seq, n);
      int bad = 0;
      for (int64_t r = 0; r < n; ++r)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t t = 0; t < Tl; ++t)
            for (int64_t c = 0; c < C; ++c)
              bad += !same_element(blocks, ((r * B + b) * Tl + t) * C + c, seq,
                                   (b * T + r * Tl + t) * C + c);
      EXPECT_EQ(bad, 0) << dtype_name(dt) << " n=" << n;
      Tensor back = patterned({B, T, C}, dt, 99);
      blocks_to_seq(ctx, back, blocks, n);
      EXPECT_TRUE(bitwise_equal(back, seq)) << dtype_name(dt) << " n=" << n;
    }
}

TEST(KernelsSeqReorder, TwoDimensionalTargets) {
  // The vocab-parallel loss reorders (B, T) i32 targets to the gathered rows' order.
  ExecContext& ctx = test_ctx();
  const int64_t B = 2, T = 4;
  Tensor targets = Tensor::from_vector_i32({0, 1, 2, 3, 10, 11, 12, 13}, {B, T});
  Tensor rows = Tensor::empty({B * T}, DType::I32);
  seq_to_blocks(ctx, rows, targets, 2);
  const std::vector<int32_t> want = {0, 1, 10, 11, 2, 3, 12, 13};
  EXPECT_EQ(std::vector<int32_t>(rows.i32(), rows.i32() + B * T), want);
}

TEST(KernelsSeqReorder, RejectsBadArguments) {
  ExecContext& ctx = test_ctx();
  Tensor seq = Tensor::zeros({2, 6, 3});
  Tensor blocks = Tensor::zeros({36});
  expect_error_with([&] { seq_to_blocks(ctx, blocks, seq, 4); },
                    {"seq_to_blocks", "T = 6", "4 slices"});
  Tensor small = Tensor::zeros({30});
  expect_error_with([&] { blocks_to_seq(ctx, seq, small, 2); }, {"blocks_to_seq", "blocks"});
  Tensor half = Tensor::zeros({36}, DType::BF16);
  expect_error_with([&] { seq_to_blocks(ctx, half, seq, 2); }, {"seq_to_blocks", "dtype"});
  Tensor flat = Tensor::zeros({12});
  expect_error_with([&] { seq_to_blocks(ctx, blocks, flat, 2); }, {"(B, T, ...)"});
}

// whole (4, 9, 3) with ranges along each dim; part by the reference index map.
TEST(KernelsShardCopy, ExtractAndInsertRangesAlongEveryDim) {
  ExecContext& ctx = test_ctx();
  const Shape g = {4, 9, 3};
  const std::vector<IndexRanges> per_dim = {{{1, 2}, {3, 4}}, {{1, 3}, {4, 6}, {7, 9}}, {{0, 2}}};
  for (DType dt : kDtypes)
    for (int dim = 0; dim < 3; ++dim) {
      const IndexRanges& ranges = per_dim[static_cast<size_t>(dim)];
      std::vector<int64_t> index;  // part's index along dim -> whole's
      for (auto [b, e] : ranges)
        for (int64_t i = b; i < e; ++i) index.push_back(i);
      Shape local = g;
      local[static_cast<size_t>(dim)] = static_cast<int64_t>(index.size());
      const Tensor whole = patterned(g, dt, dim);
      Tensor part = Tensor::empty(local, dt);
      extract_ranges(ctx, part, whole, dim, ranges);
      int bad = 0;
      for (int64_t a = 0; a < local[0]; ++a)
        for (int64_t b = 0; b < local[1]; ++b)
          for (int64_t c = 0; c < local[2]; ++c) {
            int64_t w[3] = {a, b, c};
            w[dim] = index[static_cast<size_t>(w[dim])];
            bad += !same_element(part, (a * local[1] + b) * local[2] + c, whole,
                                 (w[0] * g[1] + w[1]) * g[2] + w[2]);
          }
      EXPECT_EQ(bad, 0) << dtype_name(dt) << " dim " << dim;
      // Insert into a different tensor: the ranges become whole's, the rest stays.
      const Tensor other = patterned(g, dt, 50 + dim);
      Tensor target = patterned(g, dt, 50 + dim);
      insert_ranges(ctx, target, part, dim, ranges);
      bad = 0;
      for (int64_t a = 0; a < g[0]; ++a)
        for (int64_t b = 0; b < g[1]; ++b)
          for (int64_t c = 0; c < g[2]; ++c) {
            const int64_t w[3] = {a, b, c};
            bool in = false;
            for (auto [lo, hi] : ranges) in = in || (w[dim] >= lo && w[dim] < hi);
            const int64_t i = (a * g[1] + b) * g[2] + c;
            bad += !same_element(target, i, in ? whole : other, i);
          }
      EXPECT_EQ(bad, 0) << dtype_name(dt) << " dim " << dim;
    }
}

TEST(KernelsShardCopy, RejectsBadArguments) {
  ExecContext& ctx = test_ctx();
  Tensor whole = Tensor::zeros({4, 6});
  Tensor part = Tensor::zeros({4, 2});
  expect_error_with(
      [&] {
        extract_ranges(ctx, part, whole, 1, {{5, 7}});
      },
      {"extract_ranges", "[5, 7)", "[0, 6)"});
  expect_error_with([&] { extract_ranges(ctx, part, whole, 1, {{0, 3}}); }, {"extract_ranges"});
  expect_error_with(
      [&] {
        insert_ranges(ctx, whole, part, 2, {{0, 2}});
      },
      {"insert_ranges", "dim 2"});
  Tensor half = Tensor::zeros({4, 2}, DType::F16);
  expect_error_with(
      [&] {
        insert_ranges(ctx, whole, half, 1, {{0, 2}});
      },
      {"insert_ranges", "dtype"});
}

TEST(KernelsShardCopy, ShardSpecWrappersWithAndWithoutContext) {
  // c_attn-like fused blocks in bf16: the context and host overloads agree, and the parts
  // put back give the whole.
  ExecContext& ctx = test_ctx();
  const Tensor full = patterned({12, 3}, DType::BF16, 5);
  const ShardSpec s{0, 2, {4, 4, 4}};
  Tensor back = Tensor::zeros({12, 3}, DType::BF16);
  for (int part = 0; part < 2; ++part) {
    const Tensor a = extract_shard(ctx, full, s, part);
    EXPECT_TRUE(bitwise_equal(a, extract_shard(full, s, part)));
    insert_shard(ctx, back, a, s, part);
  }
  EXPECT_TRUE(bitwise_equal(back, full));
  // Unsplit: the whole tensor, any rank.
  const ShardSpec whole_spec;
  EXPECT_TRUE(bitwise_equal(extract_shard(ctx, full, whole_spec, 0), full));
}

}  // namespace
}  // namespace braid
