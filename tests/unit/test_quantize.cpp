// Block-wise quantisation (core/kernels/quantize.h): the published NF4 table, exact round trips,
// error bounds, odd sizes, and bitsandbytes' own output (tests/data/nf4_reference.safetensors,
// written by tools/make_nf4_reference.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/kernels/linear.h"
#include "core/kernels/math/quantize.h"
#include "core/kernels/quantize.h"
#include "core/safetensors.h"
#include "kernel_test_util.h"
#include "quant_test_util.h"

namespace braid {
namespace {

using kernel_test::random_tensor;

// QLoRA's NF4 values (bitsandbytes functional.get_4bit_type("nf4")).
const double kNf4[16] = {-1.0,
                         -0.6961928009986877,
                         -0.5250730514526367,
                         -0.39491748809814453,
                         -0.28444138169288635,
                         -0.18477343022823334,
                         -0.09105003625154495,
                         0.0,
                         0.07958029955625534,
                         0.16093020141124725,
                         0.24611230194568634,
                         0.33791524171829224,
                         0.44070982933044434,
                         0.5626170039176941,
                         0.7229568362236023,
                         1.0};

struct Quantized {
  Tensor q, absmax;
};

Quantized quantize(const Tensor& x, QuantCode code, int64_t block) {
  Quantized r{Tensor::empty({quant_code_bytes(code, x.numel())}, DType::U8),
              Tensor::empty({quant_blocks(x.numel(), block)})};
  quantize_blockwise(test_ctx(), r.q, r.absmax, x, code, block);
  return r;
}

Tensor dequantize(const Quantized& qz, int64_t n, QuantCode code, int64_t block,
                  DType dt = DType::F32) {
  Tensor y = Tensor::empty({n}, dt);
  dequantize_blockwise(test_ctx(), y, qz.q, qz.absmax, code, block);
  return y;
}

TEST(Quantize, Nf4TableIsThePublishedOne) {
  for (int i = 0; i < 16; ++i) EXPECT_EQ(math::nf4_value(i), static_cast<float>(kNf4[i])) << i;
  // Each code's own value, and values just either side of a midpoint, encode to the nearest.
  for (int i = 0; i < 16; ++i) EXPECT_EQ(math::nf4_encode(static_cast<float>(kNf4[i])), i);
  for (int i = 0; i < 15; ++i) {
    const float mid = static_cast<float>((kNf4[i] + kNf4[i + 1]) / 2);
    EXPECT_EQ(math::nf4_encode(std::nextafter(mid, -2.0f)), i);
    EXPECT_EQ(math::nf4_encode(std::nextafter(mid, 2.0f)), i + 1);
  }
}

// Values that are a code times the block's absmax come back exactly, in f32 and (for values
// bf16 holds) in bf16.
TEST(Quantize, RepresentableValuesRoundTripExactly) {
  const int64_t block = 64, n = 3 * block + 10;  // odd tail block
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const float absmax = i / block == 1 ? 0.5f : 2.0f;
    v[i] = static_cast<float>(kNf4[(i * 7) % 16]) * absmax;
  }
  for (int64_t b = 0; b < 4; ++b) v[b * block] = b == 1 ? 0.5f : 2.0f;  // absmax in each block
  const Tensor x = Tensor::from_vector(v, {n});
  const Quantized qz = quantize(x, QuantCode::Nf4, block);
  const Tensor y = dequantize(qz, n, QuantCode::Nf4, block);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.f32()[i], v[i]) << i;

  std::vector<float> w(n);
  for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>((i * 37) % 255 - 127) / 127.0f * 3.0f;
  w[0] = 3.0f;
  w[block] = -3.0f, w[2 * block] = 3.0f, w[3 * block] = 3.0f;
  const Tensor xi = Tensor::from_vector(w, {n});
  const Tensor yi = dequantize(quantize(xi, QuantCode::Int8, block), n, QuantCode::Int8, block);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(yi.f32()[i], w[i], 1e-6f * 3.0f) << i;
}

