// CPU optimizer update kernels (the per-element arithmetic is core/kernels/math/adamw.h and,
// for 8-bit AdamW, core/kernels/math/adamw8bit.h).
//
// No contraction into fused multiply-adds in this file: the AVX2 and AVX-512 clones below would
// otherwise fuse what adamw.h rounds step by step, and the bits would depend on the CPU.
#pragma GCC optimize("fp-contract=off")
#include <algorithm>
#include <cmath>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/math/adamw.h"
#include "core/kernels/math/adamw8bit.h"
#include "core/kernels/math/dynamic_map.h"
#include "core/profile.h"

namespace braid::cpu {

namespace {

// AdamW over n elements, compiled for AVX-512 and AVX2 as well as the x86-64 baseline (the
// loader picks the clone for the CPU), so the square roots and divisions run 16 or 8 wide.
BRAID_CPU_CLONES void adamw_span(float* w, float* m, float* v, const float* g, int64_t n,
                                 const AdamWStep& s) {
  const float b1 = s.beta1, b2 = s.beta2, eps = s.eps, step_size = s.step_size;
  const float inv_sqrt_bc2 = s.inv_sqrt_bc2, decay = s.decay, gs = s.grad_scale;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    math::adamw_element(w[i], m[i], v[i], g[i], b1, b2, eps, step_size, inv_sqrt_bc2, decay, gs);
}

}  // namespace

void adamw_update(ExecContext& ctx, Tensor& w, Tensor& m, Tensor& v, const Tensor& g,
                  const AdamWStep& s, Tensor* rounded) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Optimizer);
  const char* op = "adamw_update";
  for (auto [t, name] :
       {std::pair<const Tensor*, const char*>{&w, "w"}, {&m, "m"}, {&v, "v"}, {&g, "g"}})
    check_f32(*t, op, name);
  check_shape(m, w.shape(), "adamw_update m");
  check_shape(v, w.shape(), "adamw_update v");
  check_shape(g, w.shape(), "adamw_update g");
  const int64_t n = w.numel();
  if (rounded) {
    check_cpu(*rounded, op, "rounded");
    BRAID_CHECK((rounded->dtype() == DType::BF16 || rounded->dtype() == DType::F16) &&
                    rounded->numel() == n,
                "{}: rounded is {}; expected bf16 or f16 with {} elements", op, rounded->str(), n);
  }
  float* wp = w.f32();
  float* mp = m.f32();
  float* vp = v.f32();
  const float* gp = g.f32();
  // Blocks small enough that the rounding reads the new weights from L1.
  constexpr int64_t kBlock = 2048;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const ConvertIsa isa = convert_path(ctx.cpu_isa());
  char* rp = rounded ? static_cast<char*>(rounded->raw()) : nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
    adamw_span(wp + lo, mp + lo, vp + lo, gp + lo, hi - lo, s);
    if (rp) narrow_from_f32(isa, rounded->dtype(), wp + lo, rp + lo * 2, hi - lo);
  }
}

// Blocks are independent, so they run in parallel and the result does not depend on the thread
// count; within a block the absmax is a max, which is order-free.
void adamw8bit_update(ExecContext& ctx, Tensor& w, Tensor& m_codes, Tensor& m_absmax,
                      Tensor& v_codes, Tensor& v_absmax, const Tensor& g, const AdamWStep& s) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Optimizer);
  const char* op = "adamw8bit_update";
  check_f32(w, op, "w");
  check_f32(g, op, "g");
  check_f32(m_absmax, op, "m_absmax");
  check_f32(v_absmax, op, "v_absmax");
  const int64_t n = w.numel(), blocks = adamw8bit_blocks(n);
  for (auto [t, name] :
       {std::pair<const Tensor*, const char*>{&m_codes, "m_codes"}, {&v_codes, "v_codes"}}) {
    check_cpu(*t, op, name);
    BRAID_CHECK(t->dtype() == DType::U8 && t->numel() == n,
                "{}: {} is {}; expected u8 with {} elements", op, name, t->str(), n);
  }
  check_shape(g, w.shape(), "adamw8bit_update g");
  check_shape(m_absmax, {blocks}, "adamw8bit_update m_absmax");
  check_shape(v_absmax, {blocks}, "adamw8bit_update v_absmax");
  float* wp = w.f32();
  const float* gp = g.f32();
  uint8_t* mq = m_codes.data<uint8_t>();
  uint8_t* vq = v_codes.data<uint8_t>();
  float* ma = m_absmax.f32();
  float* va = v_absmax.f32();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    float m[math::kAdam8bitBlock], v[math::kAdam8bitBlock];
    const int64_t lo = b * math::kAdam8bitBlock, len = std::min(math::kAdam8bitBlock, n - lo);
    float m_max = 0.0f, v_max = 0.0f;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = lo + j;
      m[j] = math::dynamic_value(math::kDynamicSigned, mq[i], ma[b]);
      v[j] = math::dynamic_value(math::kDynamicUnsigned, vq[i], va[b]);
      math::adamw_element(wp[i], m[j], v[j], gp[i], s.beta1, s.beta2, s.eps, s.step_size,
                          s.inv_sqrt_bc2, s.decay, s.grad_scale);
      m_max = std::max(m_max, std::fabs(m[j]));
      v_max = std::max(v_max, v[j]);
    }
    for (int64_t j = 0; j < len; ++j) {
      mq[lo + j] = math::dynamic_encode(math::kDynamicSigned, m[j], m_max);
      vq[lo + j] = math::dynamic_encode(math::kDynamicUnsigned, v[j], v_max);
    }
    ma[b] = m_max;
    va[b] = v_max;
  }
}

}  // namespace braid::cpu
