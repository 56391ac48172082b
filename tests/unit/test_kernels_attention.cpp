// Causal GQA attention kernels vs a naive double-precision reference (forward, lse, backward).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/attention.h"
#include "core/kernels/elementwise.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using kernel_test::expect_close;

struct Dims {
  int64_t B, Tq, Tk, Hq, Hkv, D;
  int64_t window = 0;  // sliding window; 0: none
  // Packed samples: (B, Tk) start of the sample holding each position; empty: none.
  std::vector<int32_t> starts = {};
};

// The sample starts of rows packed with samples of these lengths (each row's lengths sum to T).
std::vector<int32_t> packed_starts(const std::vector<std::vector<int>>& rows) {
  std::vector<int32_t> out;
  for (const auto& lengths : rows) {
    int32_t pos = 0;
    for (int len : lengths) {
      for (int i = 0; i < len; ++i) out.push_back(pos);
      pos += len;
    }
  }
  return out;
}

std::vector<float> random_values(int64_t n, uint32_t seed, float amp = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-amp, amp);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

struct Inputs {
  std::vector<float> q, k, v, dout;  // q, dout: (B, Tq, Hq, D); k, v: (B, Tk, Hkv, D)
};

Inputs make_inputs(const Dims& d, uint32_t seed) {
  const int64_t nq = d.B * d.Tq * d.Hq * d.D, nk = d.B * d.Tk * d.Hkv * d.D;
  // Amplitude 1.5 with D up to 16 gives peaked but not one-hot softmaxes.
  return {random_values(nq, seed, 1.5f), random_values(nk, seed + 1, 1.5f),
          random_values(nk, seed + 2), random_values(nq, seed + 3)};
}

size_t qi(const Dims& d, int64_t b, int64_t t, int64_t h, int64_t c) {
  return static_cast<size_t>(((b * d.Tq + t) * d.Hq + h) * d.D + c);
}
size_t ki(const Dims& d, int64_t b, int64_t t, int64_t h, int64_t c) {
  return static_cast<size_t>(((b * d.Tk + t) * d.Hkv + h) * d.D + c);
}

struct RefResult {
  std::vector<double> out, lse, dq, dk, dv;
  // Sums of |terms| of each output's dot products over keys (out: p |v|, dv: p |dout|) or over
  // score gradients (dq: |ds| |k|, dk: |ds| |q|): rounding p or ds to 2^-8 relative changes
  // each output by at most 2^-8 times its sum.
  std::vector<double> bout, bdq, bdk, bdv;
};

