// CPU elementwise glue ops: residual add, in-place add and scale, sum of squares.
#include "core/kernels/elementwise.h"

#include <algorithm>
#include <vector>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/profile.h"

namespace braid {

void add(Tensor& y, const Tensor& a, const Tensor& b) {
  KernelTimer timer(KernelGroup::Elementwise);
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

void add_inplace(Tensor& y, const Tensor& x) {
  KernelTimer timer(KernelGroup::Elementwise);
  cpu::check_f32(y, "add_inplace", "y");
  cpu::check_f32(x, "add_inplace", "x");
  check_shape(x, y.shape(), "add_inplace x");
  const int64_t n = y.numel();
  const float* xp = x.f32();
  float* yp = y.f32();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) yp[i] += xp[i];
}

void scale_inplace(Tensor& x, float s) {
  cpu::check_f32(x, "scale_inplace", "x");
  const int64_t n = x.numel();
  float* xp = x.f32();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) xp[i] *= s;
}

// Fixed-size blocks summed in double, then added in block order: the result is the same for
// any thread count (stronger than the header promises, and free).
double sum_squares(const Tensor& x) {
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

}  // namespace braid
