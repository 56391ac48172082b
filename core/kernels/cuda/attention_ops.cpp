// CUDA causal attention with grouped-query heads and an optional sliding window
// (core/kernels/attention.h): argument checks,
// then cuDNN's fused attention where it takes the case (cudnn_attention.h), else the flash-style
// kernels of attention.cu, on the context's stream. q, k, v, out and the
// gradients share one dtype on the kernels' path; a call mixing dtypes runs on f32 copies.
#include <cuda_runtime.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "core/kernels/cuda/attention.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/cudnn_attention.h"
#include "core/kernels/cuda/f32_staging.h"
#include "core/kernels/cuda/ops_util.h"
#include "core/profile.h"

namespace braid::cuda {

namespace {

AttnDims check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  check_float(q, op, "q");
  check_float(k, op, "k");
  check_float(v, op, "v");
  BRAID_CHECK(q.ndim() == 4 && k.ndim() == 4, "{}: q {} and k {} must be (B, T, H, D)", op, q.str(),
              k.str());
  const AttnDims d{q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3)};
  BRAID_CHECK(k.dim(0) == d.B && k.dim(3) == d.D, "{}: k {} does not match q {}", op, k.str(),
              q.str());
  check_shape(v, k.shape(), "v");
  BRAID_CHECK(d.Hkv > 0 && d.Hq % d.Hkv == 0,
              "{}: {} query heads are not a multiple of {} kv heads", op, d.Hq, d.Hkv);
  BRAID_CHECK(d.Tq <= d.Tk, "{}: {} query rows but only {} keys", op, d.Tq, d.Tk);
  BRAID_CHECK(d.D <= kAttentionMaxHeadDim,
              "{}: head dimension {} is above the CUDA kernel's limit of {}; run with "
              "train.device: cpu",
              op, d.D, kAttentionMaxHeadDim);
  return d;
}

void check_lse(const Tensor& lse, const AttnDims& d, const char* op) {
  BRAID_CHECK(lse.defined() && lse.dtype() == DType::F32, "{}: lse is {}; expected f32", op,
              lse.defined() ? lse.str() : std::string("undefined"));
  check_shape(lse, {d.B, d.Hq, d.Tq}, "lse");
}

int64_t check_window(const char* op, int64_t window) {
  BRAID_CHECK(window >= 0, "{}: sliding window {} is negative", op, window);
  return window;
}

bool same_dtype(std::initializer_list<const Tensor*> ts) {
  const DType first = (*ts.begin())->dtype();
  for (const Tensor* t : ts)
    if (t->dtype() != first) return false;
  return true;
}

}  // namespace

void attention_forward(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, int64_t window, bool allow_cudnn) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Attention);
  const char* op = "attention_forward";
  AttnDims d = check_qkv(op, q, k, v);
  d.window = check_window(op, window);
  check_float(out, op, "out");
  check_shape(out, q.shape(), "out");
  check_lse(lse, d, op);
  if (!same_dtype({&out, &q, &k, &v})) {
    F32Staging s(ctx);
    Tensor out32 = s.out(out);
    cuda::attention_forward(ctx, out32, lse, s.in(q), s.in(k), s.in(v), window, allow_cudnn);
    return s.finish();
  }
  if (out.numel() == 0) return;
  if (allow_cudnn && cudnn_attention_forward(ctx, out, lse, q, k, v, window)) return;
  launch_attention_forward(stream_of(ctx), out.raw(), lse.f32(), q.raw(), k.raw(), v.raw(), code(q),
                           d);
  check_launch(op);
}

void attention_backward(ExecContext& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, int64_t window, bool allow_cudnn) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Attention);
  const char* op = "attention_backward";
  AttnDims d = check_qkv(op, q, k, v);
  d.window = check_window(op, window);
  for (auto [t, name] : {std::pair<const Tensor*, const char*>{&dq, "dq"},
                         {&dk, "dk"},
                         {&dv, "dv"},
                         {&dout, "dout"},
                         {&out, "out"}})
    check_float(*t, op, name);
  check_shape(dq, q.shape(), "dq");
  check_shape(dout, q.shape(), "dout");
  check_shape(out, q.shape(), "out");
  check_shape(dk, k.shape(), "dk");
  check_shape(dv, k.shape(), "dv");
  check_lse(lse, d, op);
  if (!same_dtype({&dq, &dk, &dv, &dout, &q, &k, &v, &out})) {
    F32Staging s(ctx);
    Tensor dq32 = s.out(dq), dk32 = s.out(dk), dv32 = s.out(dv);
    cuda::attention_backward(ctx, dq32, dk32, dv32, s.in(dout), s.in(q), s.in(k), s.in(v),
                             s.in(out), lse, window, allow_cudnn);
    return s.finish();
  }
  if (dq.numel() == 0) {  // no queries: nothing flows back to the keys and values
    cuda::zero(ctx, dk);
    cuda::zero(ctx, dv);
    return;
  }
  if (allow_cudnn && cudnn_attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse, window))
    return;
  // delta (B, Hq, Tq): dout . out per query row, the softmax backward's row term.
  Tensor delta = ctx.empty({d.B, d.Hq, d.Tq}, DType::F32, MemCategory::Workspace);
  launch_attention_backward(stream_of(ctx), dq.raw(), dk.raw(), dv.raw(), delta.f32(), dout.raw(),
                            q.raw(), k.raw(), v.raw(), out.raw(), lse.f32(), code(q), d);
  check_launch(op);
}

}  // namespace braid::cuda
