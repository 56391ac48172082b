// attention: argument checks and device dispatch of the public kernels (core/kernels/attention.h).
#include "core/kernels/attention.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/elementwise.h"

namespace braid {

namespace {

// Document masking (packed sequences) has a CPU kernel only.
void check_no_document_mask(const char* op, const Tensor& sample_starts) {
  BRAID_USER_CHECK(!sample_starts.defined(),
                   "{}: packed sequences (document-masked attention) run on the CPU only; set "
                   "data.packing: false or train.device: cpu",
                   op);
}

// q, k, v (B, T, heads, D) split from a packed qkv (B, T, 3 * heads * D).
struct SplitHeads {
  Tensor q, k, v;
};
SplitHeads split_heads(ExecContext& ctx, const Tensor& qkv, int64_t heads) {
  BRAID_CHECK(qkv.ndim() == 3 && qkv.dim(2) % 3 == 0 && heads > 0 && (qkv.dim(2) / 3) % heads == 0,
              "attention packed: qkv {} must be (B, T, 3 * heads * head_dim) with {} heads",
              shape_str(qkv.shape()), heads);
  const int64_t B = qkv.dim(0), T = qkv.dim(1), C = qkv.dim(2) / 3;
  SplitHeads s;
  s.q = qkv.new_empty({B, T, heads, C / heads}, qkv.dtype());
  s.k = qkv.new_empty({B, T, heads, C / heads}, qkv.dtype());
  s.v = qkv.new_empty({B, T, heads, C / heads}, qkv.dtype());
  Tensor q2 = s.q.view({B * T, C}), k2 = s.k.view({B * T, C}), v2 = s.v.view({B * T, C});
  split_columns(ctx, {&q2, &k2, &v2}, qkv.view({B * T, 3 * C}));
  return s;
}

}  // namespace

void attention_forward(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, int64_t window, const Tensor& sample_starts) {
  KernelArgs args(ctx, "attention_forward",
                  {{&out, "out"}, {&lse, "lse"}, {&q, "q"}, {&k, "k"}, {&v, "v"}});
  if (args.on_cpu()) return cpu::attention_forward(ctx, out, lse, q, k, v, window, sample_starts);
  check_no_document_mask("attention_forward", sample_starts);
#if BRAID_WITH_CUDA
  cuda::attention_forward(ctx, out, lse, q, k, v, window);
#else
  args.cuda_absent<void>();
#endif
}

void attention_backward(ExecContext& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, int64_t window, const Tensor& sample_starts) {
  KernelArgs args(ctx, "attention_backward",
                  {{&dq, "dq"},
                   {&dk, "dk"},
                   {&dv, "dv"},
                   {&dout, "dout"},
                   {&q, "q"},
                   {&k, "k"},
                   {&v, "v"},
                   {&out, "out"},
                   {&lse, "lse"}});
  if (args.on_cpu())
    return cpu::attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse, window, sample_starts);
  check_no_document_mask("attention_backward", sample_starts);
#if BRAID_WITH_CUDA
  cuda::attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse, window);
#else
  args.cuda_absent<void>();
#endif
}

void attention_forward_packed(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& qkv,
                              int64_t heads, int64_t window, const Tensor& sample_starts) {
  KernelArgs args(ctx, "attention_forward_packed", {{&out, "out"}, {&lse, "lse"}, {&qkv, "qkv"}});
  if (args.on_cpu())
    return cpu::attention_forward_packed(ctx, out, lse, qkv, heads, window, sample_starts);
  const SplitHeads s = split_heads(ctx, qkv, heads);
  attention_forward(ctx, out, lse, s.q, s.k, s.v, window, sample_starts);
}

void attention_backward_packed(ExecContext& ctx, Tensor& dqkv, const Tensor& dout,
                               const Tensor& qkv, const Tensor& out, const Tensor& lse,
                               int64_t heads, int64_t window, const Tensor& sample_starts) {
  KernelArgs args(ctx, "attention_backward_packed",
                  {{&dqkv, "dqkv"}, {&dout, "dout"}, {&qkv, "qkv"}, {&out, "out"}, {&lse, "lse"}});
  if (args.on_cpu())
    return cpu::attention_backward_packed(ctx, dqkv, dout, qkv, out, lse, heads, window,
                                          sample_starts);
  check_shape(dqkv, qkv.shape(), "attention_backward_packed dqkv");
  const SplitHeads s = split_heads(ctx, qkv, heads);
  Tensor dq = empty_like(s.q), dk = empty_like(s.k), dv = empty_like(s.v);
  attention_backward(ctx, dq, dk, dv, dout, s.q, s.k, s.v, out, lse, window, sample_starts);
  const int64_t B = qkv.dim(0), T = qkv.dim(1), C = qkv.dim(2) / 3;
  Tensor dqkv2 = dqkv.view({B * T, 3 * C});
  const Tensor dq2 = dq.view({B * T, C}), dk2 = dk.view({B * T, C}), dv2 = dv.view({B * T, C});
  concat_columns(ctx, dqkv2, {&dq2, &dk2, &dv2});
}

}  // namespace braid
