// CUDA linear layer against its CPU twin: odd sizes (1, 17, 257 and an empty inner dimension),
// every float dtype, bias or none, f32 outputs beside 16-bit ones, accumulation onto non-zero
// gradients or (forward) onto y, a frozen weight, a call mixing dtypes (the f32 staging path),
// and a bias in the GEMM's epilogue or (unaligned) written first.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/linear.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

struct Dims {
  int64_t n, in, out;
};
const Dims kDims[] = {{1, 1, 1}, {17, 257, 33}, {257, 17, 1}, {1, 257, 17}, {33, 0, 9}};

// f32 results of 16-bit products: both sides add exact products in f32, only the order differs.
double tol(DType out) { return out == DType::F32 ? 1e-4 : atol_for(out); }
double rtol(DType out) { return out == DType::F32 ? 1e-4 : rtol_for(out); }

class GpuLinear : public GpuTest, public ::testing::WithParamInterface<DType> {};

TEST_P(GpuLinear, ForwardMatchesCpu) {
  const DType dt = GetParam();
  uint64_t seed = 1;
  for (const Dims& d : kDims) {
    Tensor x = random_host({d.n, d.in}, dt, seed++), w = random_host({d.out, d.in}, dt, seed++);
    Tensor b = random_host({d.out}, dt, seed++);
    for (bool bias : {false, true}) {
      for (DType ydt : {dt, DType::F32}) {  // f32: a tensor-parallel partial sum
        const Tensor bb = bias ? b : Tensor();
        Tensor y_cpu = Tensor::empty({d.n, d.out}, ydt);
        linear_forward(cpu(), y_cpu, x, w, bb);
        Tensor y = poisoned({d.n, d.out}, ydt);
        linear_forward(gpu(), y, up(x), up(w), bias ? up(b) : Tensor());
        EXPECT_TRUE(close(y, y_cpu, tol(ydt), rtol(ydt)))
            << d.n << "x" << d.in << "x" << d.out << " bias " << bias << " y " << dtype_name(ydt);
      }
    }
  }
}

// accumulate: y += x w^T onto y's contents (a LoRA update onto its base output), y in the
// operands' dtype or f32, and x in f32 beside a 16-bit w (the staged path).
TEST_P(GpuLinear, ForwardAccumulatesOntoY) {
  const DType dt = GetParam();
  uint64_t seed = 50;
  for (const Dims& d : kDims) {
    Tensor x = random_host({d.n, d.in}, dt, seed++), w = random_host({d.out, d.in}, dt, seed++);
    for (DType ydt : {dt, DType::F32}) {
      Tensor y0 = random_host({d.n, d.out}, ydt, seed++);
      Tensor y_cpu = y0.clone();
      linear_forward(cpu(), y_cpu, x, w, Tensor(), /*accumulate=*/true);
      Tensor y = up(y0);
      linear_forward(gpu(), y, up(x), up(w), Tensor(), /*accumulate=*/true);
      EXPECT_TRUE(close(y, y_cpu, tol(ydt), rtol(ydt)))
          << d.n << "x" << d.in << "x" << d.out << " y " << dtype_name(ydt);
    }
  }
  Tensor x32 = random_host({17, 33}, DType::F32, 60), w = random_host({9, 33}, dt, 61);
  Tensor y0 = random_host({17, 9}, dt, 62);
  Tensor y_cpu = y0.clone();
  linear_forward(cpu(), y_cpu, x32, w, Tensor(), true);
  Tensor y = up(y0);
  linear_forward(gpu(), y, up(x32), up(w), Tensor(), true);
  EXPECT_TRUE(close(y, y_cpu, tol(dt), rtol(dt))) << "x f32, w and y " << dtype_name(dt);
}

TEST_P(GpuLinear, BackwardInputOverwritesOrAccumulates) {
  const DType dt = GetParam();
  uint64_t seed = 100;
  for (const Dims& d : kDims) {
    Tensor dy = random_host({d.n, d.out}, dt, seed++), w = random_host({d.out, d.in}, dt, seed++);
    Tensor dx0 = random_host({d.n, d.in}, dt, seed++);
    for (bool acc : {false, true}) {
      Tensor dx_cpu = dx0.clone();
      linear_backward_input(cpu(), dx_cpu, dy, w, acc);
      Tensor dx = acc ? up(dx0) : poisoned({d.n, d.in}, dt);
      linear_backward_input(gpu(), dx, up(dy), up(w), acc);
      EXPECT_TRUE(close(dx, dx_cpu, tol(dt), rtol(dt)))
          << d.n << "x" << d.in << "x" << d.out << " accumulate " << acc;
    }
  }
}

