// CUDA causal attention against its CPU twin: odd sequence lengths (1, 7, 129, 1024) and head
// dimensions (1, 17, 64, 128, 160, 300, 640, 2048), grouped-query heads, fewer query rows than keys
// (KV-cache decoding), sliding windows, every float dtype; out, lse, dq, dk, dv all start as NaN.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/kernels/attention.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/cudnn_attention.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

struct AttnCase {
  int64_t B, Tq, Tk, Hq, Hkv, D;
  int64_t window = 0;  // sliding window (0: none)
};
const AttnCase kCases[] = {
    {1, 1, 1, 1, 1, 1},
    {2, 7, 7, 4, 2, 17},
    {1, 129, 129, 2, 2, 64},
    {1, 1, 33, 4, 1, 32},
    {2, 5, 40, 3, 3, 128},
    {1, 65, 65, 4, 1, 160},
    {1, 9, 9, 1, 1, 300},
    {3, 33, 70, 2, 1, 40},
    // Sliding windows: narrower than a 32-row tile, across tiles, with a KV cache, one key.
    {2, 100, 100, 4, 2, 64, 5},
    {1, 129, 129, 2, 1, 32, 40},
    {1, 20, 90, 2, 2, 16, 33},
    {1, 70, 70, 1, 1, 8, 1},
    // Wide heads (fewer warps per block; 2048 is the kernels' largest) and a training length
    // (many key tiles; cuDNN's many KV blocks and its causal mask over them).
    {1, 20, 20, 2, 1, 640},
    {1, 9, 9, 1, 1, 2048},
    {1, 1024, 1024, 4, 2, 64},
    {1, 300, 300, 2, 2, 128},
};

std::string name(const AttnCase& c) {
  return fmt::format("B{} Tq{} Tk{} Hq{} Hkv{} D{} window{}", c.B, c.Tq, c.Tk, c.Hq, c.Hkv, c.D,
                     c.window);
}

// f32 storage: both sides compute in f32 and differ in summation order and exp; 16-bit outputs
// may round the other way once.
double atol(DType d) { return d == DType::F32 ? 2e-5 : atol_for(d); }
double rtol(DType d) { return d == DType::F32 ? 1e-4 : rtol_for(d); }

class GpuAttention : public GpuTest, public ::testing::WithParamInterface<DType> {
 protected:
  // One case on the GPU against the CPU. cuDNN's kernel rounds the probabilities to the 16-bit
  // type before multiplying them by v (braid's keeps them in f32), so its tolerance is 4x wider.
  void check_case(const AttnCase& c, DType dt, uint64_t& seed, bool cudnn) {
    const Shape qs{c.B, c.Tq, c.Hq, c.D}, ks{c.B, c.Tk, c.Hkv, c.D}, ls{c.B, c.Hq, c.Tq};
    const double widen = cudnn ? 4.0 : 1.0, lse_tol = cudnn ? 1e-3 : 2e-5;
    const double at = atol(dt) * widen, rt = rtol(dt) * widen;
    const std::string what = name(c) + (cudnn ? " (cuDNN allowed)" : " (braid's kernel)");
    Tensor q = random_host(qs, dt, seed++, -2.0f, 2.0f),
           k = random_host(ks, dt, seed++, -2.0f, 2.0f);
    Tensor v = random_host(ks, dt, seed++), dout = random_host(qs, dt, seed++);
    Tensor out_c = Tensor::empty(qs, dt), lse_c = Tensor::empty(ls);
    attention_forward(cpu(), out_c, lse_c, q, k, v, c.window);
    Tensor gq = up(q), gk = up(k), gv = up(v);
    Tensor out = poisoned(qs, dt), lse = poisoned(ls, DType::F32);
    attention_forward(gpu(), out, lse, gq, gk, gv, c.window);
    EXPECT_TRUE(close(out, out_c, at, rt)) << "out " << what;
    EXPECT_TRUE(close(lse, lse_c, lse_tol, lse_tol)) << "lse " << what;

    // The backward from the CPU's saved output and lse, so it is compared on its own.
    Tensor dq_c = Tensor::empty(qs, dt), dk_c = Tensor::empty(ks, dt), dv_c = Tensor::empty(ks, dt);
    attention_backward(cpu(), dq_c, dk_c, dv_c, dout, q, k, v, out_c, lse_c, c.window);
    Tensor dq = poisoned(qs, dt), dk = poisoned(ks, dt), dv = poisoned(ks, dt);
    attention_backward(gpu(), dq, dk, dv, up(dout), gq, gk, gv, up(out_c), up(lse_c), c.window);
    EXPECT_TRUE(close(dq, dq_c, at, rt)) << "dq " << what;
    EXPECT_TRUE(close(dk, dk_c, at, rt)) << "dk " << what;
    EXPECT_TRUE(close(dv, dv_c, at, rt)) << "dv " << what;
  }
};