// Full-softmax attention in double, with the analytic backward for loss = sum(out * dout).
// `out_for_dot` (the kernel's stored output): the backward's sum_j p_j dp_j is taken as
// dout . out_for_dot, as the kernels do, so a rounded stored output is not counted as error.
RefResult reference(const Dims& d, const Inputs& in,
                    const std::vector<float>* out_for_dot = nullptr) {
  RefResult r;
  r.bout.assign(in.q.size(), 0.0);
  r.bdq.assign(in.q.size(), 0.0);
  r.bdk.assign(in.k.size(), 0.0);
  r.bdv.assign(in.k.size(), 0.0);
  r.out.assign(in.q.size(), 0.0);
  r.dq.assign(in.q.size(), 0.0);
  r.dk.assign(in.k.size(), 0.0);
  r.dv.assign(in.k.size(), 0.0);
  r.lse.assign(static_cast<size_t>(d.B * d.Hq * d.Tq), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.D));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hq; ++h) {
      const int64_t g = h / (d.Hq / d.Hkv);
      for (int64_t i = 0; i < d.Tq; ++i) {
        const int64_t n = d.Tk - d.Tq + i + 1;
        // Keys outside the window get probability 0: exp(-inf).
        int64_t first = d.window > 0 ? std::max<int64_t>(0, n - d.window) : 0;
        // Keys of earlier samples too.
        if (!d.starts.empty())
          first = std::max<int64_t>(first, d.starts[static_cast<size_t>(b * d.Tk + n - 1)]);
        std::vector<double> p(static_cast<size_t>(n)), dp(static_cast<size_t>(n));
        double m = -1e300;
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t c = 0; c < d.D; ++c)
            s += double(in.q[qi(d, b, i, h, c)]) * in.k[ki(d, b, j, g, c)];
          p[j] = j < first ? -INFINITY : s * scale;
          m = std::max(m, p[j]);
        }
        double sum = 0;
        for (auto& x : p) sum += std::exp(x - m);
        const double lse = m + std::log(sum);
        r.lse[static_cast<size_t>((b * d.Hq + h) * d.Tq + i)] = lse;
        for (auto& x : p) x = std::exp(x - lse);
        double pdp = 0;
        for (int64_t j = 0; j < n; ++j) {
          double dpj = 0;
          for (int64_t c = 0; c < d.D; ++c) {
            r.out[qi(d, b, i, h, c)] += p[j] * in.v[ki(d, b, j, g, c)];
            r.dv[ki(d, b, j, g, c)] += p[j] * in.dout[qi(d, b, i, h, c)];
            dpj += double(in.dout[qi(d, b, i, h, c)]) * in.v[ki(d, b, j, g, c)];
          }
          dp[j] = dpj;
          pdp += p[j] * dpj;
        }
        if (out_for_dot) {
          pdp = 0;
          for (int64_t c = 0; c < d.D; ++c)
            pdp += double(in.dout[qi(d, b, i, h, c)]) * (*out_for_dot)[qi(d, b, i, h, c)];
        }
        for (int64_t j = 0; j < n; ++j) {
          const double ds = p[j] * (dp[j] - pdp) * scale;
          for (int64_t c = 0; c < d.D; ++c) {
            r.dq[qi(d, b, i, h, c)] += ds * in.k[ki(d, b, j, g, c)];
            r.dk[ki(d, b, j, g, c)] += ds * in.q[qi(d, b, i, h, c)];
            r.bout[qi(d, b, i, h, c)] += p[j] * std::fabs(in.v[ki(d, b, j, g, c)]);
            r.bdv[ki(d, b, j, g, c)] += p[j] * std::fabs(in.dout[qi(d, b, i, h, c)]);
            r.bdq[qi(d, b, i, h, c)] += std::fabs(ds * in.k[ki(d, b, j, g, c)]);
            r.bdk[ki(d, b, j, g, c)] += std::fabs(ds * in.q[qi(d, b, i, h, c)]);
          }
        }
      }
    }
  return r;
}

struct Outputs {
  Tensor out, lse, dq, dk, dv;
};

Outputs run_kernels(const Dims& d, const Inputs& in, ExecContext& ctx = test_ctx()) {
  const Shape qs{d.B, d.Tq, d.Hq, d.D}, ks{d.B, d.Tk, d.Hkv, d.D};
  Tensor q = Tensor::from_vector(in.q, qs), k = Tensor::from_vector(in.k, ks),
         v = Tensor::from_vector(in.v, ks), dout = Tensor::from_vector(in.dout, qs);
  Outputs o{Tensor::empty(qs), Tensor::empty({d.B, d.Hq, d.Tq}), Tensor::empty(qs),
            Tensor::empty(ks), Tensor::empty(ks)};
  // Garbage in the outputs must be overwritten, not accumulated into.
  o.out.fill_(NAN);
  o.lse.fill_(NAN);
  o.dq.fill_(NAN);
  o.dk.fill_(NAN);
  o.dv.fill_(NAN);
  const Tensor starts =
      d.starts.empty() ? Tensor() : Tensor::from_vector_i32(d.starts, {d.B, d.Tk});
  attention_forward(ctx, o.out, o.lse, q, k, v, d.window, starts);
  attention_backward(ctx, o.dq, o.dk, o.dv, dout, q, k, v, o.out, o.lse, d.window, starts);
  return o;
}

void check_against_reference(ExecContext& ctx, const Dims& d, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << "B=" << d.B << " Tq=" << d.Tq << " Tk=" << d.Tk
                                  << " Hq=" << d.Hq << " Hkv=" << d.Hkv << " D=" << d.D
                                  << " window=" << d.window);
  const Inputs in = make_inputs(d, seed);
  const RefResult ref = reference(d, in);
  const Outputs o = run_kernels(d, in, ctx);
  expect_close(o.out, ref.out, 2e-5, 1e-4, "out");
  expect_close(o.lse, ref.lse, 2e-5, 1e-5, "lse");
  expect_close(o.dq, ref.dq, 2e-5, 1e-4, "dq");
  expect_close(o.dk, ref.dk, 2e-5, 1e-4, "dk");
  expect_close(o.dv, ref.dv, 2e-5, 1e-4, "dv");
}

