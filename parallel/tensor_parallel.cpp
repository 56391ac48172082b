// The tensor-parallel pass, the vocab-parallel cross-entropy and the model-parallel grad norm.
#include "parallel/tensor_parallel.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/kernels/cross_entropy.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/linear.h"
#include "core/kernels/seq_reorder.h"
#include "core/models/lora.h"
#include "parallel/scalar_reduce.h"
#include "parallel/sequence_parallel.h"
#include "parallel/tp_layers.h"

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

void shard_into(Parameter& dst, const Parameter& full, const ShardSpec& s, int part) {
  s.validate(full.value.shape(), full.name);
  dst.value = extract_shard(full.value, s, part);
  dst.global_shape = full.value.shape();
  dst.shard = s;
  dst.trainable = full.trainable;
  dst.replica = full.replica;
}

// Column-parallel: this rank's rows (output features) of the weight and bias.
// replicas > 1: n parts, each held by `replicas` ranks (kv heads when tp > n_kv_head).
std::unique_ptr<Module> column(ExecContext& ctx, const Module& m, int n, int part,
                               std::vector<int64_t> blocks = {}, int replicas = 1) {
  const auto& l = dynamic_cast<const Linear&>(m);
  auto out =
      std::make_unique<Linear>(ctx, l.path(), l.in_features, l.out_features / n, l.bias != nullptr);
  ShardSpec s{0, n, std::move(blocks)};
  s.replicas = replicas;
  shard_into(out->weight, l.weight, s, part);
  if (l.bias) shard_into(*out->bias, *l.bias, s, part);
  return out;
}

// Row-parallel: this rank's columns (input features) of the weight; the bias replicated.
std::unique_ptr<Module> row(const Module& m, int n, int part, Communicator& tp, bool sp) {
  const auto& l = dynamic_cast<const Linear&>(m);
  const ShardSpec s{1, n, {}};
  auto out = std::make_unique<RowParallelLinear>(l.path(), Tensor(), Tensor(), tp, sp);
  shard_into(out->weight, l.weight, s, part);
  if (l.bias) {
    out->bias = std::make_unique<Parameter>(l.bias->name, l.bias->value, l.bias->trainable);
  }
  return out;
}

// The full (V, C) table padded with zero rows to (Vp, C), then this rank's rows.
void shard_vocab(Parameter& p, int64_t padded, int n, int part) {
  const Shape& g = p.value.shape();
  Tensor full = p.value.new_zeros({padded, g[1]}, DType::F32, MemCategory::Weights);
  std::memcpy(full.raw(), p.value.raw(), p.value.nbytes());
  Parameter whole(p.name, full, p.trainable);
  whole.replica = p.replica;
  ShardSpec spec{0, n, {}};
  spec.logical = g[0];
  shard_into(p, whole, spec, part);
}

}  // namespace

