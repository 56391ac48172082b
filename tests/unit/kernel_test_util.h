// Helpers for the kernel tests: seeded random tensors, double copies, tolerance checks, FD.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/tensor.h"

namespace braid {
// The context kernel and model tests run on (one per test binary: tests run one at a time).
inline ExecContext& test_ctx() {
  static ExecContext ctx;
  return ctx;
}

// gtest prints a CpuIsa parameter by its name ("avx2").
inline void PrintTo(CpuIsa isa, std::ostream* os) { *os << cpu_isa_name(isa); }
}  // namespace braid

namespace braid::kernel_test {

// splitmix64: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t s_;
};

// A test run once per instruction-set level (INSTANTIATE_TEST_SUITE_P(Prefix, Suite,
// ::testing::ValuesIn(kAllCpuIsas), cpu_isa_test_name)): a level this CPU lacks skips naming
// the missing feature; the others get ctx(), a fresh context at that level.
class AtCpuIsa : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    if (!cpu_isa_supported(GetParam())) GTEST_SKIP() << cpu_isa_missing(GetParam());
    ExecOptions o;
    o.cpu_isa = GetParam();
    ctx_ = std::make_unique<ExecContext>(o);
  }
  ExecContext& ctx() { return *ctx_; }

 private:
  std::unique_ptr<ExecContext> ctx_;
};

// Names a CpuIsa-parameterised test by its level: Suite.Test/avx512_bf16.
inline std::string cpu_isa_test_name(const ::testing::TestParamInfo<CpuIsa>& info) {
  return std::string(cpu_isa_name(info.param));
}

inline Tensor random_tensor(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  float* p = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(rng.uniform(lo, hi));
  return t;
}

inline std::vector<double> to_double(const Tensor& t) {
  const float* p = t.f32();
  return std::vector<double>(p, p + t.numel());
}

inline Tensor nan_tensor(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  t.fill_(std::nanf(""));
  return t;
}

// Every element within atol + rtol |ref|; reports the count and the first few misses.
inline void expect_close(const Tensor& got, const std::vector<double>& ref, double atol,
                         double rtol, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(ref.size())) << what;
  const float* g = got.f32();
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(static_cast<double>(g[i]) - ref[i]);
    if (!(err <= atol + rtol * std::fabs(ref[i]))) {
      if (++bad <= 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << g[i] << ", expected " << ref[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size() << " elements out of tolerance";
}

// Central differences of a double-precision scalar function of v, one element at a time.
inline std::vector<double> finite_diff(const std::function<double(const std::vector<double>&)>& f,
                                       std::vector<double> v, double h = 1e-6) {
  std::vector<double> grad(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = f(v);
    v[i] = keep - h;
    const double down = f(v);
    v[i] = keep;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

// sum_i a_i b_i: turns a vector-valued reference into the scalar loss <y, dy> for FD.
inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Runs fn with the OpenMP thread count set to n, restoring the previous count afterwards.
inline void with_threads(int n, const std::function<void()>& fn) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(n);
  fn();
  omp_set_num_threads(before);
}

// Expects fn to throw braid::Error whose message contains every one of the given pieces.
inline void expect_error_with(const std::function<void()>& fn,
                              const std::vector<std::string>& pieces) {
  try {
    fn();
    ADD_FAILURE() << "expected braid::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : pieces) EXPECT_NE(msg.find(p), std::string::npos) << msg << " lacks " << p;
  }
}

}  // namespace braid::kernel_test
