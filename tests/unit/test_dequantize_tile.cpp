// The quantised linear's tile dequantisation (core/kernels/cpu/dequantize_tile.h) at every
// instruction-set level equals dequantize_blockwise bit for bit (NF4 and int8, f32 and bf16,
// odd starts, lengths and block sizes), and the quantised linear over several tiles equals the
// linear on the dequantised weight.
#include <gtest/gtest.h>

#include <cstring>

#include "core/kernels/cpu/dequantize_tile.h"
#include "core/kernels/linear.h"
#include "core/kernels/quantize.h"
#include "kernel_test_util.h"
#include "quant_test_util.h"

namespace braid {
namespace {

using kernel_test::random_tensor;

class DequantizeTile : public kernel_test::AtCpuIsa {};

TEST_P(DequantizeTile, EqualsDequantizeBlockwise) {
  const int64_t n = 3001;
  const Tensor x = random_tensor({n}, 21, -2.0, 2.0);
  for (QuantCode code : {QuantCode::Nf4, QuantCode::Int8}) {
    for (int64_t block : {64, 50, 4096}) {
      Tensor q = Tensor::empty({quant_code_bytes(code, n)}, DType::U8);
      Tensor absmax = Tensor::empty({quant_blocks(n, block)});
      quantize_blockwise(ctx(), q, absmax, x, code, block);
      for (DType dt : {DType::F32, DType::BF16}) {
        Tensor ref = Tensor::empty({n}, dt);
        dequantize_blockwise(ctx(), ref, q, absmax, code, block);
        // [begin, begin + len): aligned, odd start (half a byte of NF4), short, to the end
        const int64_t spans[][2] = {{0, n}, {1, 200}, {63, 37}, {640, 1024}, {2977, 24}};
        for (const auto& sp : spans) {
          const int64_t begin = sp[0], len = sp[1];
          const size_t es = dtype_size(dt);
          std::vector<char> got(static_cast<size_t>(len) * es, 0x5a);  // poisoned
          cpu::dequantize_tile(GetParam(), got.data(), dt, q.data<uint8_t>(), absmax.f32(), code,
                               block, begin, len);
          const char* want = static_cast<const char*>(ref.raw()) + begin * static_cast<int64_t>(es);
          for (int64_t i = 0; i < len; ++i)
            ASSERT_EQ(std::memcmp(got.data() + i * static_cast<int64_t>(es), want + i * es, es), 0)
                << "code " << static_cast<int>(code) << " block " << block << " dtype "
                << dtype_name(dt) << " begin " << begin << " value " << i;
        }
      }
    }
  }
}

// A weight larger than one tile (32 MiB of f32 rows: 4096 rows of 2048) runs as two tiles; the
// second adds to the first's input gradient and writes its own columns of y.
TEST_P(DequantizeTile, QuantisedLinearAcrossTiles) {
  const int64_t N = 3, IN = 2048, OUT = 4100;
  const kernel_test::QuantLinearCase t = kernel_test::quant_linear_case(ctx(), N, IN, OUT, 31);
  for (bool bias : {true, false}) {
    Tensor y = Tensor::empty({N, OUT}), y_ref = Tensor::empty({N, OUT});
    y.fill_(1e30f);  // poisoned: every value must be written
    linear_forward_quantized(ctx(), y, t.x, t.qw, bias ? t.b : Tensor());
    linear_forward(ctx(), y_ref, t.x, t.wd, bias ? t.b : Tensor());
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.f32()[i], y_ref.f32()[i], 1e-3) << i;
  }
  for (bool accumulate : {false, true}) {
    Tensor dx = Tensor::empty({N, IN}), dx_ref = Tensor::empty({N, IN});
    dx.fill_(accumulate ? 0.5f : 1e30f);
    dx_ref.fill_(0.5f);
    linear_backward_input_quantized(ctx(), dx, t.dy, t.qw, accumulate);
    linear_backward_input(ctx(), dx_ref, t.dy, t.wd, accumulate);
    for (int64_t i = 0; i < dx.numel(); ++i) ASSERT_NEAR(dx.f32()[i], dx_ref.f32()[i], 1e-3) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, DequantizeTile, ::testing::ValuesIn(kAllCpuIsas),
                         kernel_test::cpu_isa_test_name);

}  // namespace
}  // namespace braid
