// Tensor parallelism on tp = world size ranks: the pass's model gives the single-rank model's
// losses and (gathered) gradients, for one step and over 10 optimizer steps, both families;
// composed with the pipeline executor (tp = 2 x pp = 2 on 4 ranks) and with data parallelism
// (dp = 2 x tp = 2); and clear errors.
//
// Tolerance: a row-parallel projection sums its partial products across ranks, the
// vocab-parallel cross-entropy sums exponentials per rank, so results differ from one rank in
// the order of additions only: losses to 1e-6 relative, gradients to 1e-5 of each tensor's
// largest magnitude; 10 steps' losses to 1e-4 relative.
#include <gtest/gtest.h>

#include "core/models/checkpointing.h"
#include "core/models/lora.h"
#include "optim/master_weights.h"
#include "parallel/pipeline_executor.h"
#include "parallel/sequence_parallel.h"
#include "parallel/tensor_parallel.h"
#include "tests/mpi/model_mpi_util.h"
#include "tests/mpi/mpi_test_util.h"

namespace braid::test {
namespace {

constexpr int64_t kB = 2, kT = 6;

ModelConfig tp_config(const std::string& family, int n_layer = 2) {
  ModelConfig c = model_test::tiny(family, n_layer);
  c.n_head = 4;  // head_dim 2
  if (c.is_llama()) {
    c.n_kv_head = 2;
    c.ffn_hidden = 12;
  }
  return c;
}

// The full tensor of a (possibly sharded) gradient, padding rows dropped (the first `rows`).
std::vector<float> gathered(Communicator& tp, const Parameter& p, int64_t rows) {
  const Tensor& g = p.grad_if_any();
  if (!p.shard.sharded()) return values_of(g);
  Tensor all = Tensor::empty({tp.size() * g.numel()});
  tp.all_gather(g.view({g.numel()}), all).wait();
  Tensor full = Tensor::zeros(p.global_shape);
  for (int r = 0; r < tp.size(); ++r)
    insert_shard(full, all.slice0(r * g.numel(), (r + 1) * g.numel()).view(g.shape()), p.shard,
                 p.shard.part_of(r));
  const int64_t keep = rows > 0 ? rows * full.dim(1) : full.numel();
  return std::vector<float>(full.f32(), full.f32() + keep);
}

bool is_vocab(const Parameter& p) {
  return p.name == "transformer.wte.weight" || p.name == "model.embed_tokens.weight" ||
         p.name == "lm_head.weight";
}

class TensorParallel : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallel, OneStepEqualsOneRank) {
  Communicator& tp = world().world();
  const ModelConfig cfg = tp_config(GetParam());
  ExecContext ctx;
  Transformer model(ctx, cfg), whole(ctx, cfg);
  model.init_weights();
  whole.init_weights();
  TensorParallelOptions o;
  o.vocab_align = 4;  // 11 -> 16 rows at tp 2: rank 1 holds 3 real and 5 padding rows
  const int n = apply_tensor_parallel(ctx, model, tp, o);
  // Per block: the projections split (gpt2 4, llama 7) and the attention's and MLP's input
  // regions; then the embedding.
  EXPECT_EQ(n, ((cfg.is_llama() ? 7 : 4) + 2) * cfg.n_layer + 1);
  EXPECT_EQ(model.parameters().size(), whole.parameters().size());
  const Parameter* wte = model.parameters().front();
  EXPECT_EQ(wte->value.dim(0), padded_vocab(cfg.vocab_size, tp.size(), 4) / tp.size());
  const Batches b = batches(cfg, 2, kB, kT, 0);
  const float scale = 1.0f / (2 * kB * kT);
  const LossSum l = reference_step(ctx, model, b, scale);
  const LossSum ref = reference_step(ctx, whole, b, scale);
  EXPECT_NEAR(l.sum, ref.sum, 1e-6 * ref.sum);
  EXPECT_EQ(l.count, ref.count);
  const Grads gw = grads_of(whole.parameters());
  int sharded = 0;
  for (Parameter* p : model.parameters()) {
    ASSERT_TRUE(p->has_grad()) << p->name;
    sharded += p->shard.sharded();
    const std::vector<float> g = gathered(tp, *p, is_vocab(*p) ? cfg.vocab_size : 0);
    EXPECT_LT(max_scaled_err(g, gw.at(p->name)), 1e-5) << p->name;
  }
  EXPECT_GT(sharded, 4 * cfg.n_layer);
  // Evaluation takes the same path.
  const LossSum e = model.forward_loss(ctx, b.tokens[0], b.targets[0]);
  const LossSum we = whole.forward_loss(ctx, b.tokens[0], b.targets[0]);
  EXPECT_NEAR(e.sum, we.sum, 1e-6 * we.sum);
  EXPECT_NEAR(model_parallel_grad_norm(ctx, model.parameters(), &tp, nullptr),
              global_grad_norm(ctx, whole.parameters()), 1e-5);
}

TEST_P(TensorParallel, TenOptimizerStepsEqualOneRank) {
  Communicator& tp = world().world();
  const ModelConfig cfg = tp_config(GetParam());
  ExecContext ctx;
  Transformer model(ctx, cfg), whole(ctx, cfg);
  model.init_weights();
  whole.init_weights();
  apply_tensor_parallel(ctx, model, tp);
  const OptimConfig oc = test_optim();
  AdamW opt(ctx, model.parameters(), oc), ref_opt(ctx, whole.parameters(), oc);
  const float scale = 1.0f / (2 * kB * kT);
  for (int step = 0; step < 10; ++step) {
    const Batches b = batches(cfg, 2, kB, kT, step + 1);
    model.zero_grad(ctx);
    whole.zero_grad(ctx);
    const LossSum l = reference_step(ctx, model, b, scale);
    const LossSum ref = reference_step(ctx, whole, b, scale);
    clip_grad_norm(ctx, model.parameters(),
                   model_parallel_grad_norm(ctx, model.parameters(), &tp, nullptr), oc.grad_clip);
    clip_grad_norm(ctx, whole.parameters(), global_grad_norm(ctx, whole.parameters()),
                   oc.grad_clip);
    opt.step(oc.lr);
    ref_opt.step(oc.lr);
    EXPECT_NEAR(l.sum, ref.sum, 1e-4 * ref.sum) << "step " << step;
  }
}

// tp = 2 inside each of pp = 2 stages (4 ranks), 1f1b: the executor and the pass compose.
TEST_P(TensorParallel, TimesPipelineEqualsOneRank) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  const ModelConfig cfg = tp_config(GetParam(), 4);
  MeshComms mc = world().build_mesh(Mesh::resolve(1, 2, 2, 4));
  ExecContext ctx;
  const PipelineSchedule ps = build_pipeline_schedule({ScheduleKind::OneFOneB, 2, 4, 1, 4});
  Transformer stage(ctx, cfg, pipeline_block_range(4, 2, mc.coord.pp));
  stage.init_weights();
  apply_tensor_parallel(ctx, stage, *mc.tp);
  braid::PipelineExecutor ex(ctx, ps, mc.coord.pp, {&stage}, mc.pp, mc.embedding);
  Transformer whole(ctx, cfg);
  whole.init_weights();
  const Batches b = batches(cfg, 4, kB, kT, 0);
  const float scale = 1.0f / (4 * kB * kT);
  const PipelineStepResult r = ex.step({b.tokens, b.targets, kB, kT, scale});
  const LossSum ref = reference_step(ctx, whole, b, scale);
  if (mc.coord.pp == 1) {
    EXPECT_NEAR(r.loss.sum, ref.sum, 1e-6 * ref.sum);
  }
  const Grads gw = grads_of(whole.parameters());
  for (Parameter* p : stage.parameters()) {
    const std::vector<float> g = gathered(*mc.tp, *p, is_vocab(*p) ? cfg.vocab_size : 0);
    EXPECT_LT(max_scaled_err(g, gw.at(p->name)), 1e-5) << p->name;
  }
}

