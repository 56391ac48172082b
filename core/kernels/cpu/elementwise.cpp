// CPU elementwise glue ops: residual add, in-place add and scale, sum of squares, dtype casts,
// column splits and row copies.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/fast_math.h"
#include "core/kernels/cpu/lowp.h"
#include "core/profile.h"

namespace braid {

namespace cpu {

namespace {
// Copies accept every float storage dtype (f32, bf16, f16).
void check_copyable(const Tensor& t, const char* op, const char* name) {
  check_cpu(t, op, name);
  BRAID_CHECK(t.defined(), "{}: {} is undefined", op, name);
  BRAID_CHECK(t.dtype() != DType::I32, "{}: {} has dtype i32; expected f32, bf16 or f16", op, name);
}
}  // namespace

void add(ExecContext& ctx, Tensor& y, const Tensor& a, const Tensor& b) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  cpu::check_float_args("add", {{&a, "a"}, {&b, "b"}, {&y, "y"}});
  check_shape(b, a.shape(), "add b");
  check_shape(y, a.shape(), "add y");
  // y may be a or b; 16-bit spans are widened, added in f32 and narrowed.
  const TileIo io(ctx);
  parallel_spans(ctx, a.numel(), kSpan, 3, any_low_precision({&y, &a, &b}),
                 [&](int64_t s, int64_t len, float* buf) {
                   const float* as = io.in(a, s, len, buf);
                   const float* bs = io.in(b, s, len, buf + kSpan);
                   float* ys = io.out(y, s, buf + 2 * kSpan);
#pragma omp simd
                   for (int64_t i = 0; i < len; ++i) ys[i] = as[i] + bs[i];
                   io.store(y, s, len, ys);
                 });
}

void add_inplace(ExecContext& ctx, Tensor& y, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  cpu::check_float_args("add_inplace", {{&x, "x"}, {&y, "y"}});
  check_shape(x, y.shape(), "add_inplace x");
  const TileIo io(ctx);
  parallel_spans(ctx, y.numel(), kSpan, 2, any_low_precision({&y, &x}),
                 [&](int64_t s, int64_t len, float* buf) {
                   const float* xs = io.in(x, s, len, buf);
                   float* ys = io.inout(y, s, len, buf + kSpan);
#pragma omp simd
                   for (int64_t i = 0; i < len; ++i) ys[i] += xs[i];
                   io.store(y, s, len, ys);
                 });
}

void zero(ExecContext&, Tensor& x) { x.zero_(); }

// Untimed here: its callers (clipping) charge it to the optimizer group.
void scale_inplace(ExecContext& ctx, Tensor& x, float s) {
  if (any_low_precision({&x})) {  // bf16/f16 storage: f32 arithmetic on staged copies
    F32Staging st(ctx, "scale_inplace");
    Tensor x32 = st.out(x, "x", true);
    cpu::scale_inplace(ctx, x32, s);
    return st.finish();
  }
  cpu::check_f32(x, "scale_inplace", "x");
  const int64_t n = x.numel();
  float* xp = x.f32();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) xp[i] *= s;
}

namespace {

// The squares of one block summed in double over 16 interleaved accumulators (element i into
// accumulator i % 16), which are then added in order. x * x is exact in double, so a fused
// multiply-add, or vectors of any width, give every accumulator the same bits: the result does
// not depend on the instruction set the clone runs.
BRAID_CPU_CLONES double sum_squares_block(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(x[i + j]) * x[i + j];
  }
  for (int j = 0; i + j < n; ++j) acc[j] += static_cast<double>(x[i + j]) * x[i + j];
  double s = 0.0;
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

}  // namespace

// Fixed-size blocks (sum_squares_block), then added in block order: the result is the same for
// any thread count and instruction set (stronger than the header promises).
double sum_squares(ExecContext& ctx, const Tensor& x) {
  if (any_low_precision({&x})) {  // bf16/f16 storage: f32 arithmetic on staged copies
    F32Staging s(ctx, "sum_squares");
    return cpu::sum_squares(ctx, s.in(x, "x"));
  }
  cpu::check_f32(x, "sum_squares", "x");
  constexpr int64_t kBlock = 16384;
  const int64_t n = x.numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks));
  const float* xp = x.f32();
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t i0 = k * kBlock, i1 = std::min(n, i0 + kBlock);
    partial[static_cast<size_t>(k)] = sum_squares_block(xp + i0, i1 - i0);
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