TEST_P(GpuAttention, ForwardAndBackwardMatchCpu) {
  const DType dt = GetParam();
  uint64_t seed = 1;
  // braid's kernel on every case, then (16-bit) with cuDNN allowed: it takes the cases it
  // supports (head dims that are multiples of 8, no window) and the rest fall back.
  cuda::set_cudnn_attention(gpu(), false);
  for (const AttnCase& c : kCases) check_case(c, dt, seed, false);
  cuda::set_cudnn_attention(gpu(), true);
  if (dt == DType::F32) return;
  const int64_t before = cuda::cudnn_attention_calls(gpu());
  for (const AttnCase& c : kCases) check_case(c, dt, seed, true);
  const std::string status = cuda::cudnn_status();
  if (status.rfind("cuDNN fused", 0) == 0)
    EXPECT_GT(cuda::cudnn_attention_calls(gpu()), before) << "cuDNN took no case: " << status;
  else
    std::printf("cuDNN attention not available: %s\n", status.c_str());
}

// "" when cuDNN attention can take `dt` on this machine, else why not (a skip reason).
std::string cudnn_unavailable(DType dt) {
  const std::string status = cuda::cudnn_status();
  if (dt == DType::F32 || status.rfind("cuDNN fused", 0) != 0)
    return "cuDNN attention takes 16-bit storage only; here: " + status;
  return "";
}

// cuDNN takes a training shape in both directions (counted one call each) and declines a
// decoding step (fewer queries than keys), whatever the cache length; the results match the CPU.
TEST_P(GpuAttention, CudnnTakesTrainingShapesAndDeclinesDecoding) {
  const DType dt = GetParam();
  if (const std::string why = cudnn_unavailable(dt); !why.empty()) GTEST_SKIP() << why;
  const std::string status = cuda::cudnn_status();
  cuda::set_cudnn_attention(gpu(), true);
  const int64_t B = 2, T = 160, Hq = 4, Hkv = 2, D = 64;
  const Shape qs{B, T, Hq, D}, ks{B, T, Hkv, D}, ls{B, Hq, T};
  Tensor q = random_host(qs, dt, 31, -2.0f, 2.0f), k = random_host(ks, dt, 32, -2.0f, 2.0f);
  Tensor v = random_host(ks, dt, 33), dout = random_host(qs, dt, 34);
  Tensor out_c = Tensor::empty(qs, dt), lse_c = Tensor::empty(ls);
  attention_forward(cpu(), out_c, lse_c, q, k, v);
  Tensor gq = up(q), gk = up(k), gv = up(v);
  Tensor out = poisoned(qs, dt), lse = poisoned(ls, DType::F32);
  int64_t calls = cuda::cudnn_attention_calls(gpu());
  attention_forward(gpu(), out, lse, gq, gk, gv);
  EXPECT_EQ(cuda::cudnn_attention_calls(gpu()), calls + 1) << "forward: " << status;
  EXPECT_TRUE(close(out, out_c, 4 * atol(dt), 4 * rtol(dt)));
  EXPECT_TRUE(close(lse, lse_c, 1e-3, 1e-3));
  Tensor dq_c = Tensor::empty(qs, dt), dk_c = Tensor::empty(ks, dt), dv_c = Tensor::empty(ks, dt);
  attention_backward(cpu(), dq_c, dk_c, dv_c, dout, q, k, v, out_c, lse_c);
  Tensor dq = poisoned(qs, dt), dk = poisoned(ks, dt), dv = poisoned(ks, dt);
  calls = cuda::cudnn_attention_calls(gpu());
  attention_backward(gpu(), dq, dk, dv, up(dout), gq, gk, gv, up(out_c), up(lse_c));
  EXPECT_EQ(cuda::cudnn_attention_calls(gpu()), calls + 1) << "backward: " << status;
  EXPECT_TRUE(close(dq, dq_c, 4 * atol(dt), 4 * rtol(dt)));
  EXPECT_TRUE(close(dk, dk_c, 4 * atol(dt), 4 * rtol(dt)));
  EXPECT_TRUE(close(dv, dv_c, 4 * atol(dt), 4 * rtol(dt)));

  // Decoding: one query against a cache that grows by one key a step.
  calls = cuda::cudnn_attention_calls(gpu());
  for (int64_t tk = 40; tk < 44; ++tk) {
    const Shape q1{1, 1, Hq, D}, kc{1, tk, Hkv, D}, l1{1, Hq, 1};
    Tensor qd = random_host(q1, dt, 40 + tk), kd = random_host(kc, dt, 50 + tk),
           vd = random_host(kc, dt, 60 + tk);
    Tensor od_c = Tensor::empty(q1, dt), ld_c = Tensor::empty(l1);
    attention_forward(cpu(), od_c, ld_c, qd, kd, vd);
    Tensor od = poisoned(q1, dt), ld = poisoned(l1, DType::F32);
    attention_forward(gpu(), od, ld, up(qd), up(kd), up(vd));
    EXPECT_TRUE(close(od, od_c, atol(dt), rtol(dt))) << "decoding step, " << tk << " keys";
  }
  EXPECT_EQ(cuda::cudnn_attention_calls(gpu()), calls) << "cuDNN took a decoding step";
}