// dp = 2 x tp = 2 (4 ranks): each data-parallel replica takes its own micro-batch; gradients
// summed over dp equal the whole model's over both micro-batches.
TEST_P(TensorParallel, TimesDataParallelEqualsOneRank) {
  if (world().size() != 4) GTEST_SKIP() << "needs 4 ranks";
  const ModelConfig cfg = tp_config(GetParam());
  MeshComms mc = world().build_mesh(Mesh::resolve(2, 2, 1, 4));
  ExecContext ctx;
  Transformer model(ctx, cfg), whole(ctx, cfg);
  model.init_weights();
  whole.init_weights();
  apply_tensor_parallel(ctx, model, *mc.tp);
  const Batches b = batches(cfg, 2, kB, kT, 0);
  const float scale = 1.0f / (2 * kB * kT);
  Batches mine;
  mine.tokens = {b.tokens[static_cast<size_t>(mc.coord.dp)]};
  mine.targets = {b.targets[static_cast<size_t>(mc.coord.dp)]};
  LossSum l = reference_step(ctx, model, mine, scale);
  for (Parameter* p : model.parameters()) mc.dp->all_reduce(p->grad(), ReduceOp::Sum).wait();
  Tensor ls = Tensor::from_vector({static_cast<float>(l.sum)}, {1});
  mc.dp->all_reduce(ls, ReduceOp::Sum).wait();
  const LossSum ref = reference_step(ctx, whole, b, scale);
  EXPECT_NEAR(ls.f32()[0], ref.sum, 1e-6 * ref.sum);
  const Grads gw = grads_of(whole.parameters());
  for (Parameter* p : model.parameters()) {
    const std::vector<float> g = gathered(*mc.tp, *p, is_vocab(*p) ? cfg.vocab_size : 0);
    EXPECT_LT(max_scaled_err(g, gw.at(p->name)), 1e-5) << p->name;
  }
}