// The error of a value is at most half the widest gap between neighbouring codes times its
// block's absmax; an all-zero block reads back as zeros; a tail block shorter than the others
// gets its own absmax.
TEST(Quantize, ErrorBoundsAndOddSizes) {
  for (const int64_t n : {1, 63, 65, 1000, 4097}) {
    Tensor x = random_tensor({n}, 100 + n, -1.0, 1.0);
    if (n > 128)
      std::fill(x.f32() + 64, x.f32() + std::min<int64_t>(n, 128), 0.0f);  // a zero block
    for (const QuantCode code : {QuantCode::Nf4, QuantCode::Int8, QuantCode::Dynamic}) {
      const int64_t block = code == QuantCode::Dynamic ? 256 : 64;
      const Quantized qz = quantize(x, code, block);
      const Tensor y = dequantize(qz, n, code, block);
      const double half_gap = code == QuantCode::Nf4    ? (1.0 - 0.6961928009986877) / 2
                              : code == QuantCode::Int8 ? 0.5 / 127
                                                        : 0.0071;
      for (int64_t i = 0; i < n; ++i) {
        const float am = qz.absmax.f32()[i / block];
        ASSERT_LE(std::fabs(y.f32()[i] - x.f32()[i]), half_gap * am + 1e-7)
            << "n " << n << " i " << i << " code " << static_cast<int>(code);
        if (am == 0.0f) {
          ASSERT_EQ(y.f32()[i], 0.0f);
        }
      }
      if (n == 65 && block == 64) {  // the tail block of one value has its own absmax
        EXPECT_EQ(qz.absmax.f32()[1], std::fabs(x.f32()[64]));
      }
    }
  }
}

// bf16 output is the f32 result rounded; dequantising a tile [begin, begin + k) equals that
// slice of the whole.
TEST(Quantize, Bf16OutputAndTiles) {
  const int64_t n = 1000, block = 64;
  const Tensor x = random_tensor({n}, 7);
  const Quantized qz = quantize(x, QuantCode::Nf4, block);
  const Tensor y = dequantize(qz, n, QuantCode::Nf4, block);
  const Tensor yb = dequantize(qz, n, QuantCode::Nf4, block, DType::BF16);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(bf16_to_float(yb.data<bf16>()[i]), bf16_to_float(float_to_bf16(y.f32()[i])));
  for (const int64_t begin : {0, 1, 63, 129, 999}) {
    Tensor tile = Tensor::empty({std::min<int64_t>(77, n - begin)});
    dequantize_blockwise(test_ctx(), tile, qz.q, qz.absmax, QuantCode::Nf4, block, begin);
    for (int64_t j = 0; j < tile.numel(); ++j) ASSERT_EQ(tile.f32()[j], y.f32()[begin + j]);
  }
}

// Double quantisation: the absmax values read back within the 8-bit dynamic map's error, and
// the weight stored in ~0.5 bytes per value plus the constants.
TEST(Quantize, DoubleQuantisedWeight) {
  const Tensor w = random_tensor({256, 384}, 9, -0.05, 0.05);
  const QuantizedWeight single = quantize_weight(test_ctx(), w, QuantCode::Nf4, 64, false);
  const QuantizedWeight dq = quantize_weight(test_ctx(), w, QuantCode::Nf4, 64, true);
  EXPECT_FALSE(dq.absmax.defined());
  const Tensor a0 = weight_absmax(test_ctx(), single), a1 = weight_absmax(test_ctx(), dq);
  for (int64_t b = 0; b < a0.numel(); ++b)
    ASSERT_NEAR(a1.f32()[b], a0.f32()[b], 0.01 * a0.f32()[b]) << b;
  EXPECT_TRUE(std::equal(single.q.data<uint8_t>(), single.q.data<uint8_t>() + single.q.numel(),
                         dq.q.data<uint8_t>()));
  const double per_value = static_cast<double>(dq.bytes()) / static_cast<double>(w.numel());
  EXPECT_LT(per_value, 0.5 + 1.0 / 64 + 0.001);  // QLoRA: 4.127 bits
  EXPECT_GT(static_cast<double>(single.bytes()) / static_cast<double>(w.numel()), 0.5 + 0.06);
  Tensor y = Tensor::empty({256, 384});
  dequantize_weight(test_ctx(), y, dq);
  for (int64_t i = 0; i < w.numel(); ++i)
    ASSERT_NEAR(y.f32()[i], w.f32()[i], 0.16 * 0.05) << i;  // half NF4 widest gap x absmax
}