// train.deterministic (on by default): cuDNN's backward run twice on the same inputs gives the
// same bits, at a size where its gradient parts come from many thread blocks.
TEST_P(GpuAttention, CudnnBackwardRepeatsBitForBit) {
  const DType dt = GetParam();
  if (const std::string why = cudnn_unavailable(dt); !why.empty()) GTEST_SKIP() << why;
  const std::string status = cuda::cudnn_status();
  cuda::set_cudnn_attention(gpu(), true);
  cuda::set_deterministic(gpu(), true);
  const int64_t B = 4, T = 1024, Hq = 8, Hkv = 8, D = 64;
  const Shape qs{B, T, Hq, D}, ks{B, T, Hkv, D}, ls{B, Hq, T};
  const Tensor q = up(random_host(qs, dt, 71, -2.0f, 2.0f)),
               k = up(random_host(ks, dt, 72, -2.0f, 2.0f)), v = up(random_host(ks, dt, 73)),
               dout = up(random_host(qs, dt, 74));
  Tensor out = poisoned(qs, dt), lse = poisoned(ls, DType::F32);
  attention_forward(gpu(), out, lse, q, k, v);
  Tensor first[3] = {poisoned(qs, dt), poisoned(ks, dt), poisoned(ks, dt)};
  const int64_t calls = cuda::cudnn_attention_calls(gpu());
  attention_backward(gpu(), first[0], first[1], first[2], dout, q, k, v, out, lse);
  ASSERT_EQ(cuda::cudnn_attention_calls(gpu()), calls + 1) << "cuDNN took no backward: " << status;
  for (int run = 0; run < 3; ++run) {
    Tensor again[3] = {poisoned(qs, dt), poisoned(ks, dt), poisoned(ks, dt)};
    attention_backward(gpu(), again[0], again[1], again[2], dout, q, k, v, out, lse);
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(same_bytes(again[i], first[i].to_host())) << "gradient "
                                                            << "qkv"[i] << ", run " << run;
  }
}

// 16-bit q, k, v with f32 outputs and gradients (the f32 staging path), and a view whose start
// is not 16-byte aligned (cuDNN declines it; braid's kernel takes it): both match the CPU.
TEST_P(GpuAttention, MixedDtypesAndAnUnalignedViewMatchCpu) {
  const DType dt = GetParam();
  if (dt == DType::F32) GTEST_SKIP() << "mixed dtypes need a 16-bit one";
  const int64_t B = 1, T = 40, H = 2, D = 64;
  const Shape qs{B, T, H, D}, ls{B, H, T};
  const Tensor q = random_host(qs, dt, 71, -2.0f, 2.0f), k = random_host(qs, dt, 72, -2.0f, 2.0f),
               v = random_host(qs, dt, 73), dout = random_host(qs, DType::F32, 74);
  Tensor out_c = Tensor::empty(qs), lse_c = Tensor::empty(ls);
  attention_forward(cpu(), out_c, lse_c, q, k, v);
  Tensor out = poisoned(qs, DType::F32), lse = poisoned(ls, DType::F32);
  const Tensor gq = up(q), gk = up(k), gv = up(v);
  attention_forward(gpu(), out, lse, gq, gk, gv);
  EXPECT_TRUE(close(out, out_c, 4 * atol_for(dt), 4 * rtol_for(dt))) << "out, f32 from 16-bit";
  Tensor dq_c = Tensor::empty(qs), dk_c = Tensor::empty(qs), dv_c = Tensor::empty(qs);
  attention_backward(cpu(), dq_c, dk_c, dv_c, dout, q, k, v, out_c, lse_c);
  Tensor dq = poisoned(qs, DType::F32), dk = poisoned(qs, DType::F32),
         dv = poisoned(qs, DType::F32);
  attention_backward(gpu(), dq, dk, dv, up(dout), gq, gk, gv, up(out_c), up(lse_c));
  EXPECT_TRUE(close(dq, dq_c, 4 * atol_for(dt), 4 * rtol_for(dt))) << "dq";
  EXPECT_TRUE(close(dk, dk_c, 4 * atol_for(dt), 4 * rtol_for(dt))) << "dk";
  EXPECT_TRUE(close(dv, dv_c, 4 * atol_for(dt), 4 * rtol_for(dt))) << "dv";

  // q as a view one element into a larger buffer: 2 bytes off 16-byte alignment.
  const int64_t n = q.numel();
  Tensor flat = poisoned({n + 1}, dt);
  Tensor qv = flat.slice0(1, n + 1).view(qs);
  qv.copy_from(gq);
  Tensor o2 = poisoned(qs, dt), l2 = poisoned(ls, DType::F32), o2_c = Tensor::empty(qs, dt);
  attention_forward(cpu(), o2_c, lse_c, q, k, v);
  const int64_t calls = cuda::cudnn_attention_calls(gpu());
  attention_forward(gpu(), o2, l2, qv, gk, gv);
  EXPECT_EQ(cuda::cudnn_attention_calls(gpu()), calls) << "cuDNN took a misaligned q";
  EXPECT_TRUE(close(o2, o2_c, atol_for(dt), rtol_for(dt))) << "unaligned q";
}

