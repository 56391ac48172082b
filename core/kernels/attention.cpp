// attention: argument checks and device dispatch of the public kernels (core/kernels/attention.h).
#include "core/kernels/attention.h"

#include "core/kernels/cpu/cpu_kernels.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/elementwise.h"
#include "core/micro_batch.h"

namespace braid {

namespace {

#if BRAID_WITH_CUDA
// Document masking (packed sequences) on a GPU: a query sees only its own sample's keys, so each
// sample is an ordinary causal sequence of its own. braid's kernel runs once per sample (cuDNN
// would build a plan for every sample length) on (1, len, heads, D) views of q, k, v and the
// outputs, with the sample's (1, heads, len) log-sum-exp in a piece of its own; a row's pieces
// are the columns of lse[b] as (heads, T). The CPU kernel gives the same values in one pass.
std::vector<std::vector<SampleSpan>> spans_by_row(const Tensor& sample_starts, const Tensor& q,
                                                  const Tensor& k, const Tensor& lse,
                                                  const char* op) {
  const int64_t B = q.dim(0), T = q.dim(1);
  BRAID_CHECK(k.dim(1) == T && lse.ndim() == 3,
              "{}: packed samples need as many queries as keys (q {}, k {})", op, q.str(), k.str());
  BRAID_CHECK(sample_starts.ndim() == 2 && sample_starts.dim(0) == B && sample_starts.dim(1) == T,
              "{}: sample_starts {} must be (B, T) = ({}, {})", op, sample_starts.str(), B, T);
  std::vector<std::vector<SampleSpan>> rows(static_cast<size_t>(B));
  for (const SampleSpan& sp : sample_spans(sample_starts))
    rows[static_cast<size_t>(sp.row)].push_back(sp);
  return rows;
}

// lse[b] as (heads, T), and a (heads, len) piece for one of its samples.
Tensor lse_row(const Tensor& lse, int64_t b) {
  return lse.slice0(b, b + 1).view({lse.dim(1), lse.dim(2)});
}
Tensor lse_piece(const Tensor& lse, const SampleSpan& sp) {
  return lse.new_empty({lse.dim(1), sp.end - sp.begin}, DType::F32);
}
Tensor as_lse(const Tensor& piece) { return piece.view({1, piece.dim(0), piece.dim(1)}); }

void packed_samples_forward(ExecContext& ctx, Tensor& out, Tensor& lse, const Tensor& q,
                            const Tensor& k, const Tensor& v, int64_t window,
                            const Tensor& sample_starts) {
  const auto rows = spans_by_row(sample_starts, q, k, lse, "attention_forward");
  for (int64_t b = 0; b < q.dim(0); ++b) {
    std::vector<Tensor> pieces;
    for (const SampleSpan& sp : rows[static_cast<size_t>(b)]) {
      Tensor o = span_view(out, sp), piece = lse_piece(lse, sp), l = as_lse(piece);
      cuda::attention_forward(ctx, o, l, span_view(q, sp), span_view(k, sp), span_view(v, sp),
                              window, /*allow_cudnn=*/false);
      pieces.push_back(piece);
    }
    std::vector<const Tensor*> parts;
    for (const Tensor& t : pieces) parts.push_back(&t);
    Tensor row = lse_row(lse, b);
    concat_columns(ctx, row, parts);
  }
}

void packed_samples_backward(ExecContext& ctx, Tensor& dq, Tensor& dk, Tensor& dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& out, const Tensor& lse, int64_t window,
                             const Tensor& sample_starts) {
  const auto rows = spans_by_row(sample_starts, q, k, lse, "attention_backward");
  for (int64_t b = 0; b < q.dim(0); ++b) {
    const auto& spans = rows[static_cast<size_t>(b)];
    std::vector<Tensor> pieces;
    for (const SampleSpan& sp : spans) pieces.push_back(lse_piece(lse, sp));
    std::vector<Tensor*> parts;
    for (Tensor& t : pieces) parts.push_back(&t);
    split_columns(ctx, parts, lse_row(lse, b));
    for (size_t i = 0; i < spans.size(); ++i) {
      const SampleSpan& sp = spans[i];
      Tensor dqs = span_view(dq, sp), dks = span_view(dk, sp), dvs = span_view(dv, sp);
      cuda::attention_backward(ctx, dqs, dks, dvs, span_view(dout, sp), span_view(q, sp),
                               span_view(k, sp), span_view(v, sp), span_view(out, sp),
                               as_lse(pieces[i]), window, /*allow_cudnn=*/false);
    }
  }
}
#endif

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
#if BRAID_WITH_CUDA
  if (sample_starts.defined())
    return packed_samples_forward(ctx, out, lse, q, k, v, window, sample_starts);
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
#if BRAID_WITH_CUDA
  if (sample_starts.defined())
    return packed_samples_backward(ctx, dq, dk, dv, dout, q, k, v, out, lse, window, sample_starts);
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
