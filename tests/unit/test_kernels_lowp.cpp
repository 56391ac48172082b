// Every dtype-generic kernel with bf16 and f16 storage against its f32 version: inputs hold
// values the 16-bit type can represent, so the only allowed difference is the rounding of
// the outputs (per-dtype tolerance); f32 outputs (statistics, parameter gradients) must match.
// Each test runs once per instruction-set level this CPU has (conversion path, bf16 GEMM plan,
// vector rows), on a context at that level; the levels it lacks skip, naming the feature.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/kernels/activation.h"
#include "core/kernels/attention.h"
#include "core/kernels/cpu/convert.h"
#include "core/kernels/cpu/gemm_backends.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"
#include "core/kernels/rmsnorm.h"
#include "core/kernels/rope.h"
#include "kernel_test_util.h"

namespace braid {
namespace {

using namespace kernel_test;

constexpr DType kLow[] = {DType::BF16, DType::F16};

// Output rounding: bf16 keeps 8 significant bits, f16 11; the bound is one unit in the last
// place (rounding to nearest costs half of it). atol covers results near zero, where the f32
// kernel's own cancellation dominates.
struct Tol {
  double atol, rtol;
};
Tol tol(DType t) { return t == DType::BF16 ? Tol{1e-5, 1.0 / 256} : Tol{1e-6, 1.0 / 2048}; }

// Random f32 values that `t` represents exactly.
Tensor rnd(const Shape& s, uint64_t seed, DType t, double lo = -1.0, double hi = 1.0) {
  return random_tensor(s, seed, lo, hi).to(t).to(DType::F32);
}
Tensor as(const Tensor& f32, DType t) { return f32.to(t); }

// got (any float dtype) vs the f32 kernel's result.
void expect_low(const Tensor& got, const Tensor& ref, DType t, const std::string& what,
                double extra_atol = 0.0) {
  ASSERT_EQ(got.dtype(), t) << what << " has the wrong storage dtype";
  const Tol tl = tol(t);
  expect_close(got.to(DType::F32), to_double(ref), tl.atol + extra_atol, tl.rtol, what);
}
// f32 outputs of a low-precision call (statistics, parameter gradients): the same bits.
void expect_same_f32(const Tensor& got, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::F32) << what;
  EXPECT_TRUE(bitwise_equal(got, ref)) << what << " differs from the f32 kernel";
}

class KernelsLowp : public AtCpuIsa {
 protected:
  // A context at the test's level whose plan is {reference, native}: gemm_bf16's native code
  // path runs on every CPU.
  std::unique_ptr<ExecContext> native_gemm_ctx() {
    ExecOptions opts;
    opts.cpu_isa = GetParam();
    opts.gemm = GemmPlan{GemmBackend::Reference, Bf16Mode::Native};
    return std::make_unique<ExecContext>(opts);
  }
};

TEST_P(KernelsLowp, LinearForwardBackwardWidenedAndNativeGemm) {
  // The level's default plan (native bf16 from AVX512_BF16 up where oneDNN has it, widening
  // below); {reference, native} runs gemm_bf16's native code path on every CPU.
  const std::unique_ptr<ExecContext> native_owner = native_gemm_ctx();
  ExecContext& native = *native_owner;
  for (ExecContext* ctx : {&ctx(), &native}) {
    for (DType t : kLow) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (ctx == &native ? " native" : " default"));
      const int64_t N = 6, IN = 33, OUT = 17;
      Tensor x = rnd({N, IN}, 1, t), w = rnd({OUT, IN}, 2, t), b = rnd({OUT}, 3, t);
      Tensor dy = rnd({N, OUT}, 4, t);
      Tensor y = Tensor::empty({N, OUT}), ylo = Tensor::empty({N, OUT}, t);
      linear_forward(*ctx, y, x, w, b);
      linear_forward(*ctx, ylo, as(x, t), as(w, t), as(b, t));
      expect_low(ylo, y, t, "y", 1e-5);
      Tensor dx = rnd({N, IN}, 5, t), dxlo = as(dx, t);  // accumulate onto existing values
      linear_backward_input(*ctx, dx, dy, w, true);
      linear_backward_input(*ctx, dxlo, as(dy, t), as(w, t), true);
      expect_low(dxlo, dx, t, "dx", 1e-5);
      Tensor dw = rnd({OUT, IN}, 6, DType::F32), db = rnd({OUT}, 7, DType::F32);
      Tensor dw2 = dw.clone(), db2 = db.clone();  // parameter gradients stay f32
      linear_backward_weight(*ctx, dw, db, dy, x);
      linear_backward_weight(*ctx, dw2, db2, as(dy, t), as(x, t));
      expect_close(dw2, to_double(dw), 1e-6, 1e-6, "dw");
      expect_same_f32(db2, db, "db");
    }
  }
}