// At every instruction-set level this CPU has (small_gemm tiles and vector rows from Avx2 up,
// scalar loops below); the levels it lacks skip, naming the feature.
class KernelsAttentionAt : public kernel_test::AtCpuIsa {};

TEST_P(KernelsAttentionAt, MatchesReferenceOnAwkwardShapes) {
  const Dims shapes[] = {
      {2, 7, 7, 4, 2, 3},       // GQA, odd T, odd D
      {1, 1, 1, 1, 1, 5},       // T = 1, one head (a single pair: GEMMs use all threads)
      {3, 7, 7, 1, 1, 8},       // one head
      {2, 7, 7, 4, 1, 4},       // all query heads share one kv head
      {1, 1, 5, 4, 1, 4},       // decode step: Tq = 1 against 5 cached keys
      {2, 3, 7, 2, 2, 6},       // Tq = 3, Tk = 7
      {1, 130, 130, 2, 1, 16},  // several query blocks, ragged last block
      {1, 70, 150, 4, 2, 8},    // Tq < Tk across block boundaries
      // Sliding windows: inside one block, across blocks, a decode step, only the query itself
      // and a window longer than the sequence.
      {2, 7, 7, 4, 2, 3, 3},
      {1, 130, 130, 2, 1, 16, 50},
      {1, 70, 150, 4, 2, 8, 20},
      {1, 1, 5, 4, 1, 4, 2},
      {2, 9, 9, 2, 2, 4, 1},
      {1, 9, 9, 2, 1, 4, 100},
  };
  uint32_t seed = 11;
  for (const Dims& d : shapes) check_against_reference(ctx(), d, seed += 10);
}

TEST_P(KernelsAttentionAt, DocumentMaskMatchesReference) {
  // Packed samples: short ones inside a block, one spanning blocks, a sample of one token,
  // with GQA and with a sliding window on top.
  const Dims shapes[] = {
      {2, 7, 7, 4, 2, 3, 0, packed_starts({{3, 4}, {1, 1, 5}})},
      {1, 130, 130, 2, 1, 16, 0, packed_starts({{10, 100, 1, 19}})},
      {2, 150, 150, 4, 2, 8, 0, packed_starts({{70, 80}, {150}})},
      {1, 130, 130, 2, 2, 8, 30, packed_starts({{64, 66}})},
  };
  uint32_t seed = 501;
  for (const Dims& d : shapes) check_against_reference(ctx(), d, seed += 10);
}

