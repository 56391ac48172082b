// CPU softmax cross-entropy fused with the LM head, in row chunks so the (N, V) logits are
// never stored whole; bf16 weights and activations run it on the native bf16 GEMM where there
// is one.
#include <algorithm>
#include <string>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/gemm_backends.h"
#include "core/kernels/cpu/lowp.h"
#include "core/kernels/cpu/vec_math.h"
#include "core/kernels/gemm.h"
#include "core/profile.h"

namespace braid {

namespace {

void check_input(const Tensor& t, DType dtype, const char* name) {
  BRAID_CHECK(t.defined(), "lm_head_cross_entropy: {} is undefined", name);
  BRAID_CHECK(t.device().is_cpu(),
              "lm_head_cross_entropy: {} is on {}, and lm_head_cross_entropy has no CUDA kernel "
              "yet",
              name, t.device().str());
  check_dtype(t, dtype, name);
}

bool native_bf16_head(ExecContext& ctx, const Tensor& x, const Tensor& w) {
  return x.dtype() == w.dtype() && cpu::lm_head_rounds_grad(ctx, w.dtype());
}

// The chunked loop for x and w of dtype `dt` (f32, or bf16 on the native GEMM); dx and dw are
// f32 (or undefined). Shapes and targets are checked by the caller.
void lm_head_chunks(ExecContext& ctx, DType dt, float* lossp, float* dxp, float* dwp, const void* x,
                    const void* w, const int32_t* tp, int64_t N, int64_t C, int64_t V,
                    float grad_scale) {
  const bool in16 = dt == DType::BF16, backward = dxp != nullptr;
  const auto* x16 = static_cast<const bf16*>(x);
  const auto* w16 = static_cast<const bf16*>(w);
  const auto* x32 = static_cast<const float*>(x);
  const auto* w32 = static_cast<const float*>(w);
  const int64_t chunk = cpu::lm_head_chunk_rows(ctx, N, V);
  // logits: (chunk, V), turned in place into dlogits for the backward GEMMs; with bf16
  // operands also dlogits16: (chunk, V), their bf16 rounding.
  Tensor scratch = ctx.empty({chunk, V}, DType::F32, MemCategory::Workspace);
  Tensor scratch16;
  if (in16 && backward) scratch16 = ctx.empty({chunk, V}, DType::BF16, MemCategory::Workspace);
  float* logits = scratch.f32();
  const cpu::ConvertIsa convert = cpu::convert_path(ctx.cpu_isa());
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t rows = std::min(chunk, N - r0);
    if (in16)
      gemm_bf16(ctx, false, true, rows, V, C, 1.0f, x16 + r0 * C, C, w16, C, 0.0f, logits, V);
    else
      gemm_f32(ctx, false, true, rows, V, C, 1.0f, x32 + r0 * C, C, w32, C, 0.0f, logits, V);
    // With bf16 operands each row's dlogits are rounded right after its softmax, while the row
    // is in the core's caches, rather than in a second pass over the whole chunk.
    bf16* d16 = in16 && backward ? static_cast<bf16*>(scratch16.raw()) : nullptr;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      float* row = logits + r * V;
      const int32_t target = tp[r0 + r];
      if (target < 0) {
        lossp[r0 + r] = 0.0f;
        if (backward) std::fill(row, row + V, 0.0f);
      } else {
        const float target_logit = row[target];
        lossp[r0 + r] = cpu::softmax_row(ctx.cpu_isa(), row, V, grad_scale) - target_logit;
        row[target] -= grad_scale;
      }
      if (d16) cpu::narrow_from_f32(convert, DType::BF16, row, d16 + r * V, V);
    }
    if (!backward) continue;
    float* dx_chunk = dxp + r0 * C;
    if (in16) {
      gemm_bf16(ctx, false, false, rows, C, V, 1.0f, d16, V, w16, C, 0.0f, dx_chunk, C);
      if (dwp) gemm_bf16(ctx, true, false, V, C, rows, 1.0f, d16, V, x16 + r0 * C, C, 1.0f, dwp, C);
    } else {
      gemm_f32(ctx, false, false, rows, C, V, 1.0f, logits, V, w32, C, 0.0f, dx_chunk, C);
      if (dwp)
        gemm_f32(ctx, true, false, V, C, rows, 1.0f, logits, V, x32 + r0 * C, C, 1.0f, dwp, C);
    }
  }
}

}  // namespace