TEST_P(KernelsLowp, LayerNormAndRmsNormKeepF32Statistics) {
  for (DType t : kLow) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t N = 5, C = 24;
    Tensor x = rnd({N, C}, 10, t, -3, 3), w = rnd({C}, 11, t), b = rnd({C}, 12, t);
    Tensor dy = rnd({N, C}, 13, t);
    Tensor y = Tensor::empty({N, C}), mean = Tensor::empty({N}), rstd = Tensor::empty({N});
    Tensor ylo = Tensor::empty({N, C}, t), mean2 = Tensor::empty({N}), rstd2 = Tensor::empty({N});
    layernorm_forward(ctx(), y, mean, rstd, x, w, b, 1e-5f);
    layernorm_forward(ctx(), ylo, mean2, rstd2, as(x, t), as(w, t), as(b, t), 1e-5f);
    expect_low(ylo, y, t, "ln y");
    expect_same_f32(mean2, mean, "ln mean");
    expect_same_f32(rstd2, rstd, "ln rstd");
    Tensor dx = Tensor::empty({N, C}), dxlo = Tensor::empty({N, C}, t);
    Tensor dw = Tensor::zeros({C}), db = Tensor::zeros({C}), dw2 = Tensor::zeros({C}),
           db2 = Tensor::zeros({C});
    layernorm_backward(ctx(), dx, dw, db, dy, x, w, mean, rstd);
    layernorm_backward(ctx(), dxlo, dw2, db2, as(dy, t), as(x, t), as(w, t), mean2, rstd2);
    expect_low(dxlo, dx, t, "ln dx");
    expect_same_f32(dw2, dw, "ln dw");
    expect_same_f32(db2, db, "ln db");

    Tensor ry = Tensor::empty({N, C}), rylo = Tensor::empty({N, C}, t);
    Tensor rr = Tensor::empty({N}), rr2 = Tensor::empty({N});
    rmsnorm_forward(ctx(), ry, rr, x, w, 1e-6f);
    rmsnorm_forward(ctx(), rylo, rr2, as(x, t), as(w, t), 1e-6f);
    expect_low(rylo, ry, t, "rms y");
    expect_same_f32(rr2, rr, "rms rstd");
    Tensor rdx = Tensor::empty({N, C}), rdxlo = Tensor::empty({N, C}, t);
    Tensor rdw = Tensor::zeros({C}), rdw2 = Tensor::zeros({C});
    rmsnorm_backward(ctx(), rdx, rdw, dy, x, w, rr);
    rmsnorm_backward(ctx(), rdxlo, rdw2, as(dy, t), as(x, t), as(w, t), rr2);
    expect_low(rdxlo, rdx, t, "rms dx");
    expect_same_f32(rdw2, rdw, "rms dw");
    // The saved statistics must be f32: a bf16 rstd is refused, naming it.
    Tensor bad = Tensor::empty({N}, t);
    expect_error_with([&] { rmsnorm_forward(ctx(), rylo, bad, as(x, t), as(w, t), 1e-6f); },
                      {"rstd"});
  }
}

TEST_P(KernelsLowp, EmbeddingForwardAndF32TableGradients) {
  for (DType t : kLow) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t B = 2, T = 5, V = 11, C = 8, P = 9;
    Tensor wte = rnd({V, C}, 20, t), wpe = rnd({P, C}, 21, t);
    Tensor tokens = Tensor::from_vector_i32({1, 3, 5, 3, 0, 10, 2, 2, 7, 1}, {B, T});
    Tensor out = Tensor::empty({B, T, C}), outlo = Tensor::empty({B, T, C}, t);
    embedding_forward(ctx(), out, tokens, wte, wpe, 2);
    embedding_forward(ctx(), outlo, tokens, as(wte, t), as(wpe, t), 2);
    expect_low(outlo, out, t, "embedding out");
    Tensor dout = rnd({B, T, C}, 22, t);
    Tensor dwte = Tensor::zeros({V, C}), dwpe = Tensor::zeros({P, C});
    Tensor dwte2 = Tensor::zeros({V, C}), dwpe2 = Tensor::zeros({P, C});
    embedding_backward(ctx(), dwte, dwpe, dout, tokens, 2);
    embedding_backward(ctx(), dwte2, dwpe2, as(dout, t), tokens, 2);
    expect_same_f32(dwte2, dwte, "dwte");
    expect_same_f32(dwpe2, dwpe, "dwpe");
  }
}

