// The GPU tests' harness: a CUDA context beside a CPU one, random host tensors, poisoned device
// outputs (NaN, so an element a kernel never writes fails), and comparisons of a CUDA kernel's
// result with its CPU twin's. Without a GPU every test skips naming the reason, and the binary
// exits 77 (ctest: skipped).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/kernels/cuda/runtime.h"
#include "core/tensor.h"

namespace braid::gpu_test {

inline bool gpu_visible() { return cuda::device_count() > 0; }

// splitmix64: the same numbers everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(static_cast<double>(next() >> 11) * 0x1.0p-53);
  }
  int32_t below(int32_t n) { return static_cast<int32_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t s_;
};

// Host tensor of `dtype` with values uniform in [lo, hi) (rounded to the dtype).
inline Tensor random_host(const Shape& shape, DType dtype, uint64_t seed, float lo = -1.0f,
                          float hi = 1.0f) {
  Rng r(seed);
  Tensor f = Tensor::empty(shape, DType::F32);
  for (int64_t i = 0; i < f.numel(); ++i) f.f32()[i] = r.uniform(lo, hi);
  return dtype == DType::F32 ? f : f.to(dtype, MemCategory::Other);
}

inline Tensor random_tokens(const Shape& shape, int32_t vocab, uint64_t seed) {
  Rng r(seed);
  Tensor t = Tensor::empty(shape, DType::I32);
  for (int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = r.below(vocab);
  return t;
}

// A CUDA context and a CPU context; tests skip without a GPU.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_visible()) GTEST_SKIP() << cuda::unavailable_reason();
    ExecOptions o;
    o.device = Device::cuda(0);
    gpu_ = std::make_unique<ExecContext>(o);
  }
  // A kernel that faulted (an illegal address, say) leaves the CUDA context unusable, and every
  // later test would fail with the same sticky error: name the test it happened in and stop.
  void TearDown() override {
    if (!gpu_) return;
    try {
      cuda::device_synchronize();
    } catch (const std::exception& e) {
      const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
      std::fprintf(stderr, "GPU fault in %s.%s (the CUDA context is lost; stopping): %s\n",
                   t ? t->test_suite_name() : "?", t ? t->name() : "?", e.what());
      // 3, not 1 (failed tests): tools/gpu_check.sh tells a fault from a failure. _Exit: no static
      // destructors calling into the lost context.
      std::_Exit(3);
    }
  }
  ExecContext& gpu() { return *gpu_; }
  ExecContext& cpu() { return cpu_; }

  // A copy of a host tensor on the GPU.
  Tensor up(const Tensor& host) { return gpu_->to_device(host); }
  // A device tensor full of NaN (f32/bf16/f16) or 0x7f7f7f7f (i32).
  Tensor poisoned(const Shape& shape, DType dtype) {
    Tensor h = Tensor::empty(shape, DType::F32);
    h.fill_(std::nanf(""));
    Tensor hd = dtype == DType::F32 ? h : h.to(dtype, MemCategory::Other);
    return gpu_->to_device(hd);
  }

 private:
  ExecContext cpu_;
  std::unique_ptr<ExecContext> gpu_;
};

// Byte equality of a device tensor with a host one (any dtype).
inline ::testing::AssertionResult same_bytes(const Tensor& dev, const Tensor& host) {
  const Tensor h = dev.to_host();
  if (h.nbytes() != host.nbytes() || std::memcmp(h.raw(), host.raw(), h.nbytes()) != 0)
    return ::testing::AssertionFailure() << h.str() << " differs from " << host.str();
  return ::testing::AssertionSuccess();
}

// f32 values of a host or device tensor.
inline std::vector<float> values(const Tensor& t) {
  Tensor h = t.to_host();
  if (h.dtype() != DType::F32) h = h.to(DType::F32, MemCategory::Other);
  return std::vector<float>(h.f32(), h.f32() + h.numel());
}

// Every element within atol + rtol * |expected|; NaN where the expectation is finite fails.
// Reports the number of bad elements and the first few.
inline ::testing::AssertionResult close(const Tensor& got, const Tensor& expected, double atol,
                                        double rtol) {
  if (got.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << got.str() << " vs " << expected.str();
  const std::vector<float> g = values(got), e = values(expected);
  int64_t bad = 0;
  std::string first;
  for (size_t i = 0; i < g.size(); ++i) {
    const double d = std::fabs(static_cast<double>(g[i]) - e[i]);
    const bool ok = std::isnan(e[i]) ? std::isnan(g[i]) : (d <= atol + rtol * std::fabs(e[i]));
    if (!ok && bad++ < 5)
      first +=
          " [" + std::to_string(i) + "] " + std::to_string(g[i]) + " vs " + std::to_string(e[i]);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << g.size() << " elements differ:" << first;
}

// Tolerances for outputs stored in `dtype` (the kernels compute in f32 on both sides; a 16-bit
// output may round the other way once).
inline double atol_for(DType d) { return d == DType::BF16 ? 2e-2 : d == DType::F16 ? 2e-3 : 1e-5; }
inline double rtol_for(DType d) {
  return d == DType::BF16 ? 1.6e-2 : d == DType::F16 ? 2e-3 : 1e-5;
}

}  // namespace braid::gpu_test