// Sequence parallelism: the norms run on each rank's slice of the sequences, their partial
// gradients summed by sum_replicated_parts; losses and every gradient as one rank, also with
// B > 1 (the slices interleave across sequences) and for evaluation; the vocab-parallel head
// in chunks of rows that do not divide the gathered rows.
TEST_P(TensorParallel, SequenceParallelEqualsOneRank) {
  Communicator& tp = world().world();
  const ModelConfig cfg = tp_config(GetParam());
  constexpr int64_t T = 8;  // divisible by tp = 2 and 4
  ExecContext ctx;
  Transformer model(ctx, cfg), whole(ctx, cfg);
  model.init_weights();
  whole.init_weights();
  TensorParallelOptions o;
  o.sequence_parallel = true;
  o.head_chunk_rows = 5;  // the head's 16 rows in chunks of 5, 5, 5 and 1
  apply_tensor_parallel(ctx, model, tp, o);
  int norms = 0;
  for (const Parameter* p : model.parameters())
    if (p->name.find("norm") != std::string::npos || p->name.find("ln_") != std::string::npos) {
      EXPECT_EQ(p->shard.replicas, tp.size()) << p->name;
      ++norms;
    }
  EXPECT_GE(norms, 2 * cfg.n_layer + 1);
  const Batches b = batches(cfg, 2, kB, T, 0);
  const float scale = 1.0f / (2 * kB * T);
  const LossSum l = reference_step(ctx, model, b, scale);
  sum_replicated_parts(ctx, model.parameters(), tp);
  const LossSum ref = reference_step(ctx, whole, b, scale);
  EXPECT_NEAR(l.sum, ref.sum, 1e-6 * ref.sum);
  EXPECT_EQ(l.count, ref.count);
  const Grads gw = grads_of(whole.parameters());
  for (Parameter* p : model.parameters()) {
    const std::vector<float> g = gathered(tp, *p, is_vocab(*p) ? cfg.vocab_size : 0);
    EXPECT_LT(max_scaled_err(g, gw.at(p->name)), 1e-5) << p->name;
  }
  const LossSum e = model.forward_loss(ctx, b.tokens[1], b.targets[1]);
  const LossSum we = whole.forward_loss(ctx, b.tokens[1], b.targets[1]);
  EXPECT_NEAR(e.sum, we.sum, 1e-6 * we.sum);
  EXPECT_NEAR(model_parallel_grad_norm(ctx, model.parameters(), &tp, nullptr),
              global_grad_norm(ctx, whole.parameters()), 1e-5);
}