// bf16 storage (q, k, v, dout, and the outputs): from Avx512Bf16 up the products run on bf16
// dot instructions with the probabilities and score gradients rounded to bf16; below, the
// kernel widens tiles to f32. Either way each output is within 2^-8 of its term sum (the
// rounding of p or ds, see RefResult) plus the rounding of the bf16 output itself, of the
// double reference on the same bf16 inputs. Shapes: the awkward and packed ones above (odd D
// takes the widening path at every level), odd key counts and odd first keys.
TEST_P(KernelsAttentionAt, Bf16StorageWithinRoundingBounds) {
  const Dims shapes[] = {
      {2, 7, 7, 4, 2, 3},
      {1, 1, 5, 4, 1, 4},
      {2, 3, 7, 2, 2, 6},
      {1, 130, 130, 2, 1, 16},
      {1, 70, 151, 4, 2, 8},
      {1, 131, 131, 2, 1, 64},
      {2, 64, 64, 4, 4, 32},  // the quick start's heads: whole AMX tiles everywhere
      {1, 130, 130, 2, 1, 16, 51},
      {1, 70, 150, 4, 2, 8, 21},
      {2, 150, 150, 4, 2, 8, 0, packed_starts({{71, 79}, {150}})},
      {1, 130, 130, 2, 2, 8, 31, packed_starts({{63, 67}})},
  };
  uint32_t seed = 901;
  for (const Dims& d : shapes) {
    SCOPED_TRACE(testing::Message()
                 << "Tq=" << d.Tq << " Tk=" << d.Tk << " Hq=" << d.Hq << " Hkv=" << d.Hkv
                 << " D=" << d.D << " window=" << d.window << (d.starts.empty() ? "" : " packed"));
    Inputs in = make_inputs(d, seed += 10);
    for (auto* f : {&in.q, &in.k, &in.v, &in.dout})
      for (float& x : *f) x = bf16_to_float(float_to_bf16(x));
    const Shape qs{d.B, d.Tq, d.Hq, d.D}, ks{d.B, d.Tk, d.Hkv, d.D};
    const Tensor q = Tensor::from_vector(in.q, qs).to(DType::BF16),
                 k = Tensor::from_vector(in.k, ks).to(DType::BF16),
                 v = Tensor::from_vector(in.v, ks).to(DType::BF16),
                 dout = Tensor::from_vector(in.dout, qs).to(DType::BF16);
    Tensor out = Tensor::empty(qs, DType::BF16), lse = Tensor::empty({d.B, d.Hq, d.Tq});
    Tensor dq = Tensor::empty(qs, DType::BF16), dk = Tensor::empty(ks, DType::BF16),
           dv = Tensor::empty(ks, DType::BF16);
    const Tensor starts =
        d.starts.empty() ? Tensor() : Tensor::from_vector_i32(d.starts, {d.B, d.Tk});
    attention_forward(ctx(), out, lse, q, k, v, d.window, starts);
    attention_backward(ctx(), dq, dk, dv, dout, q, k, v, out, lse, d.window, starts);
    const Tensor out32 = out.to(DType::F32);
    const std::vector<float> stored(out32.f32(), out32.f32() + out32.numel());
    const RefResult ref = reference(d, in, &stored);
    expect_close(lse, ref.lse, 2e-5, 1e-5, "lse");
    auto within = [](const Tensor& got, const std::vector<double>& want,
                     const std::vector<double>& bound, const char* what) {
      const Tensor g = got.to(DType::F32);
      int bad = 0;
      for (int64_t i = 0; i < g.numel(); ++i) {
        const double w = want[static_cast<size_t>(i)];
        const double tol = std::ldexp(bound[static_cast<size_t>(i)] + std::fabs(w), -8) + 2e-5;
        if (!(std::fabs(g.f32()[i] - w) <= tol) && ++bad <= 3)
          ADD_FAILURE() << what << "[" << i << "]: got " << g.f32()[i] << ", reference " << w
                        << ", tolerance " << tol;
      }
      EXPECT_EQ(bad, 0) << what;
    };
    within(out, ref.out, ref.bout, "out");
    within(dq, ref.dq, ref.bdq, "dq");
    within(dk, ref.dk, ref.bdk, "dk");
    within(dv, ref.dv, ref.bdv, "dv");
  }
}

