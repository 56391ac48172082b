// A round-trip smoke kernel: the GPU tests' first check that kernels launch at all.
#include <cuda_runtime.h>

#include "core/kernels/cuda/device_info.h"

namespace braid::cuda {

namespace {
__global__ void axpy_kernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
}  // namespace

std::string smoke_test(int n) {
  float *x = nullptr, *y = nullptr;
  const size_t bytes = sizeof(float) * static_cast<size_t>(n);
  if (cudaMalloc(&x, bytes) != cudaSuccess) return "cudaMalloc failed";
  if (cudaMalloc(&y, bytes) != cudaSuccess) {
    cudaFree(x);
    return "cudaMalloc failed";
  }
  float* hx = new float[n];
  float* hy = new float[n];
  for (int i = 0; i < n; ++i) {
    hx[i] = static_cast<float>(i);
    hy[i] = 1.0f;
  }
  cudaMemcpy(x, hx, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(y, hy, bytes, cudaMemcpyHostToDevice);
  axpy_kernel<<<(n + 255) / 256, 256>>>(n, 2.0f, x, y);
  // A launch that cannot run (no machine code or PTX for this GPU) says so here, not as a wrong
  // value below.
  cudaError_t err = cudaGetLastError();
  std::string result;
  if (err != cudaSuccess) result = std::string("kernel launch: ") + cudaGetErrorString(err);
  err = cudaMemcpy(hy, y, bytes, cudaMemcpyDeviceToHost);
  if (result.empty() && err != cudaSuccess) result = cudaGetErrorString(err);
  for (int i = 0; i < n && result.empty(); ++i)
    if (hy[i] != 1.0f + 2.0f * static_cast<float>(i))
      result = "wrong value at " + std::to_string(i);
  delete[] hx;
  delete[] hy;
  cudaFree(x);
  cudaFree(y);
  return result;
}

}  // namespace braid::cuda
