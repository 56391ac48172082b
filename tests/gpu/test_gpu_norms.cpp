// CUDA LayerNorm and RMSNorm against their CPU twins: odd row lengths (1 to 4097+ columns),
// every float dtype, poisoned outputs, weight gradients accumulated onto non-zero values (and
// frozen), and the same bits from two runs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/kernels/layernorm.h"
#include "core/kernels/rmsnorm.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

struct Size {
  int64_t N, C;
};
const Size kSizes[] = {{1, 1}, {31, 1}, {1, 31}, {31, 257}, {257, 31}, {5, 4097}, {300, 768}};

// Row statistics and sums differ in order between the backends: f32 results agree to ~1e-5 of
// the row's scale; 16-bit outputs may round the other way once.
double atol(DType d) { return d == DType::F32 ? 1e-4 : atol_for(d); }
double rtol(DType d) { return d == DType::F32 ? 1e-4 : rtol_for(d); }

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to_host(), hb = b.to_host();
  return ha.nbytes() == hb.nbytes() && std::memcmp(ha.raw(), hb.raw(), ha.nbytes()) == 0;
}

class GpuNorms : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuNorms, LayerNormForwardAndBackwardMatchCpu) {
  const DType dt = GetParam();
  for (const Size& s : kSizes) {
    const int64_t N = s.N, C = s.C;
    const std::string at = "N=" + std::to_string(N) + " C=" + std::to_string(C);
    const Tensor x = random_host({N, C}, dt, 1, -2.0f, 3.0f), w = random_host({C}, dt, 2),
                 b = random_host({C}, dt, 3), dy = random_host({N, C}, dt, 4);
    Tensor y_c = Tensor::empty({N, C}, dt), mean_c = Tensor::empty({N}),
           rstd_c = Tensor::empty({N});
    layernorm_forward(cpu(), y_c, mean_c, rstd_c, x, w, b, 1e-5f);
    const Tensor gx = up(x), gw = up(w), gb = up(b), gdy = up(dy);
    Tensor y = poisoned({N, C}, dt), mean = poisoned({N}, DType::F32),
           rstd = poisoned({N}, DType::F32);
    layernorm_forward(gpu(), y, mean, rstd, gx, gw, gb, 1e-5f);
    EXPECT_TRUE(close(y, y_c, atol(dt), rtol(dt))) << "y " << at;
    EXPECT_TRUE(close(mean, mean_c, 1e-5, 1e-5)) << "mean " << at;
    EXPECT_TRUE(close(rstd, rstd_c, 1e-5, 1e-4)) << "rstd " << at;

    // The backward on the CPU's statistics, so both see the same inputs.
    const Tensor dw0 = random_host({C}, dt, 5), db0 = random_host({C}, dt, 6);
    Tensor dx_c = Tensor::empty({N, C}, dt), dw_c = dw0.clone(), db_c = db0.clone();
    layernorm_backward(cpu(), dx_c, dw_c, db_c, dy, x, w, mean_c, rstd_c);
    const Tensor gmean = up(mean_c), grstd = up(rstd_c);
    Tensor dx = poisoned({N, C}, dt), dw = up(dw0), db = up(db0);
    layernorm_backward(gpu(), dx, dw, db, gdy, gx, gw, gmean, grstd);
    EXPECT_TRUE(close(dx, dx_c, atol(dt), rtol(dt))) << "dx " << at;
    EXPECT_TRUE(close(dw, dw_c, atol(dt), rtol(dt))) << "dw " << at;
    EXPECT_TRUE(close(db, db_c, atol(dt), rtol(dt))) << "db " << at;

    // Deterministic: a second run accumulates the same bits again.
    Tensor dx2 = poisoned({N, C}, dt), dw2 = up(dw0), db2 = up(db0);
    layernorm_backward(gpu(), dx2, dw2, db2, gdy, gx, gw, gmean, grstd);
    EXPECT_TRUE(same_bits(dx2, dx) && same_bits(dw2, dw) && same_bits(db2, db)) << at;

    // Frozen weights: dx alone; only dw trainable: db untouched.
    Tensor none, dx3 = poisoned({N, C}, dt);
    layernorm_backward(gpu(), dx3, none, none, gdy, gx, gw, gmean, grstd);
    EXPECT_TRUE(same_bits(dx3, dx)) << "frozen " << at;
    Tensor dw4 = up(dw0);
    layernorm_backward(gpu(), dx3, dw4, none, gdy, gx, gw, gmean, grstd);
    EXPECT_TRUE(same_bits(dw4, dw)) << "dw only " << at;
  }
}

