// CUDA block-wise quantisation against its CPU twin, bit for bit (codes, absmax values, nested
// codes and the values read back: both run core/kernels/math/quantize.h), for NF4, int8 and
// the dynamic maps, f32 and bf16 inputs, odd sizes and a partial last block; and the linear
// layer over a quantised weight (dequantised, then cuBLASLt) against the CPU's within the GEMM
// tolerance of tests/gpu/test_gpu_linear.cpp.
#include <gtest/gtest.h>

#include <cstring>

#include "core/kernels/quantize.h"
#include "tests/gpu/gpu_test_util.h"

namespace braid::gpu_test {
namespace {

class GpuQuantize : public GpuTest {};

TEST_F(GpuQuantize, BlockwiseMatchesCpuBitForBit) {
  uint64_t seed = 1;
  for (QuantCode code :
       {QuantCode::Nf4, QuantCode::Int8, QuantCode::Dynamic, QuantCode::DynamicUnsigned}) {
    for (int64_t n : {1, 63, 64 * 7 + 5, 100003}) {
      for (DType dt : {DType::F32, DType::BF16}) {
        const float lo = code == QuantCode::DynamicUnsigned ? 0.0f : -2.0f;
        const Tensor x = random_host({n}, dt, seed++, lo, 2.0f);
        const int64_t block = 64;
        Tensor q = Tensor::empty({quant_code_bytes(code, n)}, DType::U8);
        Tensor a = Tensor::empty({quant_blocks(n, block)});
        quantize_blockwise(cpu(), q, a, x, code, block);
        Tensor gq = gpu().empty(q.shape(), DType::U8), ga = poisoned(a.shape(), DType::F32);
        quantize_blockwise(gpu(), gq, ga, up(x), code, block);
        ASSERT_TRUE(same_bytes(gq, q)) << "codes n=" << n;
        ASSERT_TRUE(same_bytes(ga, a)) << "absmax n=" << n;
        for (DType yt : {DType::F32, DType::BF16}) {  // from value 3 on: a tile of rows
          const int64_t begin = n > 3 ? 3 : 0;
          Tensor y = Tensor::empty({n - begin}, yt);
          dequantize_blockwise(cpu(), y, q, a, code, block, begin);
          Tensor gy = poisoned({n - begin}, yt);
          dequantize_blockwise(gpu(), gy, gq, ga, code, block, begin);
          ASSERT_TRUE(same_bytes(gy, y)) << "read back n=" << n;
          // With an offset added after the product (double quantisation's absmax values).
          dequantize_blockwise(cpu(), y, q, a, code, block, begin, 0.0371f);
          dequantize_blockwise(gpu(), gy, gq, ga, code, block, begin, 0.0371f);
          ASSERT_TRUE(same_bytes(gy, y)) << "read back with an offset, n=" << n;
        }
      }
    }
  }
}

// Blocks wider than a thread block (the kernels' strided loops) and an all-zero block (the
// absmax clamp), for each code.
TEST_F(GpuQuantize, WideBlocksAndAZeroBlockMatchCpuBitForBit) {
  const int64_t n = 3 * 4096 + 77, block = 4096;
  for (QuantCode code :
       {QuantCode::Nf4, QuantCode::Int8, QuantCode::Dynamic, QuantCode::DynamicUnsigned}) {
    const float lo = code == QuantCode::DynamicUnsigned ? 0.0f : -2.0f;
    Tensor x = random_host({n}, DType::F32, 80, lo, 2.0f);
    for (int64_t i = block; i < 2 * block; ++i) x.f32()[i] = 0.0f;
    Tensor q = Tensor::empty({quant_code_bytes(code, n)}, DType::U8);
    Tensor a = Tensor::empty({quant_blocks(n, block)});
    quantize_blockwise(cpu(), q, a, x, code, block);
    Tensor gq = gpu().empty(q.shape(), DType::U8), ga = poisoned(a.shape(), DType::F32);
    quantize_blockwise(gpu(), gq, ga, up(x), code, block);
    ASSERT_TRUE(same_bytes(gq, q)) << "codes";
    ASSERT_TRUE(same_bytes(ga, a)) << "absmax";
    Tensor y = Tensor::empty({n}), gy = poisoned({n}, DType::F32);
    dequantize_blockwise(cpu(), y, q, a, code, block);
    dequantize_blockwise(gpu(), gy, gq, ga, code, block);
    ASSERT_TRUE(same_bytes(gy, y)) << "read back";
  }
}

// f16 activations (train.precision: fp16 with a quantised base) take the f32 GEMM on both.
TEST_F(GpuQuantize, QuantisedLinearMatchesCpu) {
  const int64_t N = 17, IN = 320, OUT = 129;
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    const Tensor w = random_host({OUT, IN}, DType::F32, 7, -0.1f, 0.1f);
    const QuantizedWeight qc = quantize_weight(cpu(), w, QuantCode::Nf4, 64, true);
    const QuantizedWeight qg = quantize_weight(gpu(), up(w), QuantCode::Nf4, 64, true);
    ASSERT_TRUE(same_bytes(qg.q, qc.q));
    ASSERT_TRUE(same_bytes(qg.nested, qc.nested));
    ASSERT_TRUE(same_bytes(qg.nested_absmax, qc.nested_absmax));
    // The absmax values read back on the device (offset added there), as the CPU's.
    ASSERT_TRUE(same_bytes(weight_absmax(gpu(), qg), weight_absmax(cpu(), qc)));
    const Tensor x = random_host({N, IN}, dt, 8), dy = random_host({N, OUT}, dt, 9);
    const Tensor b = random_host({OUT}, dt, 10);
    Tensor y = Tensor::empty({N, OUT}, dt);
    linear_forward_quantized(cpu(), y, x, qc, b);
    Tensor gy = poisoned({N, OUT}, dt);
    linear_forward_quantized(gpu(), gy, up(x), qg, up(b));
    EXPECT_TRUE(close(gy, y, dt == DType::F32 ? 1e-4 : atol_for(dt), rtol_for(dt)));
    Tensor dx = Tensor::empty({N, IN}, dt);
    linear_backward_input_quantized(cpu(), dx, dy, qc);
    Tensor gdx = poisoned({N, IN}, dt);
    linear_backward_input_quantized(gpu(), gdx, up(dy), qg);
    EXPECT_TRUE(close(gdx, dx, dt == DType::F32 ? 1e-4 : atol_for(dt), rtol_for(dt)));
  }
}

}  // namespace
}  // namespace braid::gpu_test
