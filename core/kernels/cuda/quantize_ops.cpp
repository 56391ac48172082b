// CUDA block-wise quantisation (core/kernels/quantize.h) and the linear layer over a quantised
// weight: the weight is dequantised into workspace in the activations' dtype and multiplied by
// the cuBLASLt GEMM of the ordinary linear layer (core/kernels/cuda/linear_ops.cpp). The
// workspace holds the whole weight read back for the duration of the call.
#include <algorithm>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/kernels/cuda/quantize.h"
#include "core/profile.h"

namespace braid::cuda {

namespace {

QuantTable table_of(QuantCode code) {
  const Tensor t = quant_code_table(code);  // on the host
  QuantTable q{};
  q.n = static_cast<int>(std::min<int64_t>(t.numel(), 256));
  std::copy(t.f32(), t.f32() + q.n, q.v);
  q.kind = static_cast<int>(code);
  return q;
}

// Quantised values in and out: f32 or bf16, as on the CPU.
void check_values(const Tensor& t, const char* op, const char* name) {
  BRAID_CHECK(t.defined() && (t.dtype() == DType::F32 || t.dtype() == DType::BF16),
              "{}: {} is {}, expected f32/bf16", op, name, t.defined() ? t.str() : "undefined");
}

// A quantised linear layer's activations: any float dtype, as on the CPU.
void check_activations(const Tensor& t, const char* op, const char* name) {
  BRAID_CHECK(t.defined() &&
                  (t.dtype() == DType::F32 || t.dtype() == DType::BF16 || t.dtype() == DType::F16),
              "{}: {} is {}, expected f32/bf16/f16", op, name, t.defined() ? t.str() : "undefined");
}

// The dtype the weight is read back in for activations of dtype `act`: bf16 GEMMs take it in
// bf16; f32 and f16 activations multiply an f32 weight (the GEMM widens f16 activations and
// rounds the output once), as the CPU's quantised linear does.
DType weight_dtype(DType act) { return act == DType::BF16 ? DType::BF16 : DType::F32; }

// w read back whole in `dt` (f32 or bf16), in workspace.
Tensor read_back(ExecContext& ctx, const QuantizedWeight& w, DType dt, const char* op) {
  BRAID_CHECK(w.defined() && w.shape.size() == 2, "{}: the weight must be a quantised (OUT, IN)",
              op);
  const Tensor absmax = weight_absmax(ctx, w);
  Tensor t = ctx.empty(w.shape, dt, MemCategory::Workspace);
  cuda::dequantize_blockwise(ctx, t, w.q, absmax, w.code, w.block, 0, 0.0f);
  return t;
}

}  // namespace

// Shapes are checked by the public op (core/kernels/quantize.cpp).
void quantize_blockwise(ExecContext& ctx, Tensor& q, Tensor& absmax, const Tensor& x,
                        QuantCode code, int64_t block) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  check_values(x, "quantize_blockwise", "x");
  launch_quantize_blockwise(stream_of(ctx), q.data<uint8_t>(), absmax.f32(), x.raw(), cuda::code(x),
                            x.numel(), block, table_of(code));
  check_launch("quantize_blockwise");
}

void dequantize_blockwise(ExecContext& ctx, Tensor& y, const Tensor& q, const Tensor& absmax,
                          QuantCode code, int64_t block, int64_t begin, float offset) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Elementwise);
  const char* op = "dequantize_blockwise";
  check_values(y, op, "y");
  BRAID_CHECK(q.dtype() == DType::U8 && absmax.dtype() == DType::F32, "{}: q {} / absmax {}", op,
              q.str(), absmax.str());
  launch_dequantize_blockwise(stream_of(ctx), y.raw(), cuda::code(y), q.data<uint8_t>(),
                              absmax.f32(), begin, y.numel(), block, table_of(code), offset);
  check_launch(op);
}

void linear_forward_quantized(ExecContext& ctx, Tensor& y, const Tensor& x,
                              const QuantizedWeight& w, const Tensor& b) {
  const char* op = "linear_forward_quantized";
  check_activations(x, op, "x");
  const Tensor wd = read_back(ctx, w, weight_dtype(x.dtype()), op);
  cuda::linear_forward(ctx, y, x, wd, b);
}

void linear_backward_input_quantized(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                     const QuantizedWeight& w, bool accumulate) {
  const char* op = "linear_backward_input_quantized";
  check_activations(dy, op, "dy");
  const Tensor wd = read_back(ctx, w, weight_dtype(dy.dtype()), op);
  cuda::linear_backward_input(ctx, dx, dy, wd, accumulate);
}

}  // namespace braid::cuda