TEST_P(KernelsLowp, GeluSwigluAndRope) {
  for (DType t : kLow) {
    SCOPED_TRACE(dtype_name(t));
    const Shape s = {4, 3, 2, 8};  // also (B, T, H, D) for RoPE
    Tensor x = rnd(s, 30, t, -4, 4), u = rnd(s, 31, t), dy = rnd(s, 32, t);
    Tensor y = Tensor::empty(s), ylo = Tensor::empty(s, t);
    gelu_forward(ctx(), y, x);
    gelu_forward(ctx(), ylo, as(x, t));
    expect_low(ylo, y, t, "gelu y");
    Tensor dx = Tensor::empty(s), dxlo = Tensor::empty(s, t);
    gelu_backward(ctx(), dx, dy, x);
    gelu_backward(ctx(), dxlo, as(dy, t), as(x, t));
    expect_low(dxlo, dx, t, "gelu dx");
    const Shape s2 = {24, 8};  // SwiGLU takes (N, F)
    Tensor x2 = x.view(s2), u2 = u.view(s2), dy2 = dy.view(s2);
    Tensor y2 = Tensor::empty(s2), ylo2 = Tensor::empty(s2, t);
    swiglu_forward(ctx(), y2, x2, u2);
    swiglu_forward(ctx(), ylo2, as(x2, t), as(u2, t));
    expect_low(ylo2, y2, t, "swiglu y");
    Tensor dg = Tensor::empty(s2), du = Tensor::empty(s2);
    Tensor dglo = Tensor::empty(s2, t), dulo = Tensor::empty(s2, t);
    swiglu_backward(ctx(), dg, du, dy2, x2, u2);
    swiglu_backward(ctx(), dglo, dulo, as(dy2, t), as(x2, t), as(u2, t));
    expect_low(dglo, dg, t, "swiglu dgate");
    expect_low(dulo, du, t, "swiglu dup");
    Tensor r = x.clone(), rlo = as(x, t);  // in place
    rope_forward(ctx(), r, 3, RopeScaling{});
    rope_forward(ctx(), rlo, 3, RopeScaling{});
    expect_low(rlo, r, t, "rope forward");
    Tensor rb = dy.clone(), rblo = as(dy, t);
    rope_backward(ctx(), rb, 3, RopeScaling{});
    rope_backward(ctx(), rblo, 3, RopeScaling{});
    expect_low(rblo, rb, t, "rope backward");
  }
}

TEST_P(KernelsLowp, AttentionWithF32LogSumExp) {
  for (DType t : kLow) {
    SCOPED_TRACE(dtype_name(t));
    // From Avx512Bf16 up bf16 attention runs on bf16 dot products, with probabilities rounded
    // to bf16: test_kernels_attention.cpp checks it against its rounding bounds.
    if (t == DType::BF16 && GetParam() >= CpuIsa::Avx512Bf16) continue;
    const int64_t B = 2, T = 7, Hq = 4, Hkv = 2, D = 8;
    Tensor q = rnd({B, T, Hq, D}, 40, t), k = rnd({B, T, Hkv, D}, 41, t),
           v = rnd({B, T, Hkv, D}, 42, t), dout = rnd({B, T, Hq, D}, 43, t);
    Tensor out = Tensor::empty({B, T, Hq, D}), lse = Tensor::empty({B, Hq, T});
    Tensor outlo = Tensor::empty({B, T, Hq, D}, t), lse2 = Tensor::empty({B, Hq, T});
    attention_forward(ctx(), out, lse, q, k, v);
    attention_forward(ctx(), outlo, lse2, as(q, t), as(k, t), as(v, t));
    expect_low(outlo, out, t, "attention out");
    expect_same_f32(lse2, lse, "lse");
    // The backward reads the stored (rounded) output, so the f32 reference does too.
    Tensor out_r = outlo.to(DType::F32);
    Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()),
           dv = Tensor::empty(v.shape());
    Tensor dqlo = Tensor::empty(q.shape(), t), dklo = Tensor::empty(k.shape(), t),
           dvlo = Tensor::empty(v.shape(), t);
    attention_backward(ctx(), dq, dk, dv, dout, q, k, v, out_r, lse);
    attention_backward(ctx(), dqlo, dklo, dvlo, as(dout, t), as(q, t), as(k, t), as(v, t), outlo,
                       lse2);
    expect_low(dqlo, dq, t, "dq", 1e-5);
    expect_low(dklo, dk, t, "dk", 1e-5);
    expect_low(dvlo, dv, t, "dv", 1e-5);
  }
}