int apply_tensor_parallel(ExecContext& ctx, Transformer& model, Communicator& tp,
                          const TensorParallelOptions& o) {
  const ModelConfig& cfg = model.config();
  const int n = tp.size(), r = tp.rank();
  check_tensor_parallel(cfg, n, o);
  if (n == 1) return 0;
  const int64_t V = cfg.vocab_size, Vp = padded_vocab(V, n, o.vocab_align), rows = Vp / n;
  const bool llama = cfg.is_llama(), sp = o.sequence_parallel;
  // The head's own weight (untied, or the tied replica of a last stage) first: replacing
  // modules below leaves model.parameters() stale until refresh_parameters().
  if (model.has_head()) {
    Parameter* own = cfg.tied() ? (model.has_embedding() ? nullptr : model.tied_embedding())
                                : model.find_parameter("lm_head.weight");
    if (own) shard_vocab(*own, Vp, n, r);
    model.set_head_loss(vocab_parallel_cross_entropy(tp, V, r * rows, sp));
  }
  int replaced = model.replace(
      [](const Module& m) { return dynamic_cast<const SelfAttention*>(&m) != nullptr; },
      [&](std::unique_ptr<Module> old) -> std::unique_ptr<Module> {
        std::vector<std::unique_ptr<Module>> cols;
        if (llama) {
          cols.push_back(column(ctx, old->child(0), n, r));
          // k and v: split by kv head, or each kv head replicated over tp / n_kv_head ranks.
          const int kv = static_cast<int>(cfg.kv_heads());
          const int parts = std::min(kv, n), replicas = n / parts;
          for (size_t i = 1; i < 3; ++i)
            cols.push_back(column(ctx, old->child(i), parts, r / replicas, {}, replicas));
        } else {
          const int64_t C = cfg.n_embd;
          cols.push_back(column(ctx, old->child(0), n, r, {C, C, C}));
        }
        auto out = row(old->child(llama ? 3 : 1), n, r, tp, sp);
        return std::make_unique<TpSelfAttention>(cfg, old->path(), n, std::move(cols),
                                                 std::move(out), tp, sp);
      });
  replaced += model.replace([](const Module& m) { return dynamic_cast<const MLP*>(&m) != nullptr; },
                            [&](std::unique_ptr<Module> old) -> std::unique_ptr<Module> {
                              std::vector<std::unique_ptr<Module>> cols;
                              const size_t ncol = llama ? 2 : 1;
                              for (size_t i = 0; i < ncol; ++i)
                                cols.push_back(column(ctx, old->child(i), n, r));
                              auto out = row(old->child(ncol), n, r, tp, sp);
                              return std::make_unique<TpMLP>(cfg, old->path(), std::move(cols),
                                                             std::move(out), tp, sp);
                            });
  replaced +=
      model.replace([](const Module& m) { return dynamic_cast<const Embedding*>(&m) != nullptr; },
                    [&](std::unique_ptr<Module> old) -> std::unique_ptr<Module> {
                      auto& e = dynamic_cast<Embedding&>(*old);
                      Parameter wte(e.wte.name, e.wte.value, e.wte.trainable);
                      shard_vocab(wte, Vp, n, r);
                      return std::make_unique<VocabParallelEmbedding>(
                          e.path(), std::move(wte), std::move(e.wpe), V, r * rows, tp, sp);
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
  return replaced;
}

void sum_replicated_parts(ExecContext& ctx, const std::vector<Parameter*>& params,
                          Communicator& tp) {
  for (Parameter* p : params) {
    if (p->shard.replicas == 1 || !p->trainable || p->replica) continue;
    if (!p->shard.sharded()) {  // one part, held by every rank
      tp.all_reduce(p->grad(), ReduceOp::Sum).wait();
      continue;
    }
    // Each rank's partial gradient at its part's place; the sum gives every part the sum of
    // its holders' (ranks holding other parts add zeros).
    Tensor full = ctx.zeros(p->global_shape, DType::F32, MemCategory::Communication);
    const int part = p->shard.part_of(tp.rank());
    insert_shard(full, p->grad(), p->shard, part);
    tp.all_reduce(full, ReduceOp::Sum).wait();
    p->grad().copy_from(extract_shard(full, p->shard, part));
  }
}

int apply_tensor_parallel_lora(Transformer& model, Communicator& tp, bool sequence_parallel) {
  int n = 0;
  model.visit([&](Module& m) {
    auto* l = dynamic_cast<LoraLinear*>(&m);
    if (!l || tp.size() == 1) return;
    auto sum = [&tp](Tensor& t) { tp.all_reduce(t, ReduceOp::Sum).wait(); };
    if (l->lora_A.shard.sharded()) {  // row-parallel base
      if (sequence_parallel) {
        // The base's output is this rank's slice of the sequences: t is summed and scattered
        // to the same slice, dt gathered back to every position. B then sees only the slice's
        // rows: its partial gradients are summed over tp like a replicated part's.
        l->sum_partial_t = [&tp](ExecContext& ctx, const Tensor& t) {
          return seq_reduce_scatter(ctx, tp, t, DType::F32);
        };
        l->gather_dt = [&tp](ExecContext& ctx, const Tensor& dt) {
          return seq_all_gather(ctx, tp, dt);
        };
        l->lora_B.shard.replicas = tp.size();
      } else {
        l->sum_partial_t = [&tp](ExecContext&, const Tensor& t) {
          Tensor s = t;
          tp.all_reduce(s, ReduceOp::Sum).wait();
          return s;
        };
      }
    }
    if (l->lora_B.shard.sharded()) l->sum_partial_dt = sum;  // column-parallel base
    n += l->lora_A.shard.sharded() || l->lora_B.shard.sharded();
  });
  return n;
}

HeadLossFn vocab_parallel_cross_entropy(Communicator& tp, int64_t vocab, int64_t row_begin,
                                        bool sequence_parallel) {
  return [&tp, vocab, row_begin, sequence_parallel](ExecContext& ctx, Tensor& losses, Tensor& dx,
                                                    Tensor& dw, const Tensor& x_in, const Tensor& w,
                                                    const Tensor& targets, float grad_scale) {
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
    Tensor x = x_in;
    if (gather) {
      x = ctx.empty({Nt, C}, x_in.dtype());
      tp.all_gather(x_in.view({x_in.numel()}), x.view({x.numel()})).wait();
    }
    const bool reorder = gather && B > 1;
    Tensor tgt_rows = targets.view({Nt});  // row i of x's target
    if (reorder) {
      tgt_rows = ctx.empty({Nt}, DType::I32);
      seq_to_blocks(ctx, tgt_rows, targets.view({B, T}), n);
    }
    const int64_t N = Nt;
    const VocabSlice slice{row_begin, vocab};
    // Only this rank's (N, V / tp) block of the logits ever exists.
    Tensor logits = ctx.empty({N, w.dim(0)});
    linear_forward(ctx, logits, x, w, Tensor());
    // Per row: the max, then the sum of exp and the target's logit (owned by one rank; 0
    // elsewhere), each completed over the ranks.
    Tensor mx = ctx.empty({N});
    Tensor st = ctx.empty({2 * N});  // [sum exp | target logit]: one all-reduce for both
    Tensor sum_exp = st.slice0(0, N), target_logit = st.slice0(N, 2 * N);
    vocab_slice_partials(ctx, mx, target_logit, logits, tgt_rows, slice);
    if (tp.size() > 1) tp.all_reduce(mx, ReduceOp::Max).wait();
    vocab_slice_exp(ctx, logits, sum_exp, mx, slice);  // logits become exp(l - max)
    if (tp.size() > 1) tp.all_reduce(st, ReduceOp::Sum).wait();
    Tensor row_losses = reorder ? ctx.empty({N}) : losses;
    vocab_slice_losses(ctx, row_losses, sum_exp, mx, target_logit, tgt_rows);
    if (reorder) {
      Tensor seq = losses.view({B, T});
      blocks_to_seq(ctx, seq, row_losses, n);
    }
    if (!dx.defined()) return;
    vocab_slice_grad(ctx, logits, sum_exp, tgt_rows, slice, grad_scale);
    // Each rank's part of dx in f32, summed in f32 and rounded once (16-bit activations);
    // under sequence parallelism each rank keeps its slice of the sum.
    Tensor dx32 = dx.dtype() == DType::F32 && !gather ? dx : ctx.empty({N, C}, DType::F32);
    linear_backward_input(ctx, dx32, logits, w);
    if (gather) {
      Tensor mine = dx.dtype() == DType::F32 ? dx : ctx.empty(dx.shape(), DType::F32);
      tp.reduce_scatter(dx32.view({dx32.numel()}), mine.view({mine.numel()}), ReduceOp::Sum).wait();
      if (!mine.same_storage(dx)) cast(ctx, dx, mine);
    } else {
      if (tp.size() > 1) tp.all_reduce(dx32, ReduceOp::Sum).wait();
      if (!dx32.same_storage(dx)) cast(ctx, dx, dx32);
    }
    if (dw.defined()) {
      Tensor none;
      linear_backward_weight(ctx, dw, none, logits, x);
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
  double sharded = 0.0, replicated = 0.0;
  for (Parameter* p : params) {
    if (!p->trainable || p->replica || !p->has_grad()) continue;
    if (p->shard.sharded())  // a part held by several ranks is counted once
      sharded += sum_squares(ctx, p->grad()) / static_cast<double>(p->shard.replicas);
    else
      replicated += sum_squares(ctx, p->grad());
  }
  return std::sqrt(sum_over(pp, sum_over(tp, sharded) + replicated));
}

}  // namespace braid