// GPT-2's fused projection read in place: the packed kernels give the split kernels' bits
// (out, lse, and dq | dk | dv side by side), for f32, bf16 and f16 storage, with a window and
// with packed samples.
TEST_P(KernelsAttentionAt, PackedQkvGivesTheSplitKernelsBits) {
  const Dims shapes[] = {
      {2, 7, 7, 2, 2, 3},
      {1, 130, 130, 2, 2, 16},
      {2, 64, 64, 4, 4, 32},
      {1, 131, 131, 2, 2, 64, 40},
      {2, 150, 150, 2, 2, 8, 0, packed_starts({{70, 80}, {150}})},
  };
  uint32_t seed = 1301;
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (const Dims& d : shapes) {
      SCOPED_TRACE(testing::Message()
                   << dtype_name(t) << " T=" << d.Tq << " H=" << d.Hq << " D=" << d.D
                   << " window=" << d.window << (d.starts.empty() ? "" : " packed"));
      const int64_t B = d.B, T = d.Tq, H = d.Hq, C = H * d.D;
      const Shape hs{B, T, H, d.D};
      const Tensor qkv =
          Tensor::from_vector(random_values(B * T * 3 * C, seed += 10), {B, T, 3 * C}).to(t);
      const Tensor dout = Tensor::from_vector(random_values(B * T * C, seed += 10), hs).to(t);
      Tensor q = Tensor::empty(hs, t), k = Tensor::empty(hs, t), v = Tensor::empty(hs, t);
      Tensor q2 = q.view({B * T, C}), k2 = k.view({B * T, C}), v2 = v.view({B * T, C});
      split_columns(ctx(), {&q2, &k2, &v2}, qkv.view({B * T, 3 * C}));
      const Tensor starts = d.starts.empty() ? Tensor() : Tensor::from_vector_i32(d.starts, {B, T});

      Tensor out = Tensor::empty(hs, t), lse = Tensor::empty({B, H, T});
      attention_forward(ctx(), out, lse, q, k, v, d.window, starts);
      Tensor dq = Tensor::empty(hs, t), dk = Tensor::empty(hs, t), dv = Tensor::empty(hs, t);
      attention_backward(ctx(), dq, dk, dv, dout, q, k, v, out, lse, d.window, starts);
      Tensor dqkv_ref = Tensor::empty({B, T, 3 * C}, t);
      Tensor dqkv_ref2 = dqkv_ref.view({B * T, 3 * C});
      const Tensor dq2 = dq.view({B * T, C}), dk2 = dk.view({B * T, C}), dv2 = dv.view({B * T, C});
      concat_columns(ctx(), dqkv_ref2, {&dq2, &dk2, &dv2});

      auto nans = [](const Shape& shape, DType dt) {  // garbage the kernels must overwrite
        Tensor x = Tensor::empty(shape);
        x.fill_(NAN);
        return x.to(dt);
      };
      Tensor out_p = nans(hs, t), lse_p = nans({B, H, T}, DType::F32);
      attention_forward_packed(ctx(), out_p, lse_p, qkv, H, d.window, starts);
      EXPECT_TRUE(kernel_test::bitwise_equal(out_p, out)) << "out";
      EXPECT_TRUE(kernel_test::bitwise_equal(lse_p, lse)) << "lse";
      Tensor dqkv = nans({B, T, 3 * C}, t);
      attention_backward_packed(ctx(), dqkv, dout, qkv, out, lse, H, d.window, starts);
      EXPECT_TRUE(kernel_test::bitwise_equal(dqkv, dqkv_ref)) << "dqkv";
    }
  const Tensor odd = Tensor::empty({1, 4, 3 * 10});
  Tensor out = Tensor::empty({1, 4, 3, 3}), lse = Tensor::empty({1, 3, 4});
  kernel_test::expect_error_with(
      [&] { attention_forward_packed(ctx(), out, lse, odd, 3); },
      {"attention_forward_packed", "3 heads do not divide the width 10"});
}

INSTANTIATE_TEST_SUITE_P(KernelsAttention, KernelsAttentionAt, ::testing::ValuesIn(kAllCpuIsas),
                         kernel_test::cpu_isa_test_name);

TEST(KernelsAttention, BackwardReferenceMatchesFiniteDifferences) {
  // Guards the analytic reference itself: central differences of loss = sum(out * dout).
  const Dims d{1, 3, 5, 2, 1, 3};
  Inputs in = make_inputs(d, 5);
  const RefResult ref = reference(d, in);
  auto loss = [&](const Inputs& x) {
    const RefResult r = reference(d, x);
    double s = 0;
    for (size_t i = 0; i < r.out.size(); ++i) s += r.out[i] * x.dout[i];
    return s;
  };
  const float eps = 1e-2f;  // inputs are floats, so the step must be representable
  auto check = [&](std::vector<float> Inputs::*field, const std::vector<double>& grad,
                   const char* name) {
    for (size_t i = 0; i < (in.*field).size(); ++i) {
      Inputs plus = in, minus = in;
      (plus.*field)[i] += eps;
      (minus.*field)[i] -= eps;
      const double h = double((plus.*field)[i]) - double((minus.*field)[i]);
      const double fd = (loss(plus) - loss(minus)) / h;
      EXPECT_NEAR(fd, grad[i], 1e-3) << name << "[" << i << "]";
    }
  };
  check(&Inputs::q, ref.dq, "dq");
  check(&Inputs::k, ref.dk, "dk");
  check(&Inputs::v, ref.dv, "dv");
}