// A non-zero offset is added to each value read back after the product, in f32 (double
// quantisation's absmax values: bitsandbytes adds the mean back that way); offset 0 adds nothing.
TEST(Quantize, OffsetIsAddedAfterTheProduct) {
  const int64_t n = 700, block = 256;
  const Tensor x = random_tensor({n}, 4, -1.0, 1.0);
  const Quantized d = quantize(x, QuantCode::Dynamic, block);
  Tensor y0 = Tensor::empty({n}), y1 = Tensor::empty({n}), yb = Tensor::empty({n}, DType::BF16);
  dequantize_blockwise(test_ctx(), y0, d.q, d.absmax, QuantCode::Dynamic, block);
  const float offset = 0.0371f;
  dequantize_blockwise(test_ctx(), y1, d.q, d.absmax, QuantCode::Dynamic, block, 0, offset);
  dequantize_blockwise(test_ctx(), yb, d.q, d.absmax, QuantCode::Dynamic, block, 0, offset);
  const Tensor y0b = dequantize(d, n, QuantCode::Dynamic, block);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y0.f32()[i], y0b.f32()[i]) << i;
    const float want = y0.f32()[i] + offset;
    ASSERT_EQ(y1.f32()[i], want) << i;
    ASSERT_EQ(bf16_to_float(yb.data<bf16>()[i]), bf16_to_float(float_to_bf16(want))) << i;
  }
  // A double-quantised weight's absmax values are read back the same way.
  const QuantizedWeight dq = quantize_weight(test_ctx(), random_tensor({64, 300}, 5, -0.05, 0.05),
                                             QuantCode::Nf4, 64, true);
  const Tensor a = weight_absmax(test_ctx(), dq);
  Tensor nested = Tensor::empty({dq.nested.numel()});
  dequantize_blockwise(test_ctx(), nested, dq.nested, dq.nested_absmax, QuantCode::Dynamic, 256);
  ASSERT_EQ(a.numel(), nested.numel());
  for (int64_t b = 0; b < a.numel(); ++b) ASSERT_EQ(a.f32()[b], nested.f32()[b] + dq.offset) << b;
}

// The quantised linear (one tile here; test_dequantize_tile.cpp runs several) equals the plain
// linear on the dequantised weight, forward and input gradient, f32 and bf16 activations.
TEST(Quantize, QuantisedLinearEqualsDequantisedLinear) {
  ExecContext& ctx = test_ctx();
  const int64_t N = 5, IN = 1000, OUT = 300;
  const kernel_test::QuantLinearCase c = kernel_test::quant_linear_case(ctx, N, IN, OUT, 11);
  const QuantizedWeight& qw = c.qw;
  const Tensor &wd = c.wd, &b = c.b, &x = c.x, &dy = c.dy;
  Tensor y = Tensor::empty({N, OUT}), y_ref = Tensor::empty({N, OUT});
  linear_forward_quantized(ctx, y, x, qw, b);
  linear_forward(ctx, y_ref, x, wd, b);
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.f32()[i], y_ref.f32()[i], 1e-4) << i;
  Tensor dx = Tensor::empty({N, IN}), dx_ref = Tensor::empty({N, IN});
  linear_backward_input_quantized(ctx, dx, dy, qw);
  linear_backward_input(ctx, dx_ref, dy, wd);
  for (int64_t i = 0; i < dx.numel(); ++i) ASSERT_NEAR(dx.f32()[i], dx_ref.f32()[i], 1e-4) << i;
  // bf16 activations: bf16 tiles into the bf16 GEMM, within bf16 rounding of the f32 result.
  const Tensor xb = x.to(DType::BF16, MemCategory::Activations);
  Tensor yb = Tensor::empty({N, OUT}, DType::BF16);
  linear_forward_quantized(ctx, yb, xb, qw, b);
  for (int64_t i = 0; i < yb.numel(); ++i)
    ASSERT_NEAR(bf16_to_float(yb.data<bf16>()[i]), y_ref.f32()[i],
                0.02 + 0.01 * std::fabs(y_ref.f32()[i]))
        << i;
}

class BitsandbytesReference : public ::testing::Test {
 protected:
  SafetensorsFile f = SafetensorsFile::open(std::string(BRAID_SOURCE_DIR) +
                                            "/tests/data/nf4_reference.safetensors");
};

TEST_F(BitsandbytesReference, DynamicMapsAreBitsandbytes) {
  for (const auto& [name, code] :
       {std::pair<const char*, QuantCode>{"dynamic_map", QuantCode::Dynamic},
        {"dynamic_map_unsigned", QuantCode::DynamicUnsigned}}) {
    const Tensor ref = f.get(name), mine = quant_code_table(code);
    ASSERT_EQ(ref.numel(), 256);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(mine.f32()[i], ref.f32()[i]) << name << " " << i;
  }
}

