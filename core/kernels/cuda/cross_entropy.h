// Launchers of the softmax cross-entropy kernels (core/kernels/cuda/cross_entropy.cu): the row
// pass of the fused LM head, the loss sum, the target check, and the vocab-parallel steps.
// Pointers are device memory, dtype codes are braid::DType values, `stream` is a cudaStream_t.
#pragma once

#include <cstdint>

namespace braid::cuda {

// Rows of the fused LM head per chunk: the (rows, vocab) f32 logits scratch stays under 256 MiB
// (and a 16-bit copy of the gradient under 128 MiB), at least one row, at most n.
int64_t lm_head_chunk_rows(int64_t n, int64_t vocab);

// bad[0] <- the first i with targets[i] outside [-1, limit), or n when there is none;
// bad[1] <- that target. targets: (n) i32.
void launch_find_bad_target(void* stream, int64_t* bad, const int32_t* targets, int64_t n,
                            int64_t limit);

// One chunk of the fused LM head: logits (rows, V) f32; losses (rows) <- -log softmax[target]
// (0 for a target of -1). When grad is not null it receives grad_scale * (softmax - onehot),
// 0 in ignored rows, in dtype tgrad (grad may be logits itself when tgrad is f32).
void launch_xent_rows(void* stream, float* logits, void* grad, int tgrad, float* losses,
                      const int32_t* targets, int64_t rows, int64_t V, float grad_scale);

// out[0] <- sum of losses[i] (in double) over rows with targets[i] >= 0, out[1] <- their count.
void launch_loss_sum(void* stream, double* out, const float* losses, const int32_t* targets,
                     int64_t n);

// The vocab-parallel steps on an (N, rows) f32 logits block whose first `real` columns are real
// vocabulary rows starting at row_begin (core/kernels/cross_entropy.h says what each does).
void launch_vocab_slice_partials(void* stream, float* row_max, float* target_logit,
                                 const float* logits, const int32_t* targets, int64_t N,
                                 int64_t rows, int64_t real, int64_t row_begin);
void launch_vocab_slice_exp(void* stream, float* logits, float* sum_exp, const float* row_max,
                            int64_t N, int64_t rows, int64_t real);
void launch_vocab_slice_losses(void* stream, float* losses, const float* sum_exp,
                               const float* row_max, const float* target_logit,
                               const int32_t* targets, int64_t N);
void launch_vocab_slice_grad(void* stream, float* logits, const float* sum_exp,
                             const int32_t* targets, int64_t N, int64_t rows, int64_t real,
                             int64_t row_begin, float grad_scale);

}  // namespace braid::cuda
