// CPU steps of the vocab-parallel cross-entropy on one rank's (N, rows) block of the logits:
// partial row max and target logit, exp and row sums (the one-rank head's vectorised rows,
// vec_math.h), losses, and the in-place gradient (the per-element arithmetic of the losses and
// the gradient is core/kernels/math/cross_entropy.h, shared with the CUDA kernels).
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "core/kernels/cpu/cpu_checks.h"
#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cpu/vec_math.h"
#include "core/kernels/math/cross_entropy.h"
#include "core/profile.h"

namespace braid {

namespace cpu {

namespace {

using Named = std::pair<const Tensor*, const char*>;

// The (N) f32 row statistics beside a block of N rows.
void check_stats(const char* op, int64_t N, std::initializer_list<Named> stats) {
  for (auto [t, name] : stats) {
    check_f32(*t, op, name);
    BRAID_CHECK(t->ndim() == 1 && t->dim(0) == N, "{}: {} must be ({}), got {}", op, name, N,
                t->str());
  }
}

// An (N, rows) f32 block of logits and its row statistics; returns N.
int64_t check_block(const char* op, const Tensor& logits, std::initializer_list<Named> stats) {
  check_f32(logits, op, "logits");
  BRAID_CHECK(logits.ndim() == 2, "{}: logits must be (N, rows), got {}", op, logits.str());
  check_stats(op, logits.dim(0), stats);
  return logits.dim(0);
}

void check_targets(const Tensor& targets, int64_t N, const char* op) {
  check_cpu(targets, op, "targets");
  BRAID_CHECK(targets.defined() && targets.dtype() == DType::I32 && targets.ndim() == 1 &&
                  targets.dim(0) == N,
              "{}: targets must be ({}) i32, got {}", op, N,
              targets.defined() ? targets.str() : std::string("undefined"));
}

}  // namespace

void vocab_slice_partials(ExecContext& ctx, Tensor& row_max, Tensor& target_logit,
                          const Tensor& logits, const Tensor& targets, const VocabSlice& slice) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  const char* op = "vocab_slice_partials";
  const int64_t N =
      check_block(op, logits, {{&row_max, "row_max"}, {&target_logit, "target_logit"}});
  const int64_t rows = logits.dim(1);
  check_targets(targets, N, op);
  const int32_t* tgt = targets.i32();  // targets: (N)
  // Checked before the parallel loop: an exception must not leave an OpenMP region.
  for (int64_t i = 0; i < (slice.targets_checked ? 0 : N); ++i)
    BRAID_CHECK(tgt[i] >= -1 && tgt[i] < slice.vocab,
                "{}: target {} (row {}) is outside [-1, {}) for vocabulary size {}", op, tgt[i], i,
                slice.vocab, slice.vocab);
  const float* lg = logits.f32();  // logits: (N, rows)
  float* mx = row_max.f32();       // row_max: (N)
  float* tl = target_logit.f32();  // target_logit: (N)
  const int64_t real = slice.real(rows), row_begin = slice.row_begin;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    // The maximum does not depend on the order (finite logits; a NaN makes the loss NaN through
    // the exponentials either way), so the loop may use vector lanes.
    float m = -std::numeric_limits<float>::infinity();
    const float* row = lg + i * rows;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < real; ++j) m = std::max(m, row[j]);
    mx[i] = m;
    const int64_t local = tgt[i] - row_begin;
    tl[i] = tgt[i] >= 0 && local >= 0 && local < real ? lg[i * rows + local] : 0.0f;
  }
}

void vocab_slice_exp(ExecContext& ctx, Tensor& logits, Tensor& sum_exp, const Tensor& row_max,
                     const VocabSlice& slice) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  const char* op = "vocab_slice_exp";
  const int64_t N = check_block(op, logits, {{&sum_exp, "sum_exp"}, {&row_max, "row_max"}});
  const int64_t rows = logits.dim(1);
  float* lg = logits.f32();         // logits: (N, rows)
  float* se = sum_exp.f32();        // sum_exp: (N)
  const float* mx = row_max.f32();  // row_max: (N)
  const int64_t real = slice.real(rows);
  const CpuIsa isa = ctx.cpu_isa();
  // The vectorised exponentials and sum of the one-rank LM head's softmax (vec_math.h).
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) se[i] = exp_shifted_sum_row(isa, lg + i * rows, real, mx[i]);
}

void vocab_slice_losses(ExecContext& ctx, Tensor& losses, const Tensor& sum_exp,
                        const Tensor& row_max, const Tensor& target_logit, const Tensor& targets) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  const char* op = "vocab_slice_losses";
  const int64_t N = losses.numel();
  check_stats(op, N,
              {{&losses, "losses"},
               {&sum_exp, "sum_exp"},
               {&row_max, "row_max"},
               {&target_logit, "target_logit"}});
  check_targets(targets, N, op);
  float* out = losses.f32();             // losses: (N)
  const float* se = sum_exp.f32();       // sum_exp: (N)
  const float* mx = row_max.f32();       // row_max: (N)
  const float* tl = target_logit.f32();  // target_logit: (N)
  const int32_t* tgt = targets.i32();    // targets: (N)
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i)
    out[i] = tgt[i] < 0 ? 0.0f : math::softmax_xent_loss(se[i], mx[i], tl[i]);
}

void vocab_slice_grad(ExecContext& ctx, Tensor& logits, const Tensor& sum_exp,
                      const Tensor& targets, const VocabSlice& slice, float grad_scale) {
  KernelTimer timer(ctx.profiler(), KernelGroup::LmHead);
  const char* op = "vocab_slice_grad";
  const int64_t N = check_block(op, logits, {{&sum_exp, "sum_exp"}});
  const int64_t rows = logits.dim(1);
  check_targets(targets, N, op);
  float* lg = logits.f32();            // logits: (N, rows), exp(logit - max) on entry
  const float* se = sum_exp.f32();     // sum_exp: (N)
  const int32_t* tgt = targets.i32();  // targets: (N)
  const int64_t real = slice.real(rows), row_begin = slice.row_begin;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    const float inv = tgt[i] < 0 ? 0.0f : grad_scale / se[i];
    // The target's column, or -1 where this block does not hold it (or the row is ignored).
    const int64_t local = tgt[i] >= 0 ? tgt[i] - row_begin : -1;
    // softmax_xent_grad of every element, the target's subtraction after the product (the same
    // operations, so the same bits), in a loop the compiler vectorises.
    float* row = lg + i * rows;
#pragma omp simd
    for (int64_t j = 0; j < real; ++j) row[j] = math::softmax_xent_grad(row[j], inv, false, 0.0f);
    if (local >= 0 && local < real) row[local] -= grad_scale;  // softmax_xent_grad's target term
    std::fill(row + real, row + rows, 0.0f);
  }
}

}  // namespace cpu
}  // namespace braid