TEST_F(BitsandbytesReference, Nf4CodesAbsmaxAndDequantisation) {
  const Tensor x = f.get("x");
  const int64_t n = x.numel();
  const Quantized qz = quantize(x, QuantCode::Nf4, 64);
  const Tensor ref_q = f.get("nf4"), ref_a = f.get("nf4_absmax"), ref_y = f.get("nf4_dequant");
  ASSERT_EQ(qz.q.numel(), ref_q.numel());
  ASSERT_EQ(qz.absmax.numel(), ref_a.numel());
  int64_t wrong = 0;
  for (int64_t i = 0; i < ref_q.numel(); ++i)
    wrong += qz.q.data<uint8_t>()[i] != ref_q.data<uint8_t>()[i];
  EXPECT_EQ(wrong, 0) << "bytes differing from bitsandbytes";
  for (int64_t b = 0; b < ref_a.numel(); ++b) ASSERT_EQ(qz.absmax.f32()[b], ref_a.f32()[b]) << b;
  const Tensor y = dequantize(qz, n, QuantCode::Nf4, 64);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.f32()[i], ref_y.f32()[i]) << i;
}

// Counts the values whose code differs from bitsandbytes' and checks that ours is never
// further from the value than bitsandbytes' (bitsandbytes' C++ CPU 8-bit search is not an exact
// nearest-code search: it maps 0 to code 131 (2.1e-5) instead of 127 (0), and near-ties can go
// either way), so a difference is allowed only where braid's code is at least as close.
int64_t codes_no_worse_than(const Tensor& x, const Tensor& q, const Tensor& absmax,
                            const Tensor& ref_q, const Tensor& ref_absmax, int64_t block) {
  const Tensor table = quant_code_table(QuantCode::Dynamic);
  int64_t differ = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int a = q.data<uint8_t>()[i], b = ref_q.data<uint8_t>()[i];
    if (a == b) continue;
    ++differ;
    const float am = absmax.f32()[i / block];
    EXPECT_EQ(am, ref_absmax.f32()[i / block]);
    const float s = x.f32()[i] / am;
    EXPECT_LE(std::fabs(table.f32()[a] - s), std::fabs(table.f32()[b] - s) + 1e-7f) << i;
  }
  return differ;
}

TEST_F(BitsandbytesReference, DoubleQuantisationAndDynamic8Bit) {
  // The nested codes of absmax - offset (blocks of 256; three blocks, the last partial).
  const Tensor ref_a = f.get("nf4_absmax");
  const float ref_offset = f.get("nested_offset").f32()[0];
  const QuantizedWeight qw = quantize_weight(test_ctx(), f.get("x"), QuantCode::Nf4, 64, true);
  EXPECT_NEAR(qw.offset, ref_offset, 1e-6 * std::fabs(ref_offset));  // mean: summation order
  Tensor centred = Tensor::empty({ref_a.numel()});
  for (int64_t b = 0; b < ref_a.numel(); ++b) centred.f32()[b] = ref_a.f32()[b] - ref_offset;
  const Quantized nested = quantize(centred, QuantCode::Dynamic, 256);
  const Tensor ref_n = f.get("nested_absmax"), ref_n2 = f.get("nested_absmax2");
  for (int64_t b = 0; b < ref_n2.numel(); ++b)
    ASSERT_EQ(nested.absmax.f32()[b], ref_n2.f32()[b]) << b;
  EXPECT_LE(codes_no_worse_than(centred, nested.q, nested.absmax, ref_n, ref_n2, 256), 3);

  const Tensor x = f.get("x");
  const Quantized d8 = quantize(x, QuantCode::Dynamic, 2048);
  const Tensor ref_q8 = f.get("dyn8"), ref_a8 = f.get("dyn8_absmax"),
               ref_y8 = f.get("dyn8_dequant");
  // 64 of them are the zero block (bitsandbytes: code 131), the rest near-ties.
  EXPECT_LE(codes_no_worse_than(x, d8.q, d8.absmax, ref_q8, ref_a8, 2048), x.numel() / 200);
  // bitsandbytes' own dequantisation of its codes is code[q] * absmax, as ours.
  Quantized theirs{ref_q8, ref_a8};
  const Tensor y8 = dequantize(theirs, x.numel(), QuantCode::Dynamic, 2048);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(y8.f32()[i], ref_y8.f32()[i]) << i;
}

}  // namespace
}  // namespace braid
