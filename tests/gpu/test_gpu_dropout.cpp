// CUDA dropout against the CPU kernel: the same counter-based mask (core/kernels/math/dropout.h)
// and the same kept values, bit for bit, for whole tensors and tensor-parallel column windows;
// 16-bit tensors get the CPU's f32 result rounded once.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/kernels/dropout.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

// CPU dropout (f32 only) on x widened, rounded to dt: what the GPU computes in dt.
Tensor cpu_dropout(ExecContext& cpu, const Tensor& x, float p, uint64_t seed, uint64_t stream,
                   DropoutWindow window = {}) {
  const Tensor x32 = x.dtype() == DType::F32 ? x : x.to(DType::F32, MemCategory::Other);
  Tensor y = Tensor::empty(x.shape());
  dropout_apply(cpu, y, x32, p, seed, stream, window);
  return x.dtype() == DType::F32 ? y : y.to(x.dtype(), MemCategory::Other);
}

bool same_bits(const Tensor& device, const Tensor& host) {
  const Tensor h = device.to_host();
  return h.nbytes() == host.nbytes() && std::memcmp(h.raw(), host.raw(), h.nbytes()) == 0;
}

class GpuDropout : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuDropout, SameMaskAndValuesAsCpu) {
  const DType dt = GetParam();
  for (const Shape& sh : {Shape{1}, Shape{31}, Shape{257, 3}, Shape{7, 4097}, Shape{2, 3, 1000}})
    for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
      const std::string at = "numel=" + std::to_string(shape_numel(sh)) + " p=" + std::to_string(p);
      const Tensor x = random_host(sh, dt, 1);
      const Tensor want = cpu_dropout(cpu(), x, p, 42, 7);
      Tensor y = poisoned(sh, dt);
      dropout_apply(gpu(), y, up(x), p, 42, 7);
      EXPECT_TRUE(same_bits(y, want)) << at;
      Tensor inplace = up(x);
      dropout_apply(gpu(), inplace, inplace, p, 42, 7);
      EXPECT_TRUE(same_bits(inplace, want)) << "in place " << at;
    }
}

TEST_P(GpuDropout, ColumnWindowDrawsTheCpuWindowMask) {
  const DType dt = GetParam();
  const int64_t rows = 37, full = 4099, cols = 1000, offset = 3001;
  const Tensor x = random_host({rows, cols}, dt, 2);
  const DropoutWindow window{full, offset};
  const Tensor want = cpu_dropout(cpu(), x, 0.3f, 5, 9, window);
  Tensor y = poisoned({rows, cols}, dt);
  dropout_apply(gpu(), y, up(x), 0.3f, 5, 9, window);
  EXPECT_TRUE(same_bits(y, want));
  // Another stream draws another mask.
  Tensor z = poisoned({rows, cols}, dt);
  dropout_apply(gpu(), z, up(x), 0.3f, 5, 10, window);
  EXPECT_FALSE(same_bits(z, want));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuDropout, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace braid::gpu_test
