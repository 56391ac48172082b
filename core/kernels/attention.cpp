// attention: argument checks and device dispatch of the public kernels (core/kernels/attention.h).
#include "core/kernels/attention.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

namespace {

// Document masking (packed sequences) has a CPU kernel only.
void check_no_document_mask(const char* op, const Tensor& sample_starts) {
  BRAID_USER_CHECK(!sample_starts.defined(),
                   "{}: packed sequences (document-masked attention) run on the CPU only; set "
                   "data.packing: false or train.device: cpu",
                   op);
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
    return cpu::attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse, window,
                                   sample_starts);
  check_no_document_mask("attention_backward", sample_starts);
#if BRAID_WITH_CUDA
  cuda::attention_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse, window);
#else
  args.cuda_absent<void>();
#endif
}

}  // namespace braid
