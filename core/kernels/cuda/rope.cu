// Rotary position embedding (HF Llama "rotate half"), applied in place, and its inverse.
//
// Buffers: x (B, T, H, D) row-major, f32/bf16/f16, rotated in place (f32 arithmetic, rounded to
// nearest even on store); table (T, 2, D/2) f32 workspace. As on the CPU, the cos/sin table is
// computed once per call in double from the pair frequencies of the rope type (computed on the
// host by the CPU's own code, core/kernels/rope_freq.h) and rounded to float, then shared by
// every batch row and head; the backward is the rotation by the negated angle.
#include "core/kernels/cuda/any_dtype.cuh"
#include "core/kernels/cuda/rope.h"
#include "core/kernels/math/rope.h"

namespace braid::cuda {

namespace {

__global__ void rope_table_kernel(float* table, const double* freq, int64_t T, int64_t half,
                                  int64_t pos_offset, double scale, float sign) {
  for (int64_t j = global_thread(); j < T * half; j += grid_threads()) {
    const int64_t t = j / half, i = j % half;
    const double angle = static_cast<double>(pos_offset + t) * freq[i];
    double s, c;
    sincos(angle, &s, &c);
    float* cs = table + t * 2 * half;
    cs[i] = static_cast<float>(scale * c);
    cs[half + i] = sign * static_cast<float>(scale * s);
  }
}

// One thread per (row of (b, t, h), pair i).
__global__ void rope_rotate_kernel(AnyPtr x, const float* table, int64_t rows, int64_t T, int64_t H,
                                   int64_t half) {
  for (int64_t j = global_thread(); j < rows * half; j += grid_threads()) {
    const int64_t row = j / half, i = j % half;
    const int64_t t = (row / H) % T;
    const float* cs = table + t * 2 * half;
    const int64_t at = row * 2 * half + i;
    float x1, x2;
    math::rope_rotate_pair(x[at], x[at + half], cs[i], cs[half + i], x1, x2);
    x.set(at, x1);
    x.set(at + half, x2);
  }
}

}  // namespace

void launch_rope_table(void* stream, float* table, const double* freq, int64_t T, int64_t D,
                       int64_t pos_offset, double scale, float sign) {
  const int64_t n = T * (D / 2);
  if (n == 0) return;
  rope_table_kernel<<<grid_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
      table, freq, T, D / 2, pos_offset, scale, sign);
}

void launch_rope_rotate(void* stream, void* x, int tx, const float* table, int64_t B, int64_t T,
                        int64_t H, int64_t D) {
  const int64_t rows = B * T * H, half = D / 2;
  if (rows * half == 0) return;
  rope_rotate_kernel<<<grid_for(rows * half, kThreads), kThreads, 0, as_stream(stream)>>>(
      {x, tx}, table, rows, T, H, half);
}

}  // namespace braid::cuda