TEST_P(GpuLinear, BackwardWeightAccumulatesOntoGradients) {
  const DType dt = GetParam();
  uint64_t seed = 200;
  for (const Dims& d : kDims) {
    Tensor dy = random_host({d.n, d.out}, dt, seed++), x = random_host({d.n, d.in}, dt, seed++);
    for (DType gdt : {DType::F32, dt}) {  // f32 gradients as the model keeps them, or 16-bit
      Tensor dw0 = random_host({d.out, d.in}, gdt, seed++), db0 = random_host({d.out}, gdt, seed++);
      Tensor dw_cpu = dw0.clone(), db_cpu = db0.clone();
      linear_backward_weight(cpu(), dw_cpu, db_cpu, dy, x);
      Tensor dw = up(dw0), db = up(db0);
      linear_backward_weight(gpu(), dw, db, up(dy), up(x));
      const std::string what = fmt::format("{}x{}x{} grads {}", d.n, d.in, d.out, dtype_name(gdt));
      EXPECT_TRUE(close(dw, dw_cpu, tol(gdt), rtol(gdt))) << "dw " << what;
      EXPECT_TRUE(close(db, db_cpu, tol(gdt), rtol(gdt))) << "db " << what;

      // A frozen weight: only the bias gradient.
      Tensor db_cpu2 = db0.clone(), none_cpu, none;
      linear_backward_weight(cpu(), none_cpu, db_cpu2, dy, x);
      Tensor db2 = up(db0);
      linear_backward_weight(gpu(), none, db2, up(dy), up(x));
      EXPECT_TRUE(close(db2, db_cpu2, tol(gdt), rtol(gdt))) << "frozen weight, db " << what;
    }
  }
}

// dy in f32 beside 16-bit x and w (a tensor-parallel region's gradient): f32 copies on both.
TEST_P(GpuLinear, MixedDtypesRunInF32) {
  const DType dt = GetParam();
  Tensor x = random_host({17, 33}, dt, 300), w = random_host({9, 33}, dt, 301);
  Tensor dy = random_host({17, 9}, DType::F32, 302);
  Tensor dx_cpu = Tensor::empty({17, 33}, dt);
  linear_backward_input(cpu(), dx_cpu, dy, w);
  Tensor dx = poisoned({17, 33}, dt);
  linear_backward_input(gpu(), dx, up(dy), up(w));
  EXPECT_TRUE(close(dx, dx_cpu, tol(dt), rtol(dt)));

  Tensor dw0 = random_host({9, 33}, DType::F32, 303), db0 = random_host({9}, DType::F32, 304);
  Tensor dw_cpu = dw0.clone(), db_cpu = db0.clone();
  linear_backward_weight(cpu(), dw_cpu, db_cpu, dy, x);
  Tensor dw = up(dw0), db = up(db0);
  linear_backward_weight(gpu(), dw, db, up(dy), up(x));
  EXPECT_TRUE(close(dw, dw_cpu, 1e-4, 1e-4));
  EXPECT_TRUE(close(db, db_cpu, 1e-4, 1e-4));

  // An f32 bias under a 16-bit output.
  Tensor b = random_host({9}, DType::F32, 305);
  Tensor y_cpu = Tensor::empty({17, 9}, dt);
  linear_forward(cpu(), y_cpu, x, w, b);
  Tensor y = poisoned({17, 9}, dt);
  linear_forward(gpu(), y, up(x), up(w), up(b));
  EXPECT_TRUE(close(y, y_cpu, tol(dt), rtol(dt)));
}

// The bias goes into cuBLASLt's epilogue when it is 16-byte aligned; one starting mid-buffer (a
// parameter in a flat ZeRO bucket) takes the write-then-accumulate path. Both match the CPU.
TEST_P(GpuLinear, BiasAlignedOrNotMatchesCpu) {
  const DType dt = GetParam();
  Tensor x = random_host({31, 40}, dt, 400), w = random_host({24, 40}, dt, 401);
  Tensor flat = random_host({25}, dt, 402);
  Tensor y_cpu = Tensor::empty({31, 24}, dt);
  for (int64_t offset : {0, 1}) {
    const Tensor b = flat.slice0(offset, offset + 24).clone();
    linear_forward(cpu(), y_cpu, x, w, b);
    const Tensor dflat = up(flat);
    Tensor y = poisoned({31, 24}, dt);
    linear_forward(gpu(), y, up(x), up(w), dflat.slice0(offset, offset + 24));
    EXPECT_TRUE(close(y, y_cpu, tol(dt), rtol(dt))) << "bias at element offset " << offset;
  }
}

// train.tf32: f32 products on TF32 tensor cores (about 3 significant digits per product), but
// the bias gradient's column sums stay exact f32 sums, as on the CPU.
TEST_F(GpuTest, Tf32ProductsAndExactBiasSums) {
  const int64_t N = 257, IN = 512, OUT = 48;
  Tensor x = random_host({N, IN}, DType::F32, 500), w = random_host({OUT, IN}, DType::F32, 501);
  Tensor b = random_host({OUT}, DType::F32, 502), dy = random_host({N, OUT}, DType::F32, 503);
  cuda::set_allow_tf32(gpu(), true);
  Tensor y_cpu = Tensor::empty({N, OUT});
  linear_forward(cpu(), y_cpu, x, w, b);
  Tensor y = poisoned({N, OUT}, DType::F32);
  linear_forward(gpu(), y, up(x), up(w), up(b));
  EXPECT_TRUE(close(y, y_cpu, 5e-2, 1e-2));
  Tensor dw_cpu = Tensor::zeros({OUT, IN}), db_cpu = Tensor::zeros({OUT});
  linear_backward_weight(cpu(), dw_cpu, db_cpu, dy, x, true);
  Tensor dw = poisoned({OUT, IN}, DType::F32), db = poisoned({OUT}, DType::F32);
  linear_backward_weight(gpu(), dw, db, up(dy), up(x), true);
  EXPECT_TRUE(close(dw, dw_cpu, 5e-2, 1e-2));
  EXPECT_TRUE(close(db, db_cpu, 1e-4, 1e-5)) << "the bias gradient must not run in TF32";
  cuda::set_allow_tf32(gpu(), false);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuLinear, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace braid::gpu_test
