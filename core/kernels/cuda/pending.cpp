// CUDA kernels not written yet: each fails naming the op, so a GPU run stops with a clear message
// at the first op that has no kernel instead of reaching a host loop with device pointers. An op
// leaves this list when its .cu/.cpp pair lands (core/kernels/cuda/cuda_kernels.h).
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dropout.h"

namespace braid::cuda {

namespace {
[[noreturn]] void pending(const char* op) {
  throw UserError(
      fmt::format("no CUDA kernel for {} yet: run this configuration with "
                  "train.device: cpu",
                  op));
}
}  // namespace

void attention_forward(ExecContext&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                       const Tensor&) {
  pending("attention_forward");
}
void attention_backward(ExecContext&, Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                        const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  pending("attention_backward");
}
void lm_head_cross_entropy(ExecContext&, Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, float) {
  pending("lm_head_cross_entropy");
}
LossSum loss_sum(ExecContext&, const Tensor&, const Tensor&) { pending("loss_sum"); }
void vocab_slice_partials(ExecContext&, Tensor&, Tensor&, const Tensor&, const Tensor&,
                          const VocabSlice&) {
  pending("vocab_slice_partials");
}
void vocab_slice_exp(ExecContext&, Tensor&, Tensor&, const Tensor&, const VocabSlice&) {
  pending("vocab_slice_exp");
}
void vocab_slice_losses(ExecContext&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&) {
  pending("vocab_slice_losses");
}
void vocab_slice_grad(ExecContext&, Tensor&, const Tensor&, const Tensor&, const VocabSlice&,
                      float) {
  pending("vocab_slice_grad");
}
void linear_forward(ExecContext&, Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  pending("linear_forward");
}
void linear_backward_input(ExecContext&, Tensor&, const Tensor&, const Tensor&, bool) {
  pending("linear_backward_input");
}
void linear_backward_weight(ExecContext&, Tensor&, Tensor&, const Tensor&, const Tensor&) {
  pending("linear_backward_weight");
}
void adamw_update(ExecContext&, Tensor&, Tensor&, Tensor&, const Tensor&, const AdamWStep&) {
  pending("adamw_update");
}

}  // namespace braid::cuda
