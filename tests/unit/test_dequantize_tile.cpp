// The quantised linear's tile dequantisation (core/kernels/cpu/dequantize_tile.h) at every
// instruction-set level equals dequantize_blockwise bit for bit (NF4 and int8, f32 and bf16,
// odd starts, lengths and block sizes), and the quantised linear over several tiles equals the
// linear on the dequantised weight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>

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

// bf16 activations and outputs: each tile's GEMM writes its columns of y in bf16 directly, and a
// weight in one tile gives dx in one bf16 GEMM (several tiles sum in f32 first). Against the
// bf16 linear on the dequantised weight rounded to bf16 (the tiles' values): within one bf16
// rounding (and sums in another order: 0.02 absolute, a bf16 step at these magnitudes). Two tiles
// (4100 rows of 4096 in bf16 pass 32 MiB) and one (300 rows).
TEST(DequantizeTileBf16, QuantisedLinearWritesBf16) {
  ExecContext& c = test_ctx();
  for (const auto& [IN, OUT] : {std::pair<int64_t, int64_t>{4096, 4100}, {1000, 300}}) {
    const int64_t N = 3;
    const kernel_test::QuantLinearCase t = kernel_test::quant_linear_case(c, N, IN, OUT, 41);
    const Tensor xb = t.x.to(DType::BF16), dyb = t.dy.to(DType::BF16), wb = t.wd.to(DType::BF16);
    auto near = [](const Tensor& got, const Tensor& want, const char* what, int64_t in) {
      const Tensor g = got.to(DType::F32), w = want.to(DType::F32);
      for (int64_t i = 0; i < g.numel(); ++i)
        ASSERT_NEAR(g.f32()[i], w.f32()[i], 2e-2 + std::fabs(w.f32()[i]) / 128)
            << what << " IN " << in << " element " << i;
    };
    for (bool bias : {true, false}) {
      Tensor y = Tensor::empty({N, OUT}, DType::BF16), y_ref = Tensor::empty({N, OUT}, DType::BF16);
      linear_forward_quantized(c, y, xb, t.qw, bias ? t.b : Tensor());
      linear_forward(c, y_ref, xb, wb, bias ? t.b : Tensor());
      near(y, y_ref, bias ? "y with bias" : "y", IN);
    }
    for (bool accumulate : {false, true}) {
      Tensor dx = t.x.to(DType::BF16), dx_ref = t.x.to(DType::BF16);  // accumulate onto x's values
      linear_backward_input_quantized(c, dx, dyb, t.qw, accumulate);
      linear_backward_input(c, dx_ref, dyb, wb, accumulate);
      near(dx, dx_ref, accumulate ? "dx accumulated" : "dx", IN);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, DequantizeTile, ::testing::ValuesIn(kAllCpuIsas),
                         kernel_test::cpu_isa_test_name);

}  // namespace
}  // namespace braid