TEST_P(GpuNorms, RmsNormForwardAndBackwardMatchCpu) {
  const DType dt = GetParam();
  for (const Size& s : kSizes) {
    const int64_t N = s.N, C = s.C;
    const std::string at = "N=" + std::to_string(N) + " C=" + std::to_string(C);
    const Tensor x = random_host({N, C}, dt, 11, -2.0f, 3.0f), w = random_host({C}, dt, 12),
                 dy = random_host({N, C}, dt, 13);
    Tensor y_c = Tensor::empty({N, C}, dt), rstd_c = Tensor::empty({N});
    rmsnorm_forward(cpu(), y_c, rstd_c, x, w, 1e-6f);
    const Tensor gx = up(x), gw = up(w), gdy = up(dy);
    Tensor y = poisoned({N, C}, dt), rstd = poisoned({N}, DType::F32);
    rmsnorm_forward(gpu(), y, rstd, gx, gw, 1e-6f);
    EXPECT_TRUE(close(y, y_c, atol(dt), rtol(dt))) << "y " << at;
    EXPECT_TRUE(close(rstd, rstd_c, 1e-5, 1e-4)) << "rstd " << at;

    const Tensor dw0 = random_host({C}, dt, 14);
    Tensor dx_c = Tensor::empty({N, C}, dt), dw_c = dw0.clone();
    rmsnorm_backward(cpu(), dx_c, dw_c, dy, x, w, rstd_c);
    const Tensor grstd = up(rstd_c);
    Tensor dx = poisoned({N, C}, dt), dw = up(dw0);
    rmsnorm_backward(gpu(), dx, dw, gdy, gx, gw, grstd);
    EXPECT_TRUE(close(dx, dx_c, atol(dt), rtol(dt))) << "dx " << at;
    EXPECT_TRUE(close(dw, dw_c, atol(dt), rtol(dt))) << "dw " << at;

    Tensor dx2 = poisoned({N, C}, dt), dw2 = up(dw0);
    rmsnorm_backward(gpu(), dx2, dw2, gdy, gx, gw, grstd);
    EXPECT_TRUE(same_bits(dx2, dx) && same_bits(dw2, dw)) << at;
    Tensor none, dx3 = poisoned({N, C}, dt);
    rmsnorm_backward(gpu(), dx3, none, gdy, gx, gw, grstd);
    EXPECT_TRUE(same_bits(dx3, dx)) << "frozen " << at;
  }
}

// More rows than the row kernels' grid (2^20 blocks): the blocks loop over the rest.
TEST_F(GpuTest, NormsOverMoreRowsThanBlocks) {
  const int64_t N = (int64_t{1} << 20) + 3, C = 8;
  const Tensor x = random_host({N, C}, DType::F32, 31, -2.0f, 3.0f),
               w = random_host({C}, DType::F32, 32), b = random_host({C}, DType::F32, 33),
               dy = random_host({N, C}, DType::F32, 34);
  Tensor y_c = Tensor::empty({N, C}), mean_c = Tensor::empty({N}), rstd_c = Tensor::empty({N});
  layernorm_forward(cpu(), y_c, mean_c, rstd_c, x, w, b, 1e-5f);
  Tensor y = poisoned({N, C}, DType::F32), mean = poisoned({N}, DType::F32),
         rstd = poisoned({N}, DType::F32);
  const Tensor gx = up(x), gw = up(w);
  layernorm_forward(gpu(), y, mean, rstd, gx, gw, up(b), 1e-5f);
  EXPECT_TRUE(close(y, y_c, 1e-4, 1e-4)) << "layernorm y";
  Tensor dx_c = Tensor::empty({N, C}), none_c, none;
  layernorm_backward(cpu(), dx_c, none_c, none_c, dy, x, w, mean_c, rstd_c);
  Tensor dx = poisoned({N, C}, DType::F32);
  layernorm_backward(gpu(), dx, none, none, up(dy), gx, gw, up(mean_c), up(rstd_c));
  EXPECT_TRUE(close(dx, dx_c, 1e-4, 1e-4)) << "layernorm dx";
  Tensor ry_c = Tensor::empty({N, C}), ry = poisoned({N, C}, DType::F32);
  rmsnorm_forward(cpu(), ry_c, rstd_c, x, w, 1e-6f);
  rmsnorm_forward(gpu(), ry, rstd, gx, gw, 1e-6f);
  EXPECT_TRUE(close(ry, ry_c, 1e-4, 1e-4)) << "rmsnorm y";
}

