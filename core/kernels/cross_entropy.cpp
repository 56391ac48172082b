// cross_entropy: argument checks and device dispatch of the public kernels
// (core/kernels/cross_entropy.h).
#include "core/kernels/cross_entropy.h"

#include <algorithm>

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"

namespace braid {

void lm_head_cross_entropy(ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw,
                           const Tensor& x, const Tensor& w, const Tensor& targets,
                           float grad_scale) {
  KernelArgs args(
      ctx, "lm_head_cross_entropy",
      {{&losses, "losses"}, {&dx, "dx"}, {&dw, "dw"}, {&x, "x"}, {&w, "w"}, {&targets, "targets"}});
  BRAID_DISPATCH(args, lm_head_cross_entropy, ctx, losses, dx, dw, x, w, targets, grad_scale);
}

LossSum loss_sum(ExecContext& ctx, const Tensor& losses, const Tensor& targets) {
  KernelArgs args(ctx, "loss_sum", {{&losses, "losses"}, {&targets, "targets"}});
  return BRAID_DISPATCH(args, loss_sum, ctx, losses, targets);
}

int64_t lm_head_chunk_rows(ExecContext& ctx, int64_t n, int64_t vocab) {
  KernelArgs args(ctx, "lm_head_chunk_rows", {});
  return BRAID_DISPATCH(args, lm_head_chunk_rows, ctx, n, vocab);
}

bool lm_head_rounds_grad(ExecContext& ctx, DType x, DType w) {
  if (x != w || (w != DType::BF16 && w != DType::F16)) return false;
  KernelArgs args(ctx, "lm_head_rounds_grad", {});
  return BRAID_DISPATCH(args, lm_head_rounds_grad, ctx, w);
}

void check_loss_targets(ExecContext& ctx, const Tensor& targets, int64_t vocab, const char* op) {
  KernelArgs args(ctx, op, {{&targets, "targets"}});
  BRAID_DISPATCH(args, check_loss_targets, ctx, targets, vocab, op);
}

int64_t VocabSlice::real(int64_t rows) const {
  return std::max<int64_t>(0, std::min(rows, vocab - row_begin));
}

void vocab_slice_partials(ExecContext& ctx, Tensor& row_max, Tensor& target_logit,
                          const Tensor& logits, const Tensor& targets, const VocabSlice& slice) {
  KernelArgs args(ctx, "vocab_slice_partials",
                  {{&row_max, "row_max"},
                   {&target_logit, "target_logit"},
                   {&logits, "logits"},
                   {&targets, "targets"}});
  BRAID_DISPATCH(args, vocab_slice_partials, ctx, row_max, target_logit, logits, targets, slice);
}

void vocab_slice_exp(ExecContext& ctx, Tensor& logits, Tensor& sum_exp, const Tensor& row_max,
                     const VocabSlice& slice) {
  KernelArgs args(ctx, "vocab_slice_exp",
                  {{&logits, "logits"}, {&sum_exp, "sum_exp"}, {&row_max, "row_max"}});
  BRAID_DISPATCH(args, vocab_slice_exp, ctx, logits, sum_exp, row_max, slice);
}

void vocab_slice_losses(ExecContext& ctx, Tensor& losses, const Tensor& sum_exp,
                        const Tensor& row_max, const Tensor& target_logit, const Tensor& targets) {
  KernelArgs args(ctx, "vocab_slice_losses",
                  {{&losses, "losses"},
                   {&sum_exp, "sum_exp"},
                   {&row_max, "row_max"},
                   {&target_logit, "target_logit"},
                   {&targets, "targets"}});
  BRAID_DISPATCH(args, vocab_slice_losses, ctx, losses, sum_exp, row_max, target_logit, targets);
}

void vocab_slice_grad(ExecContext& ctx, Tensor& logits, const Tensor& sum_exp,
                      const Tensor& targets, const VocabSlice& slice, float grad_scale) {
  KernelArgs args(ctx, "vocab_slice_grad",
                  {{&logits, "logits"}, {&sum_exp, "sum_exp"}, {&targets, "targets"}});
  BRAID_DISPATCH(args, vocab_slice_grad, ctx, logits, sum_exp, targets, slice, grad_scale);
}

}  // namespace braid