// The bf16 LM head on a native bf16 GEMM rounds dlogits to bf16 before the backward GEMMs:
// each dx[i][c] (and dw[v][c]) may then differ from the f32 kernel's by up to 2^-8 times the
// sum of |dlogits| |w| (|x|) terms of its dot product, computed here in double.
struct HeadBounds {
  std::vector<double> dx, dw;  // (N, C), (V, C)
};
HeadBounds head_bounds(const Tensor& x, const Tensor& w, const Tensor& targets, float scale) {
  const int64_t N = x.dim(0), C = x.dim(1), V = w.dim(0);
  const float* xp = x.f32();
  const float* wp = w.f32();
  HeadBounds b{std::vector<double>(N * C, 0.0), std::vector<double>(V * C, 0.0)};
  for (int64_t i = 0; i < N; ++i) {
    if (targets.i32()[i] < 0) continue;
    std::vector<double> p(V);
    double mx = -1e300, sum = 0.0;
    for (int64_t v = 0; v < V; ++v) {
      for (int64_t c = 0; c < C; ++c) p[v] += double(xp[i * C + c]) * wp[v * C + c];
      mx = std::max(mx, p[v]);
    }
    for (double& e : p) sum += (e = std::exp(e - mx));
    for (int64_t v = 0; v < V; ++v) {
      const double dl =
          std::fabs(scale * (p[v] / sum - (v == targets.i32()[i] ? 1.0 : 0.0))) / 256.0;
      for (int64_t c = 0; c < C; ++c) {
        b.dx[i * C + c] += dl * std::fabs(wp[v * C + c]);
        b.dw[v * C + c] += dl * std::fabs(xp[i * C + c]);
      }
    }
  }
  return b;
}

