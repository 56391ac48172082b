// CPU linear layer over a quantised frozen weight: row tiles of the weight are dequantised into
// one reused workspace tile (core/kernels/cpu/dequantize_tile.h) and multiplied by the GEMM (bf16
// tiles into gemm_bf16 when the activations are bf16, f32 otherwise), so the weight is never held
// whole in full precision.
#include <algorithm>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/dequantize_tile.h"
#include "core/kernels/cpu/lowp.h"
#include "core/kernels/gemm.h"
#include "core/profile.h"

namespace braid::cpu {

namespace {

// Rows of the weight per tile: up to 32 MiB of dequantised values (a whole 4096 x 4096 weight
// in bf16), at least one row. One large GEMM instead of many thin ones: each GEMM call packs
// the whole activation matrix again, and measured on a 4096 x 4096 weight with 512 tokens
// (tools/bench_qlinear.cpp) tiles of 4 MiB ran the forward about 10% slower than one tile.
int64_t tile_rows(int64_t in, DType dt) {
  constexpr int64_t kTileBytes = int64_t{32} << 20;
  const int64_t per_row = std::max<int64_t>(in, 1) * static_cast<int64_t>(dtype_size(dt));
  return std::max<int64_t>(1, kTileBytes / per_row);
}

// The activations as the GEMM takes them: bf16 as they are, anything else as f32.
Tensor gemm_input(F32Staging& s, const Tensor& t, const char* name) {
  return t.dtype() == DType::BF16 ? t : s.in(t, name);
}

// Rows [r0, r0 + k) of w (IN columns each) dequantised into `tile` (at least k * IN values),
// the threads each taking a contiguous part.
void weight_tile(ExecContext& ctx, Tensor& tile, const QuantizedWeight& w, const Tensor& absmax,
                 int64_t r0, int64_t k, int64_t in) {
  const int64_t n = k * in, begin = r0 * in;
  constexpr int64_t kChunk = 16384;  // a multiple of 64 values: whole blocks of the usual sizes
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const DType dt = tile.dtype();
  char* base = static_cast<char*>(tile.raw());
  const uint8_t* q = w.q.data<uint8_t>();
  const float* a = absmax.f32();
  const CpuIsa isa = ctx.cpu_isa();
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t j0 = c * kChunk, j1 = std::min(n, j0 + kChunk);
    dequantize_tile(isa, base + j0 * static_cast<int64_t>(dtype_size(dt)), dt, q, a, w.code,
                    w.block, begin + j0, j1 - j0);
  }
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
  check_shape(y, {N, OUT}, "linear_forward_quantized y");
  const Tensor xg = gemm_input(s, x, "x");
  const Tensor b32 = s.in(b, "b");
  if (b32.defined()) check_shape(b32, {OUT}, "linear_forward_quantized b");
  const bool bf = xg.dtype() == DType::BF16;
  // bf16 in and out: each tile's GEMM writes its own columns of y, the bias added in f32 before
  // the one rounding (no f32 copy of y). Otherwise y is f32, or staged through f32.
  const bool direct = bf && y.dtype() == DType::BF16 && IN > 0;
  Tensor y32 = direct ? y : s.out(y, "y");
  if (!direct) {
    float* yp = y32.f32();  // y: (N, OUT)
    if (b32.defined()) {
      const float* bp = b32.f32();
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < N; ++r) std::copy(bp, bp + OUT, yp + r * OUT);
    } else if (IN == 0) {
      y32.zero_();
    }
  }
  // Each tile writes its own columns of y: added to the bias, or written.
  const float beta = b32.defined() ? 1.0f : 0.0f;
  const int64_t rows = std::min(tile_rows(IN, xg.dtype()), OUT);
  Tensor t = ctx.empty({rows, IN}, xg.dtype(), MemCategory::Workspace);  // reused by every tile
  for (int64_t r0 = 0; r0 < OUT && IN > 0 && N > 0; r0 += rows) {
    const int64_t k = std::min(rows, OUT - r0);
    weight_tile(ctx, t, w, absmax, r0, k, IN);
    // y[:, r0:r0+k] (+)= x (N, IN) t^T (IN, k)
    if (direct)
      gemm_bf16_to_bf16(ctx, false, true, N, k, IN, xg.data<bf16>(), IN, t.data<bf16>(), IN,
                        b32.defined() ? b32.f32() + r0 : nullptr, false, y.data<bf16>() + r0, OUT);
    else if (bf)
      gemm_bf16(ctx, false, true, N, k, IN, 1.0f, xg.data<bf16>(), IN, t.data<bf16>(), IN, beta,
                y32.f32() + r0, OUT);
    else
      gemm_f32(ctx, false, true, N, k, IN, 1.0f, xg.f32(), IN, t.f32(), IN, beta, y32.f32() + r0,
               OUT);
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
  check_shape(dx, {N, IN}, "linear_backward_input_quantized dx");
  const Tensor dyg = gemm_input(s, dy, "dy");
  const bool bf = dyg.dtype() == DType::BF16;
  const int64_t rows = std::min(tile_rows(IN, dyg.dtype()), OUT);
  // bf16 in and out with the whole weight in one tile: its GEMM writes (or adds onto) dx, one
  // rounding. Several tiles add onto dx one after another, which needs an f32 sum.
  const bool direct = bf && dx.dtype() == DType::BF16 && rows == OUT && OUT > 0;
  Tensor dx32 = direct ? dx : s.out(dx, "dx", accumulate);
  if (!accumulate && (OUT == 0 || N == 0)) dx32.zero_();
  Tensor t = ctx.empty({rows, IN}, dyg.dtype(), MemCategory::Workspace);  // reused by every tile
  for (int64_t r0 = 0; r0 < OUT && IN > 0 && N > 0; r0 += rows) {
    const int64_t k = std::min(rows, OUT - r0);
    weight_tile(ctx, t, w, absmax, r0, k, IN);
    // dx (N, IN) += dy[:, r0:r0+k] (N, k) t (k, IN); the first tile writes unless accumulating
    const float beta = accumulate || r0 > 0 ? 1.0f : 0.0f;
    if (direct)
      gemm_bf16_to_bf16(ctx, false, false, N, IN, k, dyg.data<bf16>() + r0, OUT, t.data<bf16>(), IN,
                        nullptr, accumulate, dx.data<bf16>(), IN);
    else if (bf)
      gemm_bf16(ctx, false, false, N, IN, k, 1.0f, dyg.data<bf16>() + r0, OUT, t.data<bf16>(), IN,
                beta, dx32.f32(), IN);
    else
      gemm_f32(ctx, false, false, N, IN, k, 1.0f, dyg.f32() + r0, OUT, t.f32(), IN, beta,
               dx32.f32(), IN);
  }
  s.finish();
}

}  // namespace braid::cpu
