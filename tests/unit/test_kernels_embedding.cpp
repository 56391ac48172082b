// Token + position embedding CPU kernels: gather, deterministic scatter-add, bad-id errors.
#include <gtest/gtest.h>

#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using namespace kernel_test;

constexpr int64_t B = 2, T = 5, V = 4, C = 7, P = 9;

// Token 2 repeats (within and across batch rows) so the scatter has collisions; token 3 never
// appears, so its gradient row must stay as it was.
Tensor test_tokens() { return Tensor::from_vector_i32({2, 0, 2, 1, 2, 1, 2, 0, 0, 2}, {B, T}); }

TEST(KernelsEmbedding, ForwardGathersTokenAndPositionRows) {
  Tensor tokens = test_tokens();
  Tensor wte = random_tensor({V, C}, 1), wpe = random_tensor({P, C}, 2);
  const int64_t pos_offset = 3;
  const auto te = to_double(wte), pe = to_double(wpe);
  std::vector<double> ref(B * T * C), ref_nopos(B * T * C);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t tok = tokens.i32()[b * T + t];
        ref_nopos[(b * T + t) * C + c] = te[tok * C + c];
        ref[(b * T + t) * C + c] = te[tok * C + c] + pe[(pos_offset + t) * C + c];
      }
  Tensor out = nan_tensor({B, T, C});
  embedding_forward(test_ctx(), out, tokens, wte, wpe, pos_offset);
  expect_close(out, ref, 0, 1e-7, "out with positions");
  Tensor out2 = nan_tensor({B, T, C});
  embedding_forward(test_ctx(), out2, tokens, wte, Tensor());
  expect_close(out2, ref_nopos, 0, 0, "out without positions");
}

TEST(KernelsEmbedding, BackwardAccumulatesScatteredRows) {
  Tensor tokens = test_tokens();
  Tensor dout = random_tensor({B, T, C}, 3);
  Tensor dwte = random_tensor({V, C}, 4), dwpe = random_tensor({P, C}, 5);
  const int64_t pos_offset = 4;
  std::vector<double> te_ref = to_double(dwte), pe_ref = to_double(dwpe);
  const auto d = to_double(dout);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        te_ref[tokens.i32()[b * T + t] * C + c] += d[(b * T + t) * C + c];
        pe_ref[(pos_offset + t) * C + c] += d[(b * T + t) * C + c];
      }
  embedding_backward(test_ctx(), dwte, dwpe, dout, tokens, pos_offset);
  expect_close(dwte, te_ref, 1e-6, 1e-6, "dwte");
  expect_close(dwpe, pe_ref, 1e-6, 1e-6, "dwpe");

  Tensor dwte2 = Tensor::zeros({V, C}), no_pos;
  embedding_backward(test_ctx(), dwte2, no_pos, dout, tokens);
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(dwte2.f32()[3 * C + c], 0.0f) << "unused token row";
}

TEST(KernelsEmbedding, BackwardDoesNotDependOnThreadCount) {
  const int64_t b = 4, t = 257, v = 50, c = 33;
  std::vector<int32_t> ids(b * t);
  kernel_test::Rng rng(6);
  for (auto& id : ids) id = static_cast<int32_t>(rng.next() % 7 == 0 ? 1 : rng.next() % v);
  Tensor tokens = Tensor::from_vector_i32(ids, {b, t});
  Tensor dout = random_tensor({b, t, c}, 7);
  auto run = [&](int threads) {
    Tensor dwte = Tensor::zeros({v, c}), dwpe = Tensor::zeros({t, c});
    with_threads(threads, [&] { embedding_backward(test_ctx(), dwte, dwpe, dout, tokens); });
    return std::pair{dwte, dwpe};
  };
  const auto [te1, pe1] = run(1);
  const auto [te3, pe3] = run(3);
  EXPECT_TRUE(bitwise_equal(te1, te3));
  EXPECT_TRUE(bitwise_equal(pe1, pe3));
}