// No query rows: nothing flows back, dk and dv are zero.
TEST_P(GpuAttention, NoQueriesGivesZeroKeyGradients) {
  const DType dt = GetParam();
  const Shape qs{1, 0, 2, 8}, ks{1, 5, 2, 8};
  Tensor q = up(random_host(qs, dt, 7)), k = up(random_host(ks, dt, 8)),
         v = up(random_host(ks, dt, 9));
  Tensor dq = poisoned(qs, dt), dk = poisoned(ks, dt), dv = poisoned(ks, dt);
  Tensor lse = poisoned({1, 2, 0}, DType::F32), out = poisoned(qs, dt), dout = poisoned(qs, dt);
  attention_backward(gpu(), dq, dk, dv, dout, q, k, v, out, lse);
  const Tensor zeros = Tensor::zeros(ks);
  EXPECT_TRUE(close(dk, zeros, 0, 0));
  EXPECT_TRUE(close(dv, zeros, 0, 0));
}

// GPT-2's packed qkv on the GPU (split there, then the kernels above) against the CPU's packed
// kernels.
TEST_P(GpuAttention, PackedQkvMatchesCpu) {
  const DType dt = GetParam();
  for (const bool cudnn : {false, true}) {
    // braid's kernel: the CPU's tolerances; cuDNN (16-bit, where present) takes this GPT-2-like
    // shape (head size 64) after the split, with the wider tolerance.
    cuda::set_cudnn_attention(gpu(), cudnn);
    const double w = cudnn ? 4.0 : 1.0, lse_tol = cudnn ? 1e-3 : 2e-5;
    const int64_t B = 2, T = 33, H = 3, D = cudnn ? 64 : 16, C = H * D;
    const Shape hs{B, T, H, D}, ls{B, H, T}, ps{B, T, 3 * C};
    const Tensor qkv = random_host(ps, dt, 21, -2.0f, 2.0f), dout = random_host(hs, dt, 22);
    Tensor out_c = Tensor::empty(hs, dt), lse_c = Tensor::empty(ls);
    attention_forward_packed(cpu(), out_c, lse_c, qkv, H);
    Tensor out = poisoned(hs, dt), lse = poisoned(ls, DType::F32);
    const Tensor gqkv = up(qkv);
    attention_forward_packed(gpu(), out, lse, gqkv, H);
    EXPECT_TRUE(close(out, out_c, w * atol(dt), w * rtol(dt))) << "cuDNN allowed: " << cudnn;
    EXPECT_TRUE(close(lse, lse_c, lse_tol, lse_tol)) << "cuDNN allowed: " << cudnn;
    Tensor dqkv_c = Tensor::empty(ps, dt);
    attention_backward_packed(cpu(), dqkv_c, dout, qkv, out_c, lse_c, H);
    Tensor dqkv = poisoned(ps, dt);
    attention_backward_packed(gpu(), dqkv, up(dout), gqkv, up(out_c), up(lse_c), H);
    EXPECT_TRUE(close(dqkv, dqkv_c, w * atol(dt), w * rtol(dt))) << "cuDNN allowed: " << cudnn;
  }
  cuda::set_cudnn_attention(gpu(), true);  // the default again
}

