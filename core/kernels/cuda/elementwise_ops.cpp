// CUDA elementwise glue ops (core/kernels/elementwise.h): residual add, in-place add and scale,
// sum of squares, casts, column splits and row copies on the context's stream.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/elementwise.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

namespace braid::cuda {

void add(ExecContext& ctx, Tensor& y, const Tensor& a, const Tensor& b) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_float(y, "add", "y");
  check_float(a, "add", "a");
  check_float(b, "add", "b");
  check_shape(b, a.shape(), "add b");
  check_shape(y, a.shape(), "add y");
  launch_add(stream_of(ctx), y.raw(), code(y), a.raw(), code(a), b.raw(), code(b), a.numel());
  check_launch("add");
}

void add_inplace(ExecContext& ctx, Tensor& y, const Tensor& x) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_float(y, "add_inplace", "y");
  check_float(x, "add_inplace", "x");
  check_shape(x, y.shape(), "add_inplace x");
  launch_axpby(stream_of(ctx), y.raw(), code(y), 1.0f, x.raw(), code(x), 1.0f, y.numel());
  check_launch("add_inplace");
}

void zero(ExecContext& ctx, Tensor& x) {
  if (x.nbytes())
    CUDA_CHECK(cudaMemsetAsync(x.raw(), 0, x.nbytes(), static_cast<cudaStream_t>(stream_of(ctx))));
}

void scale_inplace(ExecContext& ctx, Tensor& x, float s) {
  check_float(x, "scale_inplace", "x");
  launch_axpby(stream_of(ctx), x.raw(), code(x), s, x.raw(), code(x), 0.0f, x.numel());
  check_launch("scale_inplace");
}

double sum_squares(ExecContext& ctx, const Tensor& x) {
  check_float(x, "sum_squares", "x");
  return cuda::sum_squares_each(ctx, {x})[0];  // one fixed-order sum per chunk, then in order
}

// Every tensor's partials in one scratch (reused in stream order: a tensor's total is summed
// before the next tensor's partials overwrite them), every total into one device array, one copy
// back and one wait; sum_squares is its one-tensor case, so both give the same bits.
std::vector<double> sum_squares_each(ExecContext& ctx, const std::vector<Tensor>& xs) {
  constexpr int64_t kChunk = 1 << 16;
  std::vector<double> out(xs.size(), 0.0);
  if (xs.empty()) return out;
  int64_t most = 1;
  for (const Tensor& x : xs) {
    check_float(x, "sum_squares_each", "xs");
    most = std::max(most, (x.numel() + kChunk - 1) / kChunk);
  }
  const int64_t n_out = static_cast<int64_t>(xs.size());
  Tensor scratch = ctx.empty({2 * (n_out + most)}, DType::F32, MemCategory::Workspace);
  auto* totals = static_cast<double*>(scratch.raw());
  double* partial = totals + n_out;
  CUDA_CHECK(cudaMemsetAsync(totals, 0, sizeof(double) * xs.size(),
                             static_cast<cudaStream_t>(stream_of(ctx))));
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t n = xs[i].numel();
    if (n == 0) continue;
    const int64_t blocks = (n + kChunk - 1) / kChunk;
    launch_sum_squares_partials(stream_of(ctx), partial, xs[i].raw(), code(xs[i]), n, kChunk);
    launch_sum_partials(stream_of(ctx), totals + i, partial, blocks);
  }
  check_launch("sum_squares_each");
  CUDA_CHECK(cudaMemcpyAsync(out.data(), totals, sizeof(double) * xs.size(), cudaMemcpyDeviceToHost,
                             static_cast<cudaStream_t>(stream_of(ctx))));
  ctx.stream().synchronize();
  return out;
}

void cast(ExecContext& ctx, Tensor& dst, const Tensor& src) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_float(dst, "cast", "dst");
  check_float(src, "cast", "src");
  BRAID_CHECK(dst.numel() == src.numel(), "cast: {} into {}", src.str(), dst.str());
  if (dst.dtype() == src.dtype()) {
    if (dst.raw() != src.raw())
      CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice,
                                 static_cast<cudaStream_t>(stream_of(ctx))));
    return;
  }
  launch_cast(stream_of(ctx), dst.raw(), code(dst), src.raw(), code(src), src.numel());
  check_launch("cast");
}

namespace {
// dst's columns [col, col + part cols) <-> part, as one strided 2-D copy.
void copy_columns(ExecContext& ctx, void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                  size_t width, size_t rows) {
  if (width == 0 || rows == 0) return;
  CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows,
                               cudaMemcpyDeviceToDevice,
                               static_cast<cudaStream_t>(stream_of(ctx))));
}
int64_t rows_of(const Tensor& t) { return t.dim(-1) == 0 ? 0 : t.numel() / t.dim(-1); }
}  // namespace

void split_columns(ExecContext& ctx, const std::vector<Tensor*>& parts, const Tensor& src) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const int64_t rows = rows_of(src);
  const size_t es = dtype_size(src.dtype());
  int64_t col = 0;
  for (Tensor* p : parts) {
    BRAID_CHECK(p->dtype() == src.dtype() && rows_of(*p) == rows, "split_columns: part {} of {}",
                p->str(), src.str());
    const int64_t w = p->dim(-1);
    copy_columns(ctx, p->raw(), static_cast<size_t>(w) * es,
                 static_cast<const char*>(src.raw()) + static_cast<size_t>(col) * es,
                 static_cast<size_t>(src.dim(-1)) * es, static_cast<size_t>(w) * es,
                 static_cast<size_t>(rows));
    col += w;
  }
  BRAID_CHECK(col == src.dim(-1), "split_columns: parts cover {} of {} columns", col, src.dim(-1));
}

void concat_columns(ExecContext& ctx, Tensor& dst, const std::vector<const Tensor*>& parts) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const int64_t rows = rows_of(dst);
  const size_t es = dtype_size(dst.dtype());
  int64_t col = 0;
  for (const Tensor* p : parts) {
    BRAID_CHECK(p->dtype() == dst.dtype() && rows_of(*p) == rows, "concat_columns: part {} of {}",
                p->str(), dst.str());
    const int64_t w = p->dim(-1);
    copy_columns(ctx, static_cast<char*>(dst.raw()) + static_cast<size_t>(col) * es,
                 static_cast<size_t>(dst.dim(-1)) * es, p->raw(), static_cast<size_t>(w) * es,
                 static_cast<size_t>(w) * es, static_cast<size_t>(rows));
    col += w;
  }
  BRAID_CHECK(col == dst.dim(-1), "concat_columns: parts cover {} of {} columns", col, dst.dim(-1));
}

void copy_rows(ExecContext& ctx, Tensor& dst, int64_t row, const Tensor& src) {
  BRAID_CHECK(src.dtype() == dst.dtype() && src.ndim() >= 1 && dst.ndim() >= 1 &&
                  src.numel() / std::max<int64_t>(src.dim(0), 1) ==
                      dst.numel() / std::max<int64_t>(dst.dim(0), 1) &&
                  row >= 0 && row + src.dim(0) <= dst.dim(0),
              "copy_rows: {} into rows from {} of {}", src.str(), row, dst.str());
  const size_t row_bytes = dst.dim(0) ? dst.nbytes() / static_cast<size_t>(dst.dim(0)) : 0;
  if (src.nbytes())
    CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst.raw()) + static_cast<size_t>(row) * row_bytes,
                               src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice,
                               static_cast<cudaStream_t>(stream_of(ctx))));
}

}  // namespace braid::cuda