// The partial lookup of a vocabulary shard (tensor parallelism): rows [2, 4) of a 4-row
// vocabulary. Tokens the shard holds get their row plus the position row, the others the
// position row alone; 16-bit tables give the bits of their f32 widening, and only the gathered
// rows are widened (the call's extra memory stays far below a widened copy of the shard).
TEST(KernelsEmbedding, ShardLookupWidensOnlyTheGatheredRows) {
  Tensor tokens = test_tokens();
  const int64_t row_begin = 2, rows = 2, pos_offset = 1;
  const Tensor wte = random_tensor({rows, C}, 5), wpe = random_tensor({P, C}, 6);
  std::vector<double> ref(B * T * C);
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t local = tokens.i32()[i] - row_begin;
      const float tv = local >= 0 && local < rows ? wte.f32()[local * C + c] : 0.0f;
      ref[i * C + c] = tv + wpe.f32()[(pos_offset + i % T) * C + c];
    }
  Tensor out = nan_tensor({B, T, C});
  embedding_rows_forward(test_ctx(), out, tokens, wte, wpe, row_begin, V, pos_offset);
  expect_close(out, ref, 0, 0, "f32 tables");
  for (DType dt : {DType::BF16, DType::F16}) {
    ExecContext ctx;
    const int64_t big_rows = 4096;  // a shard whose widened copy would be 112 KiB
    Tensor big = Tensor::zeros({big_rows, C}, dt);
    Tensor w16 = Tensor::empty({rows, C}, dt), p16 = Tensor::empty({P, C}, dt);
    cast(ctx, w16, wte);
    cast(ctx, p16, wpe);
    Tensor w_back = Tensor::empty({rows, C}), p_back = Tensor::empty({P, C});
    cast(ctx, w_back, w16);  // the exact f32 values of the 16-bit tables
    cast(ctx, p_back, p16);
    Tensor want = nan_tensor({B, T, C}), got = nan_tensor({B, T, C});
    embedding_rows_forward(ctx, want, tokens, w_back, p_back, row_begin, V, pos_offset);
    embedding_rows_forward(ctx, got, tokens, w16, p16, row_begin, V, pos_offset);
    EXPECT_TRUE(bitwise_equal(got, want)) << dtype_name(dt);
    // The shard's first rows are w16's; the rest are never looked up.
    Tensor head = big.slice0(0, rows);
    head.copy_from(w16);
    const int64_t before = ctx.allocator().stats().live_total;
    ctx.allocator().reset_peaks();
    Tensor got_big = nan_tensor({B, T, C});
    embedding_rows_forward(ctx, got_big, tokens, big, p16, row_begin, big_rows + row_begin,
                           pos_offset);
    const int64_t extra = ctx.allocator().stats().peak_total - before;
    EXPECT_LT(extra, big_rows * C * 4 / 4) << dtype_name(dt) << ": " << extra << " bytes";
    EXPECT_TRUE(bitwise_equal(got_big, want)) << dtype_name(dt);
  }
}

TEST(KernelsEmbedding, OutOfRangeTokenOrPositionThrows) {
  Tensor wte = random_tensor({V, C}, 1), wpe = random_tensor({P, C}, 2);
  Tensor out = Tensor::empty({1, 3, C});
  Tensor too_big = Tensor::from_vector_i32({0, 4, 1}, {1, 3});
  expect_error_with([&] { embedding_forward(test_ctx(), out, too_big, wte, wpe); },
                    {"token id 4", "V=4"});
  Tensor negative = Tensor::from_vector_i32({0, 1, -1}, {1, 3});
  expect_error_with([&] { embedding_forward(test_ctx(), out, negative, wte, wpe); },
                    {"token id -1", "V=4"});
  Tensor ok = Tensor::from_vector_i32({0, 1, 3}, {1, 3});
  expect_error_with([&] { embedding_forward(test_ctx(), out, ok, wte, wpe, /*pos_offset=*/7); },
                    {"[7, 10)", "[0, 9)"});
  Tensor dwte = Tensor::zeros({V, C}), no_pos;
  expect_error_with([&] { embedding_backward(test_ctx(), dwte, no_pos, out, too_big); },
                    {"token id 4"});
}

}  // namespace
}  // namespace braid
