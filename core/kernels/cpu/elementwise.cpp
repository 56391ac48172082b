// CPU elementwise glue ops: residual add, in-place add and scale, sum of squares, column
// splits and row copies.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/profile.h"

namespace braid {

namespace cpu {

void add(ExecContext& ctx, Tensor& y, const Tensor& a, const Tensor& b) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  cpu::check_f32(y, "add", "y");
  cpu::check_f32(a, "add", "a");
  cpu::check_f32(b, "add", "b");
  check_shape(b, a.shape(), "add b");
  check_shape(y, a.shape(), "add y");
  const int64_t n = a.numel();
  const float* ap = a.f32();
  const float* bp = b.f32();
  float* yp = y.f32();  // may be a or b
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) yp[i] = ap[i] + bp[i];
}

void add_inplace(ExecContext& ctx, Tensor& y, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  cpu::check_f32(y, "add_inplace", "y");
  cpu::check_f32(x, "add_inplace", "x");
  check_shape(x, y.shape(), "add_inplace x");
  const int64_t n = y.numel();
  const float* xp = x.f32();
  float* yp = y.f32();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) yp[i] += xp[i];
}

// Untimed here: its callers (clipping) charge it to the optimizer group.
void scale_inplace(ExecContext& /*ctx*/, Tensor& x, float s) {
  cpu::check_f32(x, "scale_inplace", "x");
  const int64_t n = x.numel();
  float* xp = x.f32();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) xp[i] *= s;
}

// Fixed-size blocks summed in double, then added in block order: the result is the same for
// any thread count (stronger than the header promises, and free).
double sum_squares(ExecContext& /*ctx*/, const Tensor& x) {
  cpu::check_f32(x, "sum_squares", "x");
  constexpr int64_t kBlock = 16384;
  const int64_t n = x.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks));
  const float* xp = x.f32();
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t i0 = k * kBlock, i1 = std::min(n, i0 + kBlock);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; ++i) s += static_cast<double>(xp[i]) * xp[i];
    partial[static_cast<size_t>(k)] = s;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

void split_columns(ExecContext& ctx, const std::vector<Tensor*>& parts, const Tensor& src) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "split_columns";
  cpu::check_f32(src, op, "src");
  BRAID_CHECK(src.ndim() == 2, "{}: src must be (N, W), got {}", op, src.str());
  const int64_t N = src.dim(0), W = src.dim(1);
  int64_t total = 0;
  for (const Tensor* p : parts) {
    cpu::check_f32(*p, op, "part");
    BRAID_CHECK(p->ndim() == 2 && p->dim(0) == N, "{}: part {} does not have {} rows", op, p->str(),
                N);
    total += p->dim(1);
  }
  BRAID_CHECK(total == W, "{}: parts have {} columns, src has {}", op, total, W);
  const float* sp = src.f32();  // src: (N, W)
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* row = sp + n * W;
    for (Tensor* p : parts) {
      const int64_t w = p->dim(1);
      std::memcpy(p->f32() + n * w, row, sizeof(float) * w);
      row += w;
    }
  }
}

void concat_columns(ExecContext& ctx, Tensor& dst, const std::vector<const Tensor*>& parts) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "concat_columns";
  cpu::check_f32(dst, op, "dst");
  BRAID_CHECK(dst.ndim() == 2, "{}: dst must be (N, W), got {}", op, dst.str());
  const int64_t N = dst.dim(0), W = dst.dim(1);
  int64_t total = 0;
  for (const Tensor* p : parts) {
    cpu::check_f32(*p, op, "part");
    BRAID_CHECK(p->ndim() == 2 && p->dim(0) == N, "{}: part {} does not have {} rows", op, p->str(),
                N);
    total += p->dim(1);
  }
  BRAID_CHECK(total == W, "{}: parts have {} columns, dst has {}", op, total, W);
  float* dp = dst.f32();  // dst: (N, W)
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = dp + n * W;
    for (const Tensor* p : parts) {
      const int64_t w = p->dim(1);
      std::memcpy(row, p->f32() + n * w, sizeof(float) * w);
      row += w;
    }
  }
}

void copy_rows(ExecContext& ctx, Tensor& dst, int64_t row, const Tensor& src) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "copy_rows";
  cpu::check_cpu(dst, op, "dst");
  cpu::check_cpu(src, op, "src");
  BRAID_CHECK(dst.dtype() == src.dtype(), "{}: dst {} and src {} differ in dtype", op, dst.str(),
              src.str());
  BRAID_CHECK(dst.ndim() >= 1 && src.ndim() >= 1, "{}: dst {} / src {} need rows", op, dst.str(),
              src.str());
  const int64_t rows = src.dim(0);
  const int64_t row_elems = dst.dim(0) == 0 ? 0 : dst.numel() / dst.dim(0);
  BRAID_CHECK(
      (rows == 0 || src.numel() / rows == row_elems) && row >= 0 && row + rows <= dst.dim(0),
      "{}: src {} does not fit rows [{}, {}) of dst {}", op, src.str(), row, row + rows, dst.str());
  if (src.nbytes())
    std::memcpy(static_cast<char*>(dst.raw()) + row * row_elems * dtype_size(dst.dtype()),
                src.raw(), src.nbytes());
}

}  // namespace cpu
}  // namespace braid
