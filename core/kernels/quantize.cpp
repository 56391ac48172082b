// quantize: argument checks, device dispatch and the QuantizedWeight helpers
// (core/kernels/quantize.h).
#include "core/kernels/quantize.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/math/dynamic_map.h"
#include "core/kernels/math/quantize.h"

namespace braid {

int64_t quant_code_bytes(QuantCode code, int64_t n) {
  return code == QuantCode::Nf4 ? (n + 1) / 2 : n;
}

Tensor quant_code_table(QuantCode code) {
  std::vector<float> v;
  switch (code) {
    case QuantCode::Nf4:
      for (int i = 0; i < 16; ++i) v.push_back(math::nf4_value(i));
      break;
    case QuantCode::Int8:
      for (int i = 0; i < 256; ++i) v.push_back(math::int8_value(i));
      break;
    case QuantCode::Dynamic:
      v.assign(math::kDynamicSigned, math::kDynamicSigned + 256);
      break;
    case QuantCode::DynamicUnsigned:
      v.assign(math::kDynamicUnsigned, math::kDynamicUnsigned + 256);
      break;
  }
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
}

void quantize_blockwise(ExecContext& ctx, Tensor& q, Tensor& absmax, const Tensor& x,
                        QuantCode code, int64_t block) {
  KernelArgs args(ctx, "quantize_blockwise", {{&q, "q"}, {&absmax, "absmax"}, {&x, "x"}});
  BRAID_CHECK(block > 0, "quantize_blockwise: block {}", block);
  BRAID_CHECK(code != QuantCode::Nf4 || block % 2 == 0,
              "quantize_blockwise: NF4 needs an even block size, got {}", block);
  BRAID_CHECK(q.dtype() == DType::U8 && q.numel() == quant_code_bytes(code, x.numel()),
              "quantize_blockwise: q is {}, expected u8 of {} bytes", q.str(),
              quant_code_bytes(code, x.numel()));
  BRAID_CHECK(absmax.dtype() == DType::F32 && absmax.numel() == quant_blocks(x.numel(), block),
              "quantize_blockwise: absmax is {}, expected f32 of {} blocks", absmax.str(),
              quant_blocks(x.numel(), block));
  BRAID_DISPATCH(args, quantize_blockwise, ctx, q, absmax, x, code, block);
}

void dequantize_blockwise(ExecContext& ctx, Tensor& y, const Tensor& q, const Tensor& absmax,
                          QuantCode code, int64_t block, int64_t begin, float offset) {
  KernelArgs args(ctx, "dequantize_blockwise", {{&y, "y"}, {&q, "q"}, {&absmax, "absmax"}});
  BRAID_CHECK(block > 0 && begin >= 0, "dequantize_blockwise: block {}, begin {}", block, begin);
  BRAID_CHECK(q.dtype() == DType::U8, "dequantize_blockwise: q is {}, expected u8", q.str());
  BRAID_CHECK(absmax.dtype() == DType::F32, "dequantize_blockwise: absmax is {}, expected f32",
              absmax.str());
  const int64_t end = begin + y.numel();
  BRAID_CHECK(
      quant_code_bytes(code, end) <= q.numel() && quant_blocks(end, block) <= absmax.numel(),
      "dequantize_blockwise: values [{}, {}) past q {} / absmax {}", begin, end, q.str(),
      absmax.str());
  BRAID_DISPATCH(args, dequantize_blockwise, ctx, y, q, absmax, code, block, begin, offset);
}

int64_t QuantizedWeight::numel() const { return shape_numel(shape); }

int64_t QuantizedWeight::bytes() const {
  int64_t b = 0;
  for (const Tensor* t : {&q, &absmax, &nested, &nested_absmax})
    if (t->defined()) b += static_cast<int64_t>(t->nbytes());
  return b + static_cast<int64_t>(sizeof(offset));
}

QuantizedWeight quantize_weight(ExecContext& ctx, const Tensor& w, QuantCode code, int64_t block,
                                bool double_quant) {
  QuantizedWeight qw;
  qw.code = code;
  qw.block = block;
  qw.shape = w.shape();
  const int64_t n = w.numel(), blocks = quant_blocks(n, block);
  qw.q = ctx.empty({quant_code_bytes(code, n)}, DType::U8, MemCategory::Weights);
  Tensor absmax = ctx.empty({blocks}, DType::F32, MemCategory::Workspace);
  quantize_blockwise(ctx, qw.q, absmax, w, code, block);
  if (!double_quant) {
    qw.absmax = ctx.empty({blocks}, DType::F32, MemCategory::Weights);
    qw.absmax.copy_from(absmax);
    return qw;
  }
  // Centre on the mean (f32, as bitsandbytes' absmax.mean()), then 8-bit dynamic codes.
  Tensor host = absmax.to_host();
  float* a = host.f32();
  double sum = 0.0;
  for (int64_t i = 0; i < blocks; ++i) sum += a[i];
  qw.offset = static_cast<float>(sum / static_cast<double>(blocks));
  for (int64_t i = 0; i < blocks; ++i) a[i] -= qw.offset;
  if (host.raw() != absmax.raw()) absmax.copy_from(host);
  qw.nested = ctx.empty({blocks}, DType::U8, MemCategory::Weights);
  qw.nested_absmax =
      ctx.empty({quant_blocks(blocks, kNestedBlock)}, DType::F32, MemCategory::Weights);
  quantize_blockwise(ctx, qw.nested, qw.nested_absmax, absmax, QuantCode::Dynamic, kNestedBlock);
  return qw;
}

Tensor weight_absmax(ExecContext& ctx, const QuantizedWeight& qw) {
  if (!qw.nested.defined()) return qw.absmax;
  const int64_t blocks = qw.nested.numel();
  Tensor a = ctx.empty({blocks}, DType::F32, MemCategory::Workspace);
  dequantize_blockwise(ctx, a, qw.nested, qw.nested_absmax, QuantCode::Dynamic, kNestedBlock, 0,
                       qw.offset);
  return a;
}

void dequantize_weight(ExecContext& ctx, Tensor& y, const QuantizedWeight& qw) {
  BRAID_CHECK(y.numel() == qw.numel(), "dequantize_weight: y is {}, the weight has {} values",
              y.str(), qw.numel());
  const Tensor absmax = weight_absmax(ctx, qw);
  dequantize_blockwise(ctx, y, qw.q, absmax, qw.code, qw.block);
}

void linear_forward_quantized(ExecContext& ctx, Tensor& y, const Tensor& x,
                              const QuantizedWeight& w, const Tensor& b) {
  KernelArgs args(ctx, "linear_forward_quantized", {{&y, "y"}, {&x, "x"}, {&w.q, "w"}, {&b, "b"}});
  BRAID_DISPATCH(args, linear_forward_quantized, ctx, y, x, w, b);
}

void linear_backward_input_quantized(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                     const QuantizedWeight& w, bool accumulate) {
  KernelArgs args(ctx, "linear_backward_input_quantized", {{&dx, "dx"}, {&dy, "dy"}, {&w.q, "w"}});
  BRAID_DISPATCH(args, linear_backward_input_quantized, ctx, dx, dy, w, accumulate);
}

}  // namespace braid
