// CPU block-wise quantisation and dequantisation (the per-element arithmetic is
// core/kernels/math/quantize.h). Blocks are independent, so both loops run over blocks in
// parallel and the result does not depend on the thread count.
#include "core/kernels/math/quantize.h"

#include <algorithm>
#include <cmath>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/math/dynamic_map.h"
#include "core/profile.h"

namespace braid::cpu {

namespace {

float load(const Tensor& x, const void* p, int64_t i) {
  if (x.dtype() == DType::BF16) return bf16_to_float(static_cast<const bf16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

const float* dynamic_table(QuantCode code) {
  return code == QuantCode::Dynamic ? math::kDynamicSigned : math::kDynamicUnsigned;
}

int encode(QuantCode code, float s) {
  switch (code) {
    case QuantCode::Nf4:
      return math::nf4_encode(s);
    case QuantCode::Int8:
      return math::int8_encode(s);
    case QuantCode::Dynamic:
    case QuantCode::DynamicUnsigned:
      return math::nearest_code(dynamic_table(code), 256, s);
  }
  return 0;
}

void check_values(const Tensor& t, const char* op, const char* name) {
  check_cpu(t, op, name);
  BRAID_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16,
              "{}: {} is {}, expected f32/bf16", op, name, t.str());
}

}  // namespace

void quantize_blockwise(ExecContext& ctx, Tensor& q, Tensor& absmax, const Tensor& x,
                        QuantCode code, int64_t block) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "quantize_blockwise";
  check_values(x, op, "x");
  check_cpu(q, op, "q");
  check_cpu(absmax, op, "absmax");
  const int64_t n = x.numel(), blocks = quant_blocks(n, block);
  const void* xp = x.raw();
  uint8_t* qp = q.data<uint8_t>();
  float* ap = absmax.f32();
  const bool nf4 = code == QuantCode::Nf4;
  // NF4 blocks of odd size would share a byte between blocks: pairs are written per block,
  // so NF4 takes even blocks only (every bitsandbytes block size is).
  BRAID_CHECK(!nf4 || block % 2 == 0, "{}: NF4 needs an even block size, got {}", op, block);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * block, i1 = std::min(n, i0 + block);
    float m = 0.0f;
    for (int64_t i = i0; i < i1; ++i) m = std::max(m, std::fabs(load(x, xp, i)));
    ap[b] = m;
    // bitsandbytes multiplies whole blocks by the reciprocal and divides the last partial one.
    const bool partial = i1 - i0 < block;
    const float am = std::max(m, 1e-38f), recip = math::block_scale(m);
    for (int64_t i = i0; i < i1; ++i) {
      const float v = load(x, xp, i);
      const int c = encode(code, math::clamp_unit(partial ? v / am : v * recip));
      if (!nf4) {
        qp[i] = static_cast<uint8_t>(c);
      } else if ((i & 1) == 0) {
        qp[i >> 1] = static_cast<uint8_t>(c << 4);  // the odd partner, if any, follows
      } else {
        qp[i >> 1] = static_cast<uint8_t>(qp[i >> 1] | c);
      }
    }
    // An odd n: the last byte's low nibble pads with the code of 0 (bitsandbytes pads x with 0).
    if (nf4 && (i1 & 1) && i1 == n) qp[i1 >> 1] = static_cast<uint8_t>(qp[i1 >> 1] | 7);
  }
}

void dequantize_blockwise(ExecContext& ctx, Tensor& y, const Tensor& q, const Tensor& absmax,
                          QuantCode code, int64_t block, int64_t begin, float offset) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "dequantize_blockwise";
  check_values(y, op, "y");
  check_cpu(q, op, "q");
  check_cpu(absmax, op, "absmax");
  const int64_t n = y.numel();
  const uint8_t* qp = q.data<uint8_t>();
  const float* ap = absmax.f32();
  const bool out_bf16 = y.dtype() == DType::BF16;
  float* yf = out_bf16 ? nullptr : y.f32();
  bf16* yb = out_bf16 ? y.data<bf16>() : nullptr;
  float table[256];
  const int entries = code == QuantCode::Nf4 ? 16 : 256;
  for (int i = 0; i < entries; ++i) {
    switch (code) {
      case QuantCode::Nf4:
        table[i] = math::nf4_value(i);
        break;
      case QuantCode::Int8:
        table[i] = math::int8_value(i);
        break;
      default:
        table[i] = dynamic_table(code)[i];
        break;
    }
  }
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t j1 = std::min(n, (c + 1) * kChunk);
    for (int64_t j = c * kChunk; j < j1; ++j) {
      const int64_t i = begin + j;
      const int k = code == QuantCode::Nf4 ? math::nf4_code_at(qp, i) : qp[i];
      float v = table[k] * ap[i / block];
      if (offset != 0.0f) v += offset;  // rounded apart from the product (no contraction)
      if (out_bf16)
        yb[j] = float_to_bf16(v);
      else
        yf[j] = v;
    }
  }
}

}  // namespace braid::cpu