TEST(KernelsAttention, DecodeStepEqualsLastRowOfFullAttention) {
  const Dims full{2, 9, 9, 4, 2, 8};
  const Inputs in = make_inputs(full, 77);
  const Outputs o = run_kernels(full, in);
  // The decode query is the last query row of each batch entry; keys and values are shared.
  const Dims dec{full.B, 1, full.Tk, full.Hq, full.Hkv, full.D};
  std::vector<float> q_last;
  for (int64_t b = 0; b < full.B; ++b)
    for (int64_t h = 0; h < full.Hq; ++h)
      for (int64_t c = 0; c < full.D; ++c) q_last.push_back(in.q[qi(full, b, full.Tq - 1, h, c)]);
  Tensor q = Tensor::from_vector(q_last, {dec.B, 1, dec.Hq, dec.D});
  Tensor k = Tensor::from_vector(in.k, {full.B, full.Tk, full.Hkv, full.D});
  Tensor v = Tensor::from_vector(in.v, {full.B, full.Tk, full.Hkv, full.D});
  Tensor out = Tensor::empty({dec.B, 1, dec.Hq, dec.D}), lse = Tensor::empty({dec.B, dec.Hq, 1});
  attention_forward(test_ctx(), out, lse, q, k, v);
  for (int64_t b = 0; b < full.B; ++b)
    for (int64_t h = 0; h < full.Hq; ++h) {
      EXPECT_NEAR(lse.f32()[b * dec.Hq + h], o.lse.f32()[(b * full.Hq + h) * full.Tq + full.Tq - 1],
                  1e-5);
      for (int64_t c = 0; c < full.D; ++c)
        EXPECT_NEAR(out.f32()[qi(dec, b, 0, h, c)], o.out.f32()[qi(full, b, full.Tq - 1, h, c)],
                    1e-5);
    }
}

TEST(KernelsAttention, IsDeterministic) {
  const Dims d{2, 40, 40, 4, 2, 16};
  const Inputs in = make_inputs(d, 3);
  const Outputs a = run_kernels(d, in), b = run_kernels(d, in);
  for (const auto& [x, y] : {std::pair{a.out, b.out}, {a.dq, b.dq}, {a.dk, b.dk}, {a.dv, b.dv}})
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.f32()[i], y.f32()[i]) << i;
}

TEST(KernelsAttention, RejectsBadArguments) {
  auto t = [](const Shape& s) { return Tensor::zeros(s); };
  Tensor out = t({1, 4, 4, 8}), lse = t({1, 4, 4});
  // Query heads not a multiple of kv heads.
  EXPECT_THROW(
      attention_forward(test_ctx(), out, lse, t({1, 4, 4, 8}), t({1, 4, 3, 8}), t({1, 4, 3, 8})),
      Error);
  // More queries than keys.
  EXPECT_THROW(
      attention_forward(test_ctx(), out, lse, t({1, 4, 4, 8}), t({1, 3, 2, 8}), t({1, 3, 2, 8})),
      Error);
  // v shaped unlike k.
  EXPECT_THROW(
      attention_forward(test_ctx(), out, lse, t({1, 4, 4, 8}), t({1, 4, 2, 8}), t({1, 4, 2, 4})),
      Error);
  // lse of the wrong shape.
  Tensor bad_lse = t({1, 4, 3});
  EXPECT_THROW(attention_forward(test_ctx(), out, bad_lse, t({1, 4, 4, 8}), t({1, 4, 2, 8}),
                                 t({1, 4, 2, 8})),
               Error);
  // Integer inputs.
  Tensor qi32 = Tensor::zeros({1, 4, 4, 8}, DType::I32);
  EXPECT_THROW(attention_forward(test_ctx(), out, lse, qi32, t({1, 4, 2, 8}), t({1, 4, 2, 8})),
               Error);
  // dk shaped like q in backward.
  Tensor q = t({1, 4, 4, 8}), k = t({1, 4, 2, 8}), dq = t({1, 4, 4, 8}), dv = t({1, 4, 2, 8});
  Tensor bad_dk = t({1, 4, 4, 8});
  EXPECT_THROW(attention_backward(test_ctx(), dq, bad_dk, dv, q, q, k, k, q, lse), Error);
}

}  // namespace
}  // namespace braid