namespace cpu {

// Rows per chunk: the dw update is a GEMM whose inner dimension is the chunk, and it rewrites
// all of dw each time, so chunks must be long; the (rows, V) logits scratch bounds them. 128 MiB
// keeps 512 rows up to a vocabulary of 65536 (with 16 MiB it was 83 rows at GPT-2's 50304: dw,
// 150 MiB at width 768, was rewritten 25 times for 2048 positions; with 64 MiB 333 rows, and
// the bf16 head ran 5-20 % slower than with 512, its dw GEMM at 1050 instead of 1370 GFLOP/s).
int64_t lm_head_chunk_rows(ExecContext& /*ctx*/, int64_t n, int64_t vocab) {
  const int64_t scratch_floats = int64_t{1} << 25;  // 128 MiB
  return std::min(
      n, std::clamp(scratch_floats / std::max<int64_t>(vocab, 1), int64_t{64}, int64_t{512}));
}

// Where gemm_bf16 runs a native bf16 kernel, the bf16 LM head multiplies its bf16 x and w
// directly (f32 accumulation and logits) and rounds each chunk's dlogits to bf16 for the two
// backward GEMMs, as a bf16 linear layer rounds its dy; elsewhere widening both operands for
// every GEMM would cost more than the staged f32 path below.
bool lm_head_rounds_grad(ExecContext& ctx, DType w) {
  return w == DType::BF16 && ctx.gemm().bf16_mode == Bf16Mode::Native &&
         native_bf16_available(ctx.gemm().backend);
}

void check_loss_targets(ExecContext& /*ctx*/, const Tensor& targets, int64_t vocab,
                        const char* op) {
  BRAID_CHECK(targets.defined() && targets.dtype() == DType::I32, "{}: targets must be i32, got {}",
              op, targets.defined() ? targets.str() : std::string("undefined"));
  const int32_t* t = targets.i32();
  for (int64_t i = 0; i < targets.numel(); ++i)
    BRAID_CHECK(t[i] >= -1 && t[i] < vocab,
                "{}: targets[{}] = {} is outside [-1, {}) for vocabulary size V = {}", op, i, t[i],
                vocab, vocab);
}

void lm_head_cross_entropy(ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw,
                           const Tensor& x, const Tensor& w, const Tensor& targets,
                           float grad_scale) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead, Nested::Absorb);
  const bool native16 = native_bf16_head(ctx, x, w);
  if (!native16 && any_low_precision({&dx, &dw, &x, &w})) {
    // bf16/f16 storage without a native bf16 GEMM: f32 arithmetic on staged copies
    F32Staging s(ctx, "lm_head_cross_entropy");
    Tensor dx32 = s.out(dx, "dx"), dw32 = s.out(dw, "dw", true);
    cpu::lm_head_cross_entropy(ctx, losses, dx32, dw32, s.in(x, "x"), s.in(w, "w"), targets,
                               grad_scale);
    return s.finish();
  }
  const DType dt = native16 ? DType::BF16 : DType::F32;
  check_input(x, dt, "x");
  check_input(w, dt, "w");
  check_input(targets, DType::I32, "targets");
  check_input(losses, DType::F32, "losses");
  BRAID_CHECK(x.ndim() == 2 && w.ndim() == 2, "lm_head_cross_entropy: x {} and w {} must be 2-d",
              shape_str(x.shape()), shape_str(w.shape()));
  const int64_t N = x.dim(0), C = x.dim(1), V = w.dim(0);
  check_shape(w, {V, C}, "w");
  check_shape(targets, {N}, "targets");
  check_shape(losses, {N}, "losses");
  const bool backward = dx.defined();
  if (backward) {
    check_input(dx, native16 ? dx.dtype() : DType::F32, "dx");
    check_shape(dx, {N, C}, "dx");
    if (dw.defined()) {  // undefined: a frozen head, whose weight-gradient GEMM is skipped
      check_input(dw, native16 ? dw.dtype() : DType::F32, "dw");
      check_shape(dw, {V, C}, "dw");
    }
  }

  // Validate every target before writing anything, so a bad batch leaves dw untouched.
  cpu::check_loss_targets(ctx, targets, V, "lm_head_cross_entropy");
  const int32_t* tp = targets.i32();  // targets: (N)
  if (N == 0) return;
  BRAID_CHECK(V > 0, "lm_head_cross_entropy: empty vocabulary (w is {})", shape_str(w.shape()));
  // x: (N, C), w: (V, C), losses: (N); dx (N, C) and dw (V, C) staged in f32 when 16-bit.
  F32Staging s(ctx, "lm_head_cross_entropy");
  Tensor dx32 = s.out(dx, "dx"), dw32 = s.out(dw, "dw", true);
  lm_head_chunks(ctx, dt, losses.f32(), backward ? dx32.f32() : nullptr,
                 dw32.defined() ? dw32.f32() : nullptr, x.raw(), w.raw(), tp, N, C, V, grad_scale);
  s.finish();
}

LossSum loss_sum(ExecContext& ctx, const Tensor& losses, const Tensor& targets) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  check_input(losses, DType::F32, "losses");
  check_input(targets, DType::I32, "targets");
  check_shape(targets, {losses.numel()}, "loss_sum targets");
  // Sequential on purpose: one fixed summation order, whatever the thread count.
  LossSum r;
  const float* l = losses.f32();
  const int32_t* t = targets.i32();
  for (int64_t i = 0; i < losses.numel(); ++i) {
    if (t[i] < 0) continue;
    r.sum += l[i];
    ++r.count;
  }
  return r;
}

}  // namespace cpu
}  // namespace braid