// The gather and reduce-scatter along the sequence: exact values for B = 3 sequences.
TEST(SequenceParallelCollectives, SlicesOfEverySequence) {
  Communicator& tp = world().world();
  const int n = tp.size(), r = tp.rank();
  constexpr int64_t B = 3, C = 2;
  const int64_t T = 2 * n, Tl = 2;
  ExecContext ctx;
  std::vector<float> mine;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tl; ++t)
      for (int64_t c = 0; c < C; ++c) mine.push_back(1000.0f * b + 10.0f * (r * Tl + t) + c);
  const Tensor whole = seq_all_gather(ctx, tp, Tensor::from_vector(mine, {B, Tl, C}));
  ASSERT_EQ(whole.shape(), (Shape{B, T, C}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(whole.f32()[(b * T + t) * C + c], 1000.0f * b + 10.0f * t + c);
  // Every rank contributes (rank + 1) x whole; the slice of the sum is n(n+1)/2 x its slice.
  Tensor part = Tensor::empty({B, T, C});
  for (int64_t i = 0; i < part.numel(); ++i) part.f32()[i] = (r + 1) * whole.f32()[i];
  const Tensor sum = seq_reduce_scatter(ctx, tp, part, DType::F32);
  ASSERT_EQ(sum.shape(), (Shape{B, Tl, C}));
  for (size_t i = 0; i < mine.size(); ++i) ASSERT_EQ(sum.f32()[i], n * (n + 1) / 2 * mine[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Families, TensorParallel, ::testing::Values("gpt2", "llama"),
                         [](const auto& i) { return i.param; });

// What each model pass put into the model, by kind: the wrappers of activation checkpointing
// and LoRA, the core modules they wrap, and what mixed precision converts.
std::map<std::string, int> census(Transformer& m) {
  std::map<std::string, int> n;
  m.visit([&](Module& x) {
    if (dynamic_cast<Recompute*>(&x)) ++n["Recompute"];
    if (dynamic_cast<RecomputeOutput*>(&x)) ++n["RecomputeOutput"];
    if (dynamic_cast<RecomputeActivation*>(&x)) ++n["RecomputeActivation"];
    if (dynamic_cast<LoraLinear*>(&x)) ++n["LoraLinear"];
    if (dynamic_cast<Linear*>(&x)) ++n["Linear"];
    if (dynamic_cast<SelfAttention*>(&x)) ++n["SelfAttention"];
    if (dynamic_cast<MLP*>(&x)) ++n["MLP"];
    if (dynamic_cast<ActivationFn*>(&x)) ++n["ActivationFn"];
  });
  for (Parameter* p : m.parameters()) {
    ++n["parameters"];
    if (p->trainable) ++n["trainable"];
    if (p->value.dtype() == DType::BF16) ++n["bf16 values"];
  }
  return n;
}

// Every pass touches the same modules on one rank and under tensor parallelism: the placement
// keeps the core modules (and the passes' wrappers around them) and only splits their weights.
TEST(TensorParallelPlacement, PassesTouchTheSameModulesAsOnOneRank) {
  Communicator& tp = world().world();
  if (tp.size() != 2) GTEST_SKIP() << "tp = 2 only (the tiny models' 4 heads and 2 KV heads)";
  for (const std::string family : {"gpt2", "llama"}) {
    for (const Checkpointing mode : {Checkpointing::Selective, Checkpointing::Full}) {
      const ModelConfig cfg = tp_config(family);
      ExecContext ctx;
      Transformer one(ctx, cfg), placed(ctx, cfg);
      LoraConfig lc;
      lc.rank = 2;
      lc.alpha = 4;
      lc.targets = {"all-linear"};
      std::map<std::string, int> wrapped;
      for (Transformer* m : {&one, &placed}) {
        m->init_weights();
        wrapped[m == &one ? "lora one" : "lora placed"] = apply_lora(*m, lc, 5);
        wrapped[m == &one ? "ckpt one" : "ckpt placed"] = apply_checkpointing(*m, mode, 1);
      }
      EXPECT_GT(apply_tensor_parallel(ctx, placed, tp), 0);
      EXPECT_EQ(wrapped["lora one"], wrapped["lora placed"]);
      EXPECT_EQ(wrapped["ckpt one"], wrapped["ckpt placed"]);
      MasterWeights mw_one(ctx, one.parameters(), DType::BF16);
      MasterWeights mw_placed(ctx, placed.parameters(), DType::BF16);
      const auto a = census(one), b = census(placed);
      EXPECT_EQ(a, b) << family << " " << enum_name(mode);
      EXPECT_EQ(mw_one.params().size(), mw_placed.params().size()) << family << " " << enum_name(mode);
      if (mode == Checkpointing::Selective) {
        EXPECT_EQ(b.count("RecomputeActivation") ? b.at("RecomputeActivation") : 0, cfg.n_layer)
            << family;
        EXPECT_EQ(b.count("RecomputeOutput") ? b.at("RecomputeOutput") : 0, 2 * cfg.n_layer)
            << family;
      }
    }
  }
}

// Selective checkpointing rebuilds the norms' and the activation function's outputs under tensor
// parallelism too: the activation peak of one micro-batch falls by the two norm outputs of
// every block (what rebuilding the norms alone saves, measured) plus at least half a block's
// worth of the activation outputs (this rank's (B, T, F / tp) columns) per block.
TEST(TensorParallelPlacement, SelectiveCheckpointingLowersTheActivationPeak) {
  Communicator& tp = world().world();
  if (tp.size() != 2) GTEST_SKIP() << "tp = 2 only (the tiny models' 4 heads and 2 KV heads)";
  for (const std::string family : {"gpt2", "llama"}) {
    ModelConfig cfg = tp_config(family, 4);
    cfg.n_embd = 32;
    cfg.context_length = 32;
    if (cfg.is_llama()) cfg.ffn_hidden = 96;
    const int64_t B = 4, T = 32;
    auto peak = [&](Checkpointing mode) {
      ExecContext ctx;
      Transformer m(ctx, cfg);
      m.init_weights();
      apply_checkpointing(m, mode, 1);
      apply_tensor_parallel(ctx, m, tp);
      const Tensor tok = model_test::tokens_of(B, T, cfg.vocab_size, 3);
      const Tensor tgt = model_test::tokens_of(B, T, cfg.vocab_size, 4);
      ctx.allocator().reset_peaks();
      MicroBatch mb(ctx);
      m.forward_backward(mb, tok, tgt, 1.0f / (B * T));
      return ctx.allocator().stats().peak_bytes[static_cast<int>(MemCategory::Activations)];
    };
    const int64_t none = peak(Checkpointing::None), selective = peak(Checkpointing::Selective);
    // Per block: the activation's (B, T, F / tp) output and the two norms' (B, T, C) outputs.
    const int64_t f_local = cfg.ffn() / tp.size();
    const int64_t act = B * T * f_local * 4;
    const int64_t norms = 2 * B * T * cfg.n_embd * 4;
    std::printf("%s tp=%d activation peak: none %lld, selective %lld bytes (saved %lld; per block: "
                "activation output %lld, norm outputs %lld)\n",
                family.c_str(), tp.size(), static_cast<long long>(none),
                static_cast<long long>(selective), static_cast<long long>(none - selective),
                static_cast<long long>(act), static_cast<long long>(norms));
    EXPECT_GE(none - selective, cfg.n_layer * norms + cfg.n_layer / 2 * act) << family;
  }
}

TEST(TensorParallelErrors, SizesThatDoNotSplitNameTheKey) {
  ModelConfig c = tp_config("llama");
  c.n_head = 3;
  c.n_kv_head = 3;
  c.n_embd = 9;
  try {
    check_tensor_parallel(c, 2);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_head is 3"), std::string::npos) << e.what();
  }
  // kv heads split (tp divides them) or replicated (they divide tp); 3 kv heads on tp = 4 fit
  // neither way.
  c = tp_config("llama");
  c.n_kv_head = 1;
  EXPECT_NO_THROW(check_tensor_parallel(c, 2));
  c.n_head = 12;
  c.n_kv_head = 3;
  c.n_embd = 48;
  c.ffn_hidden = 64;
  try {
    check_tensor_parallel(c, 4);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_kv_head is 3 and parallel.tp = 4"),
              std::string::npos)
        << e.what();
  }
  c = tp_config("llama");
  c.ffn_hidden = 9;
  try {
    check_tensor_parallel(c, 2);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("ffn_hidden"), std::string::npos) << e.what();
  }
  EXPECT_EQ(padded_vocab(11, 2, 1), 12);
  EXPECT_EQ(padded_vocab(50257, 2, 64), 50304);
  EXPECT_THROW(check_tensor_parallel(tp_config("gpt2"), 2, {0}), UserError);
}

}  // namespace
}  // namespace braid::test