std::vector<double> sum_squares_each(ExecContext& ctx, const std::vector<Tensor>& xs) {
  std::vector<double> out;
  out.reserve(xs.size());
  for (const Tensor& x : xs) out.push_back(cpu::sum_squares(ctx, x));
  return out;
}

void cast(ExecContext& ctx, Tensor& dst, const Tensor& src) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "cast";
  check_copyable(dst, op, "dst");
  check_copyable(src, op, "src");
  BRAID_CHECK(dst.numel() == src.numel(), "{}: dst {} and src {} differ in size", op, dst.str(),
              src.str());
  const int64_t n = src.numel();
  if (dst.dtype() == src.dtype()) {
    if (n) std::memcpy(dst.raw(), src.raw(), src.nbytes());
  } else if (src.dtype() == DType::F32) {
    narrow_from_f32(ctx, dst.dtype(), src.f32(), dst.raw(), n);
  } else if (dst.dtype() == DType::F32) {
    widen_to_f32(ctx, src.dtype(), src.raw(), dst.f32(), n);
  } else {  // bf16 <-> f16 through f32
    Tensor tmp = ctx.empty(src.shape(), DType::F32, MemCategory::Workspace);
    widen_to_f32(ctx, src.dtype(), src.raw(), tmp.f32(), n);
    narrow_from_f32(ctx, dst.dtype(), tmp.f32(), dst.raw(), n);
  }
}

// The checks split_columns and concat_columns share: whole (N, W) and parts (N, Wi) of one
// copyable dtype whose widths sum to W.
template <typename Part>
void check_column_parts(const char* op, const Tensor& whole, const char* name,
                        const std::vector<Part*>& parts) {
  check_copyable(whole, op, name);
  BRAID_CHECK(whole.ndim() == 2, "{}: {} must be (N, W), got {}", op, name, whole.str());
  const int64_t N = whole.dim(0);
  int64_t total = 0;
  for (const Tensor* p : parts) {
    check_copyable(*p, op, "part");
    BRAID_CHECK(p->dtype() == whole.dtype(), "{}: part {} and {} {} differ in dtype", op, p->str(),
                name, whole.str());
    BRAID_CHECK(p->ndim() == 2 && p->dim(0) == N, "{}: part {} does not have {} rows", op, p->str(),
                N);
    total += p->dim(1);
  }
  BRAID_CHECK(total == whole.dim(1), "{}: parts have {} columns, {} has {}", op, total, name,
              whole.dim(1));
}

void split_columns(ExecContext& ctx, const std::vector<Tensor*>& parts, const Tensor& src) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "split_columns";
  check_column_parts(op, src, "src", parts);
  const int64_t N = src.dim(0), W = src.dim(1);
  // A pure copy: any storage dtype works byte for byte.
  const size_t es = dtype_size(src.dtype());
  const char* sp = static_cast<const char*>(src.raw());  // src: (N, W)
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const char* row = sp + n * W * es;
    for (Tensor* p : parts) {
      const int64_t w = p->dim(1);
      std::memcpy(static_cast<char*>(p->raw()) + n * w * es, row, es * w);
      row += w * es;
    }
  }
}

void concat_columns(ExecContext& ctx, Tensor& dst, const std::vector<const Tensor*>& parts) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "concat_columns";
  check_column_parts(op, dst, "dst", parts);
  const int64_t N = dst.dim(0), W = dst.dim(1);
  const size_t es = dtype_size(dst.dtype());
  char* dp = static_cast<char*>(dst.raw());  // dst: (N, W)
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    char* row = dp + n * W * es;
    for (const Tensor* p : parts) {
      const int64_t w = p->dim(1);
      std::memcpy(row, static_cast<const char*>(p->raw()) + n * w * es, es * w);
      row += w * es;
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