// dx may be dy (the weight partials read dy before dx overwrites it).
TEST_P(GpuNorms, BackwardInPlaceOnDy) {
  const DType dt = GetParam();
  const int64_t N = 37, C = 513;
  const Tensor x = random_host({N, C}, dt, 21), w = random_host({C}, dt, 22),
               b = random_host({C}, dt, 23), dy = random_host({N, C}, dt, 24);
  Tensor y = poisoned({N, C}, dt), mean = poisoned({N}, DType::F32),
         rstd = poisoned({N}, DType::F32);
  const Tensor gx = up(x), gw = up(w);
  layernorm_forward(gpu(), y, mean, rstd, gx, gw, up(b), 1e-5f);
  Tensor dx = poisoned({N, C}, dt), dw = up(w), db = up(b);
  layernorm_backward(gpu(), dx, dw, db, up(dy), gx, gw, mean, rstd);
  Tensor inplace = up(dy), dw2 = up(w), db2 = up(b);
  layernorm_backward(gpu(), inplace, dw2, db2, inplace, gx, gw, mean, rstd);
  EXPECT_TRUE(same_bits(inplace, dx) && same_bits(dw2, dw) && same_bits(db2, db));

  // RMSNorm the same way.
  Tensor y_r = poisoned({N, C}, dt), rstd_r = poisoned({N}, DType::F32);
  rmsnorm_forward(gpu(), y_r, rstd_r, gx, gw, 1e-6f);
  Tensor dx_r = poisoned({N, C}, dt), dw_r = up(w);
  rmsnorm_backward(gpu(), dx_r, dw_r, up(dy), gx, gw, rstd_r);
  Tensor inplace_r = up(dy), dw_r2 = up(w);
  rmsnorm_backward(gpu(), inplace_r, dw_r2, inplace_r, gx, gw, rstd_r);
  EXPECT_TRUE(same_bits(inplace_r, dx_r) && same_bits(dw_r2, dw_r)) << "RMSNorm";
}

// The f32 weight gradients sum the CPU's row chunks in the CPU's order without FMA contraction;
// on a CPU build without FMA contraction (the default x86-64 baseline) they match bit for bit,
// elsewhere to rounding.
class GpuNormsF32 : public GpuTest {};

TEST_F(GpuNormsF32, WeightGradientsFollowTheCpuChunks) {
  const int64_t N = 4100, C = 96;  // several chunks of rows
  const Tensor x = random_host({N, C}, DType::F32, 31), w = random_host({C}, DType::F32, 32),
               dy = random_host({N, C}, DType::F32, 33);
  Tensor rstd_c = Tensor::empty({N}), y_c = Tensor::empty({N, C});
  rmsnorm_forward(cpu(), y_c, rstd_c, x, w, 1e-6f);
  Tensor dx_c = Tensor::empty({N, C}), dw_c = random_host({C}, DType::F32, 34);
  Tensor dw = up(dw_c);
  rmsnorm_backward(cpu(), dx_c, dw_c, dy, x, w, rstd_c);
  Tensor dx = poisoned({N, C}, DType::F32);
  rmsnorm_backward(gpu(), dx, dw, up(dy), up(x), up(w), up(rstd_c));
  EXPECT_TRUE(close(dw, dw_c, 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuNorms, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace braid::gpu_test