// Packed samples (data.packing): each sample attends within itself. The GPU runs braid's kernel
// once per sample (with cuDNN allowed: it must not take them); against the CPU's one-pass
// document masking, for split q, k, v with grouped heads and a sliding window, and for GPT-2's
// packed qkv.
TEST_P(GpuAttention, PackedSamplesMatchCpu) {
  const DType dt = GetParam();
  cuda::set_cudnn_attention(gpu(), true);
  const int64_t B = 2, T = 50, Hq = 4, Hkv = 2, D = 64;
  Tensor starts = Tensor::empty({B, T}, DType::I32);  // row 0: [0, 17) [17, 40) [40, 50); row 1
  for (int64_t t = 0; t < T; ++t) {
    starts.i32()[t] = t < 17 ? 0 : t < 40 ? 17 : 40;
    starts.i32()[T + t] = t < 1 ? 0 : 1;  // [0, 1) [1, 50)
  }
  const Shape qs{B, T, Hq, D}, ks{B, T, Hkv, D}, ls{B, Hq, T};
  for (const int64_t window : {int64_t{0}, int64_t{9}}) {
    const Tensor q = random_host(qs, dt, 91, -2.0f, 2.0f), k = random_host(ks, dt, 92, -2.0f, 2.0f);
    const Tensor v = random_host(ks, dt, 93), dout = random_host(qs, dt, 94);
    Tensor out_c = Tensor::empty(qs, dt), lse_c = Tensor::empty(ls);
    attention_forward(cpu(), out_c, lse_c, q, k, v, window, starts);
    Tensor out = poisoned(qs, dt), lse = poisoned(ls, DType::F32);
    const int64_t calls = cuda::cudnn_attention_calls(gpu());
    attention_forward(gpu(), out, lse, up(q), up(k), up(v), window, starts);
    EXPECT_TRUE(close(out, out_c, atol(dt), rtol(dt))) << "window " << window;
    EXPECT_TRUE(close(lse, lse_c, 2e-5, 2e-5)) << "window " << window;
    Tensor dq_c = Tensor::empty(qs, dt), dk_c = Tensor::empty(ks, dt), dv_c = Tensor::empty(ks, dt);
    attention_backward(cpu(), dq_c, dk_c, dv_c, dout, q, k, v, out_c, lse_c, window, starts);
    Tensor dq = poisoned(qs, dt), dk = poisoned(ks, dt), dv = poisoned(ks, dt);
    attention_backward(gpu(), dq, dk, dv, up(dout), up(q), up(k), up(v), up(out_c), up(lse_c),
                       window, starts);
    EXPECT_TRUE(close(dq, dq_c, atol(dt), rtol(dt))) << "window " << window;
    EXPECT_TRUE(close(dk, dk_c, atol(dt), rtol(dt))) << "window " << window;
    EXPECT_TRUE(close(dv, dv_c, atol(dt), rtol(dt))) << "window " << window;
    EXPECT_EQ(cuda::cudnn_attention_calls(gpu()), calls) << "cuDNN took a packed sample";
  }
  const int64_t H = 3, C = H * D;
  const Shape hs{B, T, H, D}, hl{B, H, T}, ps{B, T, 3 * C};
  const Tensor qkv = random_host(ps, dt, 95, -2.0f, 2.0f), dout = random_host(hs, dt, 96);
  Tensor out_c = Tensor::empty(hs, dt), lse_c = Tensor::empty(hl);
  attention_forward_packed(cpu(), out_c, lse_c, qkv, H, 0, starts);
  Tensor out = poisoned(hs, dt), lse = poisoned(hl, DType::F32);
  attention_forward_packed(gpu(), out, lse, up(qkv), H, 0, starts);
  EXPECT_TRUE(close(out, out_c, atol(dt), rtol(dt))) << "packed qkv";
  EXPECT_TRUE(close(lse, lse_c, 2e-5, 2e-5)) << "packed qkv";
  Tensor dqkv_c = Tensor::empty(ps, dt);
  attention_backward_packed(cpu(), dqkv_c, dout, qkv, out_c, lse_c, H, 0, starts);
  Tensor dqkv = poisoned(ps, dt);
  attention_backward_packed(gpu(), dqkv, up(dout), up(qkv), up(out_c), up(lse_c), H, 0, starts);
  EXPECT_TRUE(close(dqkv, dqkv_c, atol(dt), rtol(dt))) << "packed qkv";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuAttention,
                         ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace braid::gpu_test
