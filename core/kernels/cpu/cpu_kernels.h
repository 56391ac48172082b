// The CPU implementations behind the public kernels (core/kernels/*.h), same arguments.
// Only the public functions call these, after checking that every tensor is on the host.
#pragma once

#include "core/kernels/activation.h"
#include "core/kernels/attention.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/embedding.h"
#include "core/kernels/layernorm.h"
#include "core/kernels/linear.h"
#include "core/kernels/optimizer.h"
#include "core/kernels/quantize.h"
#include "core/kernels/rmsnorm.h"
#include "core/kernels/rope.h"
#include "core/kernels/seq_reorder.h"
#include "core/kernels/shard_copy.h"

namespace braid::cpu {

void gelu_forward(ExecContext& ctx, Tensor& y, const Tensor& x);
void gelu_backward(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& x);
void gelu_forward_with_derivative(ExecContext& ctx, Tensor& y, Tensor& dydx, const Tensor& x);
void gelu_backward_with_derivative(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                   const Tensor& dydx);
void swiglu_forward(ExecContext& ctx, Tensor& y, const Tensor& gate, const Tensor& up);
void swiglu_backward(ExecContext& ctx, Tensor& dgate, Tensor& dup, const Tensor& dy,
                     const Tensor& gate, const Tensor& up);
void attention_forward(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, int64_t window, const Tensor& sample_starts);
void attention_backward(ExecContext& ctx, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, int64_t window, const Tensor& sample_starts);
void attention_forward_packed(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& qkv,
                              int64_t heads, int64_t window, const Tensor& sample_starts);
void attention_backward_packed(ExecContext& ctx, Tensor& dqkv, const Tensor& dout,
                               const Tensor& qkv, const Tensor& out, const Tensor& lse,
                               int64_t heads, int64_t window, const Tensor& sample_starts);
void lm_head_cross_entropy(ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw,
                           const Tensor& x, const Tensor& w, const Tensor& targets,
                           float grad_scale);
LossSum loss_sum(ExecContext& ctx, const Tensor& losses, const Tensor& targets);
int64_t lm_head_chunk_rows(ExecContext& ctx, int64_t n, int64_t vocab);
bool lm_head_rounds_grad(ExecContext& ctx, DType w);  // x and w both of the 16-bit dtype w
void check_loss_targets(ExecContext& ctx, const Tensor& targets, int64_t vocab, const char* op);
void vocab_slice_partials(ExecContext& ctx, Tensor& row_max, Tensor& target_logit,
                          const Tensor& logits, const Tensor& targets, const VocabSlice& slice);
void vocab_slice_exp(ExecContext& ctx, Tensor& logits, Tensor& sum_exp, const Tensor& row_max,
                     const VocabSlice& slice);
void vocab_slice_losses(ExecContext& ctx, Tensor& losses, const Tensor& sum_exp,
                        const Tensor& row_max, const Tensor& target_logit, const Tensor& targets);
void vocab_slice_grad(ExecContext& ctx, Tensor& logits, const Tensor& sum_exp,
                      const Tensor& targets, const VocabSlice& slice, float grad_scale);
void add(ExecContext& ctx, Tensor& y, const Tensor& a, const Tensor& b);
void add_inplace(ExecContext& ctx, Tensor& y, const Tensor& x);
void zero(ExecContext& ctx, Tensor& x);
void scale_inplace(ExecContext& ctx, Tensor& x, float s);
double sum_squares(ExecContext& ctx, const Tensor& x);
std::vector<double> sum_squares_each(ExecContext& ctx, const std::vector<Tensor>& xs);
void cast(ExecContext& ctx, Tensor& dst, const Tensor& src);
void split_columns(ExecContext& ctx, const std::vector<Tensor*>& parts, const Tensor& src);
void concat_columns(ExecContext& ctx, Tensor& dst, const std::vector<const Tensor*>& parts);
void copy_rows(ExecContext& ctx, Tensor& dst, int64_t row, const Tensor& src);
void embedding_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                       const Tensor& wpe, int64_t pos_offset);
void embedding_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                        const Tensor& tokens, int64_t pos_offset);
void embedding_rows_forward(ExecContext& ctx, Tensor& out, const Tensor& tokens, const Tensor& wte,
                            const Tensor& wpe, int64_t row_begin, int64_t vocab,
                            int64_t pos_offset);
void embedding_rows_backward(ExecContext& ctx, Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                             const Tensor& tokens, int64_t row_begin);
void layernorm_forward(ExecContext& ctx, Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x,
                       const Tensor& w, const Tensor& b, float eps);
void layernorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, Tensor& db, const Tensor& dy,
                        const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd);
void linear_forward(ExecContext& ctx, Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    bool accumulate = false);
void linear_backward_input(ExecContext& ctx, Tensor& dx, const Tensor& dy, const Tensor& w,
                           bool accumulate);
void linear_backward_weight(ExecContext& ctx, Tensor& dw, Tensor& db, const Tensor& dy,
                            const Tensor& x, bool overwrite);
void rmsnorm_forward(ExecContext& ctx, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w,
                     float eps);
void rmsnorm_backward(ExecContext& ctx, Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd);
void rope_forward(ExecContext& ctx, Tensor& x, int64_t pos_offset, const RopeScaling& rope);
void rope_backward(ExecContext& ctx, Tensor& dx, int64_t pos_offset, const RopeScaling& rope);
void seq_to_blocks(ExecContext& ctx, Tensor& blocks, const Tensor& seq, int n);
void blocks_to_seq(ExecContext& ctx, Tensor& seq, const Tensor& blocks, int n);
void extract_ranges(ExecContext& ctx, Tensor& part, const Tensor& whole, int dim,
                    const IndexRanges& ranges);
void insert_ranges(ExecContext& ctx, Tensor& whole, const Tensor& part, int dim,
                   const IndexRanges& ranges);
void adamw_update(ExecContext& ctx, Tensor& w, Tensor& m, Tensor& v, const Tensor& g,
                  const AdamWStep& s, Tensor* rounded);
void adamw8bit_update(ExecContext& ctx, Tensor& w, Tensor& m_codes, Tensor& m_absmax,
                      Tensor& v_codes, Tensor& v_absmax, const Tensor& g, const AdamWStep& s);
void quantize_blockwise(ExecContext& ctx, Tensor& q, Tensor& absmax, const Tensor& x,
                        QuantCode code, int64_t block);
void dequantize_blockwise(ExecContext& ctx, Tensor& y, const Tensor& q, const Tensor& absmax,
                          QuantCode code, int64_t block, int64_t begin, float offset);
void linear_forward_quantized(ExecContext& ctx, Tensor& y, const Tensor& x,
                              const QuantizedWeight& w, const Tensor& b);
void linear_backward_input_quantized(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                     const QuantizedWeight& w, bool accumulate);

}  // namespace braid::cpu
