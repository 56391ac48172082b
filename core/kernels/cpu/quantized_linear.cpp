// CPU linear layer over a quantised frozen weight: row tiles of the weight are dequantised into
// workspace and multiplied by the GEMM (bf16 tiles into gemm_bf16 when the activations are bf16,
// f32 otherwise), so the weight is never held whole in full precision.
#include <algorithm>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/lowp.h"
#include "core/kernels/gemm.h"
#include "core/profile.h"

namespace braid::cpu {

namespace {

// Rows of the weight per tile: about 256 KiB of f32, at least one row.
int64_t tile_rows(int64_t in) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(in, 1));
}

// The activations as the GEMM takes them: bf16 as they are, anything else as f32.
Tensor gemm_input(F32Staging& s, const Tensor& t, const char* name) {
  return t.dtype() == DType::BF16 ? t : s.in(t, name);
}

// Rows [r0, r0 + k) of w (IN columns each), dequantised in `dt`.
Tensor weight_tile(ExecContext& ctx, const QuantizedWeight& w, const Tensor& absmax, int64_t r0,
                   int64_t k, int64_t in, DType dt) {
  Tensor t = ctx.empty({k, in}, dt, MemCategory::Workspace);
  cpu::dequantize_blockwise(ctx, t, w.q, absmax, w.code, w.block, r0 * in);
  return t;
}

void check_weight(const QuantizedWeight& w, const char* op) {
  BRAID_CHECK(w.defined() && w.shape.size() == 2, "{}: the weight must be a quantised (OUT, IN)",
              op);
}

}  // namespace

void linear_forward_quantized(ExecContext& ctx, Tensor& y, const Tensor& x,
                              const QuantizedWeight& w, const Tensor& b) {
  const char* op = "linear_forward_quantized";
  check_weight(w, op);
  const int64_t OUT = w.shape[0], IN = w.shape[1];
  BRAID_CHECK(x.ndim() == 2 && x.dim(1) == IN, "{}: x is {}, expected (N, {})", op, x.str(), IN);
  const int64_t N = x.dim(0);
  const Tensor absmax = weight_absmax(ctx, w);
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  F32Staging s(ctx, op);
  Tensor y32 = s.out(y, "y");
  check_shape(y32, {N, OUT}, "linear_forward_quantized y");
  const Tensor xg = gemm_input(s, x, "x");
  const Tensor b32 = s.in(b, "b");
  float* yp = y32.f32();  // y: (N, OUT)
  if (b32.defined()) {
    check_shape(b32, {OUT}, "linear_forward_quantized b");
    const float* bp = b32.f32();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N; ++r) std::copy(bp, bp + OUT, yp + r * OUT);
  } else {
    y32.zero_();
  }
  const bool bf = xg.dtype() == DType::BF16;
  const int64_t rows = tile_rows(IN);
  for (int64_t r0 = 0; r0 < OUT && IN > 0 && N > 0; r0 += rows) {
    const int64_t k = std::min(rows, OUT - r0);
    const Tensor t = weight_tile(ctx, w, absmax, r0, k, IN, xg.dtype());
    // y[:, r0:r0+k] += x (N, IN) t^T (IN, k)
    if (bf)
      gemm_bf16(ctx, false, true, N, k, IN, 1.0f, xg.data<bf16>(), IN, t.data<bf16>(), IN, 1.0f,
                yp + r0, OUT);
    else
      gemm_f32(ctx, false, true, N, k, IN, 1.0f, xg.f32(), IN, t.f32(), IN, 1.0f, yp + r0, OUT);
  }
  s.finish();
}

void linear_backward_input_quantized(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                     const QuantizedWeight& w, bool accumulate) {
  const char* op = "linear_backward_input_quantized";
  check_weight(w, op);
  const int64_t OUT = w.shape[0], IN = w.shape[1];
  BRAID_CHECK(dy.ndim() == 2 && dy.dim(1) == OUT, "{}: dy is {}, expected (N, {})", op, dy.str(),
              OUT);
  const int64_t N = dy.dim(0);
  const Tensor absmax = weight_absmax(ctx, w);
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  F32Staging s(ctx, op);
  Tensor dx32 = s.out(dx, "dx", accumulate);
  check_shape(dx32, {N, IN}, "linear_backward_input_quantized dx");
  if (!accumulate) dx32.zero_();
  const Tensor dyg = gemm_input(s, dy, "dy");
  const bool bf = dyg.dtype() == DType::BF16;
  const int64_t rows = tile_rows(IN);
  for (int64_t r0 = 0; r0 < OUT && IN > 0 && N > 0; r0 += rows) {
    const int64_t k = std::min(rows, OUT - r0);
    const Tensor t = weight_tile(ctx, w, absmax, r0, k, IN, dyg.dtype());
    // dx (N, IN) += dy[:, r0:r0+k] (N, k) t (k, IN)
    if (bf)
      gemm_bf16(ctx, false, false, N, IN, k, 1.0f, dyg.data<bf16>() + r0, OUT, t.data<bf16>(), IN,
                1.0f, dx32.f32(), IN);
    else
      gemm_f32(ctx, false, false, N, IN, k, 1.0f, dyg.f32() + r0, OUT, t.f32(), IN, 1.0f,
               dx32.f32(), IN);
  }
  s.finish();
}

}  // namespace braid::cpu
