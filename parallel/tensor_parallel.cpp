// The tensor-parallel pass, the vocab-parallel cross-entropy and the model-parallel grad norm.
#include "parallel/tensor_parallel.h"

#include <algorithm>
#include <cmath>

#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/linear.h"
#include "core/kernels/seq_reorder.h"
#include "core/models/lora.h"
#include "parallel/comm_streams.h"
#include "parallel/scalar_reduce.h"
#include "parallel/sequence_parallel.h"
#include "parallel/tp_regions.h"

namespace braid {

int64_t padded_vocab(int64_t vocab, int tp, int align) {
  const int64_t unit = static_cast<int64_t>(tp) * align;
  return (vocab + unit - 1) / unit * unit;
}

void check_tensor_parallel(const ModelConfig& cfg, int tp, const TensorParallelOptions& o) {
  BRAID_USER_CHECK(tp >= 1, "parallel.tp is {}; expected >= 1", tp);
  BRAID_USER_CHECK(o.vocab_align >= 1, "the vocabulary alignment is {}; expected >= 1",
                   o.vocab_align);
  if (tp == 1) return;
  BRAID_USER_CHECK(cfg.n_head % tp == 0,
                   "model.n_head is {}, which parallel.tp = {} does not divide: attention is split "
                   "by heads; choose a tp that divides {}",
                   cfg.n_head, tp, cfg.n_head);
  BRAID_USER_CHECK(cfg.kv_heads() % tp == 0 || tp % cfg.kv_heads() == 0,
                   "model.n_kv_head is {} and parallel.tp = {}: key/value heads are split across "
                   "tensor-parallel ranks (tp dividing n_kv_head) or each replicated over "
                   "tp / n_kv_head ranks (n_kv_head dividing tp); choose such a tp",
                   cfg.kv_heads(), tp);
  BRAID_USER_CHECK(cfg.ffn() % tp == 0,
                   "the MLP hidden size (model.ffn_hidden) is {}, which parallel.tp = {} does not "
                   "divide; set model.ffn_hidden to a multiple of {}",
                   cfg.ffn(), tp, tp);
  BRAID_USER_CHECK(cfg.n_embd % tp == 0,
                   "model.n_embd is {}, which parallel.tp = {} does not divide", cfg.n_embd, tp);
}

namespace {

// p keeps part `part` of its whole value under spec s (the whole value's shape becomes its
// global shape).
void shard_in_place(ExecContext& ctx, Parameter& p, const ShardSpec& s, int part) {
  s.validate(p.value.shape(), p.name);
  p.global_shape = p.value.shape();
  p.value = extract_shard(ctx, p.value, s, part);
  p.shard = s;
}

// The whole (V, C) table padded with zero rows to (Vp, C), then this rank's rows.
void shard_vocab(ExecContext& ctx, Parameter& p, int64_t padded, int n, int part) {
  const Shape g = p.value.shape();
  Tensor full;
  if (p.value.is_meta()) {  // a deferred weight: only its shape is placed
    full = Tensor::meta(p.value.allocator(), {padded, g[1]}, DType::F32, MemCategory::Weights);
  } else {
    full = p.value.new_zeros({padded, g[1]}, DType::F32, MemCategory::Weights);
    copy_rows(ctx, full, 0, p.value);
  }
  ShardSpec spec{0, n, {}};
  spec.logical = g[0];
  p.value = full;
  shard_in_place(ctx, p, spec, part);
}

// How a projection is placed (torchtitan's plan, Megatron's column/row-parallel linears):
// column-parallel keeps rows of the weight (outputs: heads, MLP columns), row-parallel keeps
// columns (inputs) and reduces its output.
enum class Split { Column, ColumnKV, ColumnFusedQKV, Row };

// The plan by the projection's name within its block.
const std::pair<const char*, Split> kPlan[] = {
    {"self_attn.q_proj", Split::Column},
    {"self_attn.k_proj", Split::ColumnKV},
    {"self_attn.v_proj", Split::ColumnKV},
    {"self_attn.o_proj", Split::Row},
    {"attn.c_attn", Split::ColumnFusedQKV},
    {"attn.c_proj", Split::Row},
    {"mlp.gate_proj", Split::Column},
    {"mlp.up_proj", Split::Column},
    {"mlp.down_proj", Split::Row},
    {"mlp.c_fc", Split::Column},
    {"mlp.c_proj", Split::Row},
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         s[s.size() - suffix.size() - 1] == '.';
}

const Split* split_of(const std::string& path) {
  for (const auto& [name, split] : kPlan)
    if (ends_with(path, name)) return &split;
  return nullptr;
}

// The shard spec of a projection's weight for split `k` on n ranks.
ShardSpec weight_spec(Split k, const ModelConfig& cfg, int n) {
  switch (k) {
    case Split::Column:
      return {0, n, {}};
    case Split::ColumnFusedQKV: {
      const int64_t C = cfg.n_embd;
      return {0, n, {C, C, C}};  // each rank takes its heads of each of q, k and v
    }
    case Split::ColumnKV: {
      // split by kv head, or each kv head replicated over tp / n_kv_head ranks
      const int kv = static_cast<int>(cfg.kv_heads());
      ShardSpec s{0, std::min(kv, n), {}};
      s.replicas = n / s.parts;
      return s;
    }
    case Split::Row:
      return {1, n, {}};
  }
  return {};
}

}  // namespace

int apply_tensor_parallel(ExecContext& ctx, Transformer& model, Communicator& tp,
                          const TensorParallelOptions& o) {
  const ModelConfig& cfg = model.config();
  const int n = tp.size(), r = tp.rank();
  check_tensor_parallel(cfg, n, o);
  if (n == 1) return 0;
  const int64_t V = cfg.vocab_size, Vp = padded_vocab(V, n, o.vocab_align), rows = Vp / n;
  const bool sp = o.sequence_parallel;
  // The head's own weight (untied, or the tied replica of a last stage); the head's loss
  // becomes the vocab-parallel cross-entropy.
  if (model.has_head()) {
    Parameter* own = cfg.tied() ? (model.has_embedding() ? nullptr : model.tied_embedding())
                                : model.find_parameter("lm_head.weight");
    if (own) shard_vocab(ctx, *own, Vp, n, r);
    model.set_head_loss(vocab_parallel_cross_entropy(tp, V, r * rows, sp, o.head_chunk_rows));
  }
  int placed = 0;
  // Projections first (their shards decide LoRA's), then the modules that hold them.
  model.visit([&](Module& m) {
    auto* l = dynamic_cast<Linear*>(&m);
    const Split* k = l ? split_of(l->path()) : nullptr;
    if (!k) return;
    const ShardSpec spec = weight_spec(*k, cfg, n);
    const int part = spec.part_of(r);
    shard_in_place(ctx, l->weight, spec, part);
    if (*k == Split::Row) {
      // The bias is replicated and added once, by group rank 0, to the partial sum.
      l->reduce_output(exit_region(l->path() + ".output_region", tp, sp), r == 0);
    } else if (l->bias) {
      shard_in_place(ctx, *l->bias, spec, part);
    }
    ++placed;
  });
  model.visit([&](Module& m) {
    if (auto* a = dynamic_cast<SelfAttention*>(&m)) {
      a->set_input_region(enter_region(a->path() + ".input_region", tp, sp));
      ++placed;
    } else if (auto* f = dynamic_cast<MLP*>(&m)) {
      f->set_input_region(enter_region(f->path() + ".input_region", tp, sp));
      ++placed;
    } else if (auto* e = dynamic_cast<Embedding*>(&m)) {
      // Rows of the vocabulary; the replicated position table is added once, by rank 0.
      shard_vocab(ctx, e->wte, Vp, n, r);
      e->shard_rows(r * rows, V, r == 0, exit_region(e->path() + ".output_region", tp, sp));
      ++placed;
    } else if (auto* lo = dynamic_cast<LoraLinear*>(&m)) {
      // A and B follow the base's split (lora.h): a row-parallel base's partial t is reduced
      // between A and B; a column-parallel base's partial dt is summed for A's gradient.
      Linear& base = dynamic_cast<Linear&>(lo->base());
      const ShardSpec a = lora_a_shard(base.weight.shard), b = lora_b_shard(base.weight.shard);
      // (An unsplit spec still carries the replicas of a replicated kv head's B.)
      if (a.sharded()) shard_in_place(ctx, lo->lora_A, a, a.part_of(r));
      lo->lora_A.shard = a;
      if (b.sharded()) shard_in_place(ctx, lo->lora_B, b, b.part_of(r));
      lo->lora_B.shard = b;
      std::unique_ptr<Module> rank_region, weight_grad_region;
      if (a.sharded()) {
        rank_region = exit_region(lo->path() + ".rank_region", tp, sp);
        // Under sequence parallelism B sees only the slice's rows: its holders' partial
        // gradients are summed like a replicated part's.
        if (sp) lo->lora_B.shard.replicas = n;
      }
      if (b.sharded())
        weight_grad_region = std::make_unique<CopyToRegion>(lo->path() + ".weight_grad_region", tp);
      lo->place(a.sharded() ? a.part_of(r) : 0, std::move(rank_region),
                std::move(weight_grad_region));
      ++placed;
    }
  });
  // Sequence parallelism runs the norms on each rank's slice of the sequences: each holder's
  // gradient is partial, and sum_replicated_parts sums them (one part held by all n ranks).
  if (sp)
    model.visit([&](Module& m) {
      if (!dynamic_cast<LayerNorm*>(&m) && !dynamic_cast<RMSNorm*>(&m)) return;
      std::vector<Parameter*> ps;
      m.own_parameters(ps);
      for (Parameter* p : ps) p->shard.replicas = n;
    });
  model.refresh_parameters();
  return placed;
}

void sum_replicated_parts(ExecContext& ctx, const std::vector<Parameter*>& params,
                          Communicator& tp) {
  for (Parameter* p : params) {
    if (p->shard.replicas == 1 || !p->trainable || p->replica) continue;
    if (!p->shard.sharded()) {  // one part, held by every rank
      wait_in_stream(ctx, tp.all_reduce(p->grad(), ReduceOp::Sum));
      continue;
    }
    // Each rank's partial gradient at its part's place; the sum gives every part the sum of
    // its holders' (ranks holding other parts add zeros).
    Tensor full = ctx.zeros(p->global_shape, DType::F32, MemCategory::Communication);
    const int part = p->shard.part_of(tp.rank());
    insert_shard(ctx, full, p->grad(), p->shard, part);
    wait_in_stream(ctx, tp.all_reduce(full, ReduceOp::Sum));
    cast(ctx, p->grad(), extract_shard(ctx, full, p->shard, part));  // on the context's stream
  }
}

HeadLossFn vocab_parallel_cross_entropy(Communicator& tp, int64_t vocab, int64_t row_begin,
                                        bool sequence_parallel, int64_t chunk_rows) {
  return [&tp, vocab, row_begin, sequence_parallel, chunk_rows](
             ExecContext& ctx, Tensor& losses, Tensor& dx, Tensor& dw, const Tensor& x_in,
             const Tensor& w, const Tensor& targets, float grad_scale) {
    // Sequence parallelism: x_in is this rank's slice of each sequence; the logits of this
    // rank's vocabulary rows are needed at every position, so the slices are gathered. The
    // loss is per row, so the gathered rows stay in the collective's order (rank-major:
    // (rank, b, t)) with the targets and losses reordered to it (for B = 1 the orders agree),
    // and the input gradient's rows reduce-scatter straight to each rank's slice.
    const bool gather = sequence_parallel && tp.size() > 1;
    const int n = tp.size();
    const int64_t C = x_in.dim(1), Nt = targets.numel();
    const int64_t B = targets.ndim() == 2 ? targets.dim(0) : 1, T = Nt / B;
    BRAID_CHECK(x_in.dim(0) * (gather ? n : 1) == Nt, "{} rows of hidden states for {} targets",
                x_in.dim(0), Nt);
    // Every target once, before anything is written (a bad batch leaves dw untouched); every
    // rank holds the same targets, so all of them throw here, before any collective.
    check_loss_targets(ctx, targets, vocab, "vocab_parallel_cross_entropy");
    Tensor x = x_in;
    if (gather) {
      x = ctx.empty({Nt, C}, x_in.dtype());
      wait_in_stream(ctx, tp.all_gather(x_in.view({x_in.numel()}), x.view({x.numel()})));
    }
    const bool reorder = gather && B > 1;
    Tensor tgt_rows = targets.view({Nt});  // row i of x's target
    if (reorder) {
      tgt_rows = ctx.empty({Nt}, DType::I32);
      seq_to_blocks(ctx, tgt_rows, targets.view({B, T}), n);
    }
    const int64_t N = Nt, V = w.dim(0);
    VocabSlice slice{row_begin, vocab};
    slice.targets_checked = true;
    const bool backward = dx.defined();
    // Only a (chunk, V / tp) block of this rank's logits exists at a time, as in the one-rank
    // head: per chunk of rows the logits, the loss and the logits' gradient, whose two GEMMs
    // add the chunk's part of dx and dw. With 16-bit x and w that gradient is rounded to their
    // dtype where the one-rank head rounds it (lm_head_rounds_grad), so both GEMMs run on the
    // 16-bit operands as they are.
    const int64_t chunk = chunk_rows > 0 ? std::min(chunk_rows, N) : lm_head_chunk_rows(ctx, N, V);
    const bool round = backward && lm_head_rounds_grad(ctx, x.dtype(), w.dtype());
    Tensor logits_buf = ctx.empty({chunk, V}, DType::F32, MemCategory::Workspace);
    Tensor grad_buf = round ? ctx.empty({chunk, V}, w.dtype(), MemCategory::Workspace) : Tensor();
    // Per row: the max, then the sum of exp and the target's logit (owned by one rank; 0
    // elsewhere), each completed over the ranks.
    Tensor mx_buf = ctx.empty({chunk});
    Tensor st_buf = ctx.empty({2 * chunk});  // [sum exp | target logit]: one all-reduce for both
    Tensor row_losses = reorder ? ctx.empty({N}) : losses.view({N});
    // Each rank's part of dx in f32, summed in f32 and rounded once (16-bit activations);
    // under sequence parallelism each rank keeps its slice of the sum.
    Tensor dx32;
    if (backward)
      dx32 = dx.dtype() == DType::F32 && !gather ? dx.view({N, C}) : ctx.empty({N, C}, DType::F32);
    for (int64_t r0 = 0; r0 < N; r0 += chunk) {
      const int64_t rows = std::min(chunk, N - r0);
      const Tensor xc = x.slice0(r0, r0 + rows), tc = tgt_rows.slice0(r0, r0 + rows);
      Tensor logits = logits_buf.slice0(0, rows);
      linear_forward(ctx, logits, xc, w, Tensor());
      Tensor mx = mx_buf.slice0(0, rows), st = st_buf.slice0(0, 2 * rows);
      Tensor sum_exp = st.slice0(0, rows), target_logit = st.slice0(rows, 2 * rows);
      vocab_slice_partials(ctx, mx, target_logit, logits, tc, slice);
      if (n > 1) wait_in_stream(ctx, tp.all_reduce(mx, ReduceOp::Max));
      vocab_slice_exp(ctx, logits, sum_exp, mx, slice);  // logits become exp(l - max)
      if (n > 1) wait_in_stream(ctx, tp.all_reduce(st, ReduceOp::Sum));
      Tensor lc = row_losses.slice0(r0, r0 + rows);
      vocab_slice_losses(ctx, lc, sum_exp, mx, target_logit, tc);
      if (!backward) continue;
      vocab_slice_grad(ctx, logits, sum_exp, tc, slice, grad_scale);
      Tensor grad = logits;
      if (round) {
        grad = grad_buf.slice0(0, rows);
        cast(ctx, grad, logits);
      }
      Tensor dxc = dx32.slice0(r0, r0 + rows);
      linear_backward_input(ctx, dxc, grad, w);
      if (dw.defined()) {
        Tensor none;
        linear_backward_weight(ctx, dw, none, grad, xc);
      }
    }
    if (reorder) {
      Tensor seq = losses.view({B, T});
      blocks_to_seq(ctx, seq, row_losses, n);
    }
    if (!backward) return;
    if (gather) {
      Tensor mine = dx.dtype() == DType::F32 ? dx : ctx.empty(dx.shape(), DType::F32);
      wait_in_stream(ctx, tp.reduce_scatter(dx32.view({dx32.numel()}), mine.view({mine.numel()}),
                                            ReduceOp::Sum));
      if (!mine.same_storage(dx)) cast(ctx, dx, mine);
    } else {
      if (n > 1) wait_in_stream(ctx, tp.all_reduce(dx32, ReduceOp::Sum));
      if (!dx32.same_storage(dx)) cast(ctx, dx, dx32.view(dx.shape()));
    }
  };
}

namespace {
double sum_over(Communicator* comm, double x) {
  return comm && comm->size() > 1 ? all_sum_doubles(*comm, {x})[0] : x;
}
}  // namespace

double model_parallel_grad_norm(ExecContext& ctx, const std::vector<Parameter*>& params,
                                Communicator* tp, Communicator* pp) {
  std::vector<Parameter*> counted;
  std::vector<Tensor> grads;
  for (Parameter* p : params) {
    if (!p->trainable || p->replica || !p->has_grad()) continue;
    counted.push_back(p);
    grads.push_back(p->grad());
  }
  const std::vector<double> sums = sum_squares_each(ctx, grads);  // one wait on a GPU
  double sharded = 0.0, replicated = 0.0;
  for (size_t i = 0; i < counted.size(); ++i) {
    const Parameter* p = counted[i];
    if (p->shard.sharded())  // a part held by several ranks is counted once
      sharded += sums[i] / static_cast<double>(p->shard.replicas);
    else
      replicated += sums[i];
  }
  return std::sqrt(sum_over(pp, sum_over(tp, sharded) + replicated));
}

}  // namespace braid