void expect_within(const Tensor& got, const Tensor& ref, const std::vector<double>& bound,
                   double rtol, const std::string& what) {
  const Tensor g = got.to(DType::F32);
  int bad = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double err = std::fabs(double(g.f32()[i]) - ref.f32()[i]);
    if (!(err <= 1e-7 + bound[i] + rtol * std::fabs(ref.f32()[i])) && ++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << g.f32()[i] << ", f32 kernel "
                    << ref.f32()[i] << ", bound " << bound[i];
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST_P(KernelsLowp, LmHeadCrossEntropyF32LossAndWeightGradient) {
  // The level's default plan: staged f32 arithmetic (the f32 kernel's bits) where gemm_bf16
  // widens, bf16 GEMMs where it is native; {reference, native} runs the native path everywhere.
  const std::unique_ptr<ExecContext> native_owner = native_gemm_ctx();
  ExecContext& native = *native_owner;
  for (ExecContext* c : {&ctx(), &native}) {
    for (DType t : kLow) {
      const bool on_bf16_gemm = t == DType::BF16 && c->gemm().bf16_mode == Bf16Mode::Native &&
                                native_bf16_available(c->gemm().backend);
      SCOPED_TRACE(std::string(dtype_name(t)) + (c == &native ? " native plan" : " default") +
                   (on_bf16_gemm ? ", bf16 GEMMs" : ", staged f32"));
      // N spans two row chunks (at most 512 rows each), so dw accumulates across chunks.
      const int64_t N = 600, C = 16, V = 37;
      Tensor x = rnd({N, C}, 50, t, -2, 2), w = rnd({V, C}, 51, t);
      std::vector<int32_t> tv(N);
      for (int64_t i = 0; i < N; ++i) tv[i] = i % 11 == 3 ? -1 : static_cast<int32_t>(i * 7 % V);
      Tensor targets = Tensor::from_vector_i32(tv, {N});
      Tensor losses = Tensor::empty({N}), losses2 = Tensor::empty({N});
      Tensor dx = Tensor::empty({N, C}), dxlo = Tensor::empty({N, C}, t);
      Tensor dw = Tensor::zeros({V, C}), dw2 = Tensor::zeros({V, C});
      lm_head_cross_entropy(*c, losses, dx, dw, x, w, targets, 0.125f);
      lm_head_cross_entropy(*c, losses2, dxlo, dw2, as(x, t), as(w, t), targets, 0.125f);
      if (!on_bf16_gemm) {
        expect_same_f32(losses2, losses, "losses");
        expect_low(dxlo, dx, t, "lm head dx");
        expect_same_f32(dw2, dw, "lm head dw");
        continue;
      }
      // Products of bf16 values are exact in f32: the logits differ by summation order only.
      expect_close(losses2, to_double(losses), 1e-5, 1e-5, "losses");
      const HeadBounds b = head_bounds(x, w, targets, 0.125f);
      expect_within(dxlo, dx, b.dx, tol(t).rtol, "lm head dx");
      expect_within(dw2, dw, b.dw, 1e-5, "lm head dw");
    }
  }
}

TEST_P(KernelsLowp, AddCopiesCastAndNorms) {
  for (DType t : kLow) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t N = 3, W0 = 4, W1 = 6;
    Tensor a = rnd({N, W0 + W1}, 60, t), b = rnd({N, W0 + W1}, 61, t);
    Tensor y = Tensor::empty(a.shape()), ylo = Tensor::empty(a.shape(), t);
    add(ctx(), y, a, b);
    add(ctx(), ylo, as(a, t), as(b, t));
    expect_low(ylo, y, t, "add");
    Tensor acc = a.clone(), acclo = as(a, t);
    add_inplace(ctx(), acc, b);
    add_inplace(ctx(), acclo, as(b, t));
    expect_low(acclo, acc, t, "add_inplace");
    Tensor sc = a.clone(), sclo = as(a, t);
    scale_inplace(ctx(), sc, 0.3f);
    scale_inplace(ctx(), sclo, 0.3f);
    expect_low(sclo, sc, t, "scale_inplace");
    EXPECT_EQ(sum_squares(ctx(), as(a, t)), sum_squares(ctx(), a));
    // Copies move the 16-bit values bit for bit.
    Tensor src = as(a, t), p0 = Tensor::empty({N, W0}, t), p1 = Tensor::empty({N, W1}, t);
    split_columns(ctx(), {&p0, &p1}, src);
    Tensor back = Tensor::empty(src.shape(), t);
    concat_columns(ctx(), back, {&p0, &p1});
    EXPECT_TRUE(bitwise_equal(back, src));
    EXPECT_EQ(p1.to(DType::F32).f32()[0], a.f32()[W0]);
    Tensor cache = Tensor::zeros({5, W0 + W1}, t);
    copy_rows(ctx(), cache, 2, src);
    EXPECT_TRUE(bitwise_equal(cache.slice0(2, 5), src));
    // cast: f32 -> t rounds like Tensor::to; t -> f32 is exact.
    Tensor wide = random_tensor({N, W0 + W1}, 62), narrow = Tensor::empty(wide.shape(), t);
    cast(ctx(), narrow, wide);
    EXPECT_TRUE(bitwise_equal(narrow, wide.to(t)));
    Tensor again = Tensor::empty(wide.shape());
    cast(ctx(), again, narrow);
    EXPECT_TRUE(bitwise_equal(again, narrow.to(DType::F32)));
  }
  Tensor ids = Tensor::from_vector_i32({1, 2}, {2}), y = Tensor::empty({2}, DType::BF16);
  expect_error_with([&] { gelu_forward(ctx(), y, ids); }, {"gelu_forward", "i32"});
}

// The kernels that convert 16-bit tiles inside their own loops (element-wise spans, norm rows,
// attention blocks, gathered embedding rows) give exactly the bits of the f32 kernel's result
// narrowed on the context's conversion path: shapes span several tiles, query blocks and
// grouped heads, so a wrong tile offset or stride shows as a changed bit.
TEST_P(KernelsLowp, TileConvertedKernelsGiveNarrowedF32Bits) {
  auto narrowed = [&](const Tensor& ref, DType t) {
    Tensor out = Tensor::empty(ref.shape(), t);
    cpu::narrow_from_f32(ctx(), t, ref.f32(), out.raw(), ref.numel());
    return out;
  };
  auto same = [&](const Tensor& got, const Tensor& ref, DType t, const char* what) {
    EXPECT_TRUE(bitwise_equal(got, narrowed(ref, t))) << what;
  };
  for (DType t : kLow) {
    SCOPED_TRACE(dtype_name(t));
    const int64_t n = 37 * 444;  // three spans of 8192, the last partial
    Tensor x = rnd({n}, 70, t, -4, 4), u = rnd({n}, 71, t), dy = rnd({n}, 72, t);
    Tensor y = Tensor::empty({n}), ylo = Tensor::empty({n}, t);
    gelu_forward(ctx(), y, x);
    gelu_forward(ctx(), ylo, as(x, t));
    same(ylo, y, t, "gelu y");
    gelu_backward(ctx(), y, dy, x);
    gelu_backward(ctx(), ylo, as(dy, t), as(x, t));
    same(ylo, y, t, "gelu dx");
    Tensor d = x.clone(), dlo = as(x, t);  // the derivative over the input
    gelu_forward_with_derivative(ctx(), y, d, d);
    gelu_forward_with_derivative(ctx(), ylo, dlo, dlo);
    same(ylo, y, t, "gelu_forward_with_derivative y");
    same(dlo, d, t, "gelu_forward_with_derivative dydx");
    Tensor dlo_f32 = dlo.to(DType::F32);
    gelu_backward_with_derivative(ctx(), y, dy, dlo_f32);
    gelu_backward_with_derivative(ctx(), ylo, as(dy, t), dlo);
    same(ylo, y, t, "gelu_backward_with_derivative dx");
    add(ctx(), y, x, u);
    add(ctx(), ylo, as(x, t), as(u, t));
    same(ylo, y, t, "add");
    Tensor acc = x.to(t).to(DType::F32), acclo = as(x, t);
    add_inplace(ctx(), acc, u);
    add_inplace(ctx(), acclo, as(u, t));
    same(acclo, acc, t, "add_inplace");
    const Shape s2 = {n / 37, 37};
    Tensor g2 = x.view(s2), u2 = u.view(s2), d2 = dy.view(s2);
    Tensor dg = Tensor::empty(s2), du = Tensor::empty(s2);
    Tensor dglo = Tensor::empty(s2, t), dulo = Tensor::empty(s2, t);
    swiglu_forward(ctx(), dg, g2, u2);
    swiglu_forward(ctx(), dglo, as(g2, t), as(u2, t));
    same(dglo, dg, t, "swiglu y");
    swiglu_backward(ctx(), dg, du, d2, g2, u2);
    swiglu_backward(ctx(), dglo, dulo, as(d2, t), as(g2, t), as(u2, t));
    same(dglo, dg, t, "swiglu dgate");
    same(dulo, du, t, "swiglu dup");

    const int64_t N = 37, C = 300;
    Tensor xn = rnd({N, C}, 73, t, -3, 3), w = rnd({C}, 74, t), b = rnd({C}, 75, t),
           dyn = rnd({N, C}, 76, t);
    Tensor yn = Tensor::empty({N, C}), ynlo = Tensor::empty({N, C}, t);
    Tensor mean = Tensor::empty({N}), rstd = Tensor::empty({N}), mean2 = Tensor::empty({N}),
           rstd2 = Tensor::empty({N});
    layernorm_forward(ctx(), yn, mean, rstd, xn, w, b, 1e-5f);
    layernorm_forward(ctx(), ynlo, mean2, rstd2, as(xn, t), as(w, t), as(b, t), 1e-5f);
    same(ynlo, yn, t, "layernorm y");
    expect_same_f32(rstd2, rstd, "layernorm rstd");
    Tensor dw = Tensor::zeros({C}), db = Tensor::zeros({C}), dw2 = Tensor::zeros({C}),
           db2 = Tensor::zeros({C});
    layernorm_backward(ctx(), yn, dw, db, dyn, xn, w, mean, rstd);
    layernorm_backward(ctx(), ynlo, dw2, db2, as(dyn, t), as(xn, t), as(w, t), mean2, rstd2);
    same(ynlo, yn, t, "layernorm dx");
    expect_same_f32(dw2, dw, "layernorm dw");
    expect_same_f32(db2, db, "layernorm db");
    rmsnorm_forward(ctx(), yn, rstd, xn, w, 1e-5f);
    rmsnorm_forward(ctx(), ynlo, rstd2, as(xn, t), as(w, t), 1e-5f);
    same(ynlo, yn, t, "rmsnorm y");
    Tensor dw3 = Tensor::zeros({C}), dw4 = Tensor::zeros({C});
    rmsnorm_backward(ctx(), yn, dw3, dyn, xn, w, rstd);
    rmsnorm_backward(ctx(), ynlo, dw4, as(dyn, t), as(xn, t), as(w, t), rstd2);
    same(ynlo, yn, t, "rmsnorm dx");
    expect_same_f32(dw4, dw3, "rmsnorm dw");

    // Two query blocks (64 rows each), two query heads per kv head; bf16 from Avx512Bf16 up
    // runs on bf16 dot products instead (rounding bounds: test_kernels_attention.cpp), so an
    // odd head size keeps it on the tile-converting path there.
    const int64_t B = 2, T = 70, Hq = 4, Hkv = 2;
    const int64_t D = t == DType::BF16 && GetParam() >= CpuIsa::Avx512Bf16 ? 7 : 8;
    Tensor q = rnd({B, T, Hq, D}, 77, t), k = rnd({B, T, Hkv, D}, 78, t),
           v = rnd({B, T, Hkv, D}, 79, t), dout = rnd({B, T, Hq, D}, 80, t);
    Tensor out = Tensor::empty(q.shape()), lse = Tensor::empty({B, Hq, T});
    Tensor outlo = Tensor::empty(q.shape(), t), lse2 = Tensor::empty({B, Hq, T});
    attention_forward(ctx(), out, lse, q, k, v);
    attention_forward(ctx(), outlo, lse2, as(q, t), as(k, t), as(v, t));
    same(outlo, out, t, "attention out");
    expect_same_f32(lse2, lse, "attention lse");
    Tensor out_r = outlo.to(DType::F32);
    Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()),
           dv = Tensor::empty(v.shape());
    Tensor dqlo = Tensor::empty(q.shape(), t), dklo = Tensor::empty(k.shape(), t),
           dvlo = Tensor::empty(v.shape(), t);
    attention_backward(ctx(), dq, dk, dv, dout, q, k, v, out_r, lse);
    attention_backward(ctx(), dqlo, dklo, dvlo, as(dout, t), as(q, t), as(k, t), as(v, t), outlo,
                       lse2);
    same(dqlo, dq, t, "attention dq");
    same(dklo, dk, t, "attention dk");
    same(dvlo, dv, t, "attention dv");

    const int64_t V = 50, P = 80;
    Tensor tokens = Tensor::empty({B, T}, DType::I32);
    for (int64_t i = 0; i < B * T; ++i) tokens.i32()[i] = static_cast<int32_t>((i * 7) % V);
    Tensor wte = rnd({V, C}, 81, t), wpe = rnd({P, C}, 82, t);
    Tensor emb = Tensor::empty({B, T, C}), emblo = Tensor::empty({B, T, C}, t);
    embedding_forward(ctx(), emb, tokens, wte, wpe, 5);
    embedding_forward(ctx(), emblo, tokens, as(wte, t), as(wpe, t), 5);
    same(emblo, emb, t, "embedding out");

    Tensor r = rnd({B, T, Hq, D + D % 2}, 83, t), rlo = as(r, t);  // in place, even head size
    rope_forward(ctx(), r, 3, RopeScaling{});
    rope_forward(ctx(), rlo, 3, RopeScaling{});
    same(rlo, r, t, "rope forward");
    r = rlo.to(DType::F32);  // the backward of both from the same (stored) values
    rope_backward(ctx(), r, 3, RopeScaling{});
    rope_backward(ctx(), rlo, 3, RopeScaling{});
    same(rlo, r, t, "rope backward");
  }
}

INSTANTIATE_TEST_SUITE_P(KernelsLowp, KernelsLowp, ::testing::ValuesIn(kAllCpuIsas),
                         kernel_test::cpu_isa_test_name);

}  // namespace
}  // namespace braid
