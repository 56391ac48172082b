// Memory model. Every formula is written out with its source in docs/plan.md.
#include "launch/plan/memory_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "launch/plan/model_math.h"

namespace braid::plan {

namespace {
constexpr double kBucketBytes = 25 * kMiB;  // gradient bucket cap (ARCHITECTURE.md)
}  // namespace

double layer_activation_bytes(const ModelConfig& m, const TrainOptions& t, int64_t s, int64_t b,
                              int tp) {
  const double e = precision_bytes(t.precision);
  const double h = m.n_embd, a = m.n_head, F = m.ffn();
  const double kvd = static_cast<double>(m.kv_heads()) * m.head_dim();
  const double tokens = static_cast<double>(s) * b;
  const bool drop = uses_dropout(m, t);
  const double rep_div = t.sequence_parallel ? tp : 1.0;
  if (t.checkpointing == Checkpointing::Full) return tokens * e * h / rep_div;  // block input
  // Per token: tensors replicated across TP ranks unless sequence parallel: the two norm
  // inputs, the QKV and first-MLP matmul inputs and the two dropout masks (10h for GPT).
  const double replicated = 4.0 * e * h + (drop ? 2.0 * h : 0.0);
  // Sharded over TP: Q and K, V, the output-projection input, and the MLP intermediates
  // (GELU: its input and output; SwiGLU: gate, up and their product). 24h for GPT.
  const double mlp = (m.is_llama() ? 3.0 : 2.0) * e * F;
  const double sharded = e * (h + kvd) + e * kvd + e * h + mlp;
  // Attention scores: softmax output, and with dropout its mask and output (5as for GPT).
  const bool keep_scores = !t.flash_attention && t.checkpointing == Checkpointing::None;
  const double scores = keep_scores ? a * static_cast<double>(s) * (e + (drop ? 1.0 + e : 0.0)) : 0;
  return tokens * (replicated / rep_div + (sharded + scores) / tp);
}

double inflight_microbatches(const Layout& layout, int micro_batches) {
  const double p = layout.pp, mb = micro_batches;
  if (layout.schedule == "gpipe") return mb;
  if (layout.schedule == "interleaved" && layout.vp > 1)
    return std::min(mb, p + (p - 1) / layout.vp);
  return std::min(mb, p);
}

double lora_base_bytes(const std::string& base) {
  if (base == "bf16" || base == "fp16") return 2.0;
  if (base == "int8") return 1.0;
  // NF4 with double quantisation: 4 bits + 0.127 bits of constants (Dettmers et al. 2023).
  if (base == "4bit" || base == "nf4") return (4.0 + 0.127) / 8.0;
  user_error("LoRA base '{}' is unknown; expected bf16, int8 or 4bit", base);
}

QuantBytesPerWeight quant_bytes_per_weight(const std::string& base, int64_t block,
                                           bool double_quant) {
  BRAID_CHECK(block > 0, "quantisation block {}", block);
  QuantBytesPerWeight q;
  if (base == "int8")
    q.codes = 1.0;
  else if (base == "nf4" || base == "4bit")
    q.codes = 0.5;
  else
    user_error("quantised base '{}' is unknown; expected int8 or nf4", base);
  const double per_block = double_quant ? 1.0 + 4.0 / 256.0 : 4.0;
  q.constants = per_block / static_cast<double>(block);
  return q;
}

double optimizer_state_bytes(const std::string& optimizer) {
  if (optimizer == "adamw") return 8.0;
  if (optimizer == "adamw8bit") return 2.0 + 8.0 / 2048.0;
  return 4.0;
}

double interleaved_inflight_blocks(const ModelConfig& m, const TrainOptions& t,
                                   const Layout& layout, int micro_batches, int stage) {
  const int p = layout.pp, v = layout.vp;
  const bool listed = static_cast<int>(t.virtual_stage_blocks.size()) == p * v;
  auto chunk_blocks = [&](int j) {  // blocks of this rank's j-th chunk
    return listed ? static_cast<double>(t.virtual_stage_blocks[static_cast<size_t>(j * p + stage)])
                  : static_cast<double>((m.n_layer + p - 1) / p) / v;
  };
  const int64_t forwards =
      std::min<int64_t>(static_cast<int64_t>(micro_batches) * v,
                        2LL * (p - 1 - stage) + static_cast<int64_t>(v - 1) * p + 1);
  double blocks = 0;
  for (int64_t k = 0; k < forwards; ++k) {
    const int64_t group = k / (static_cast<int64_t>(p) * v);  // groups of p micro-batches
    const int j = static_cast<int>((k - group * p * v) / p);  // chunk within the group
    blocks += chunk_blocks(j);
  }
  return blocks;
}

int micro_batches_per_step(const TrainOptions& t, const Layout& layout) {
  const int64_t per_step = static_cast<int64_t>(layout.dp) * t.micro_batch;
  if (t.global_batch % per_step != 0)
    user_error("global batch {} is not a multiple of dp {} x micro-batch {}", t.global_batch,
               layout.dp, t.micro_batch);
  return static_cast<int>(t.global_batch / per_step);
}

MemoryBreakdown stage_memory(const ModelConfig& m, const TrainOptions& t, const Layout& layout,
                             const GpuSpec& gpu, int stage) {
  const int p = layout.pp, tp = layout.tp, cp = layout.cp;
  const int64_t s = t.seq > 0 ? t.seq : m.context_length;
  // ZeRO shards over every rank that holds the same parameters: dp, and cp (context-parallel
  // ranks hold the same weights and reduce gradients together, as in Megatron-LM).
  const double shard = static_cast<double>(layout.dp) * cp;
  const int64_t b = t.micro_batch;
  const double e = precision_bytes(t.precision);
  const double layers = stage_blocks_of(t, m.n_layer, p, stage);
  const bool first = stage == 0, last = stage == p - 1;
  const bool lora = t.lora_rank > 0;

  // Parameters held by this rank. The last stage of a tied model keeps its own copy of the
  // embedding as the LM head (Megatron does the same) so it needs the gradient all-reduce.
  const double blocks = layers * static_cast<double>(block_params(m)) / tp;
  double edge = 0;
  if (first) edge += static_cast<double>(embedding_params(m)) / tp;
  if (last) {
    edge += static_cast<double>(head_params(m)) / tp;
    if (m.tied() && p > 1) edge += static_cast<double>(m.vocab_size) * m.n_embd / tp;
  }
  const double lora_p =
      lora
          ? layers * static_cast<double>(lora_params_per_block(m, t.lora_rank, t.lora_targets)) / tp
          : 0.0;

  MemoryBreakdown mem;
  mem.stage = stage;
  const double trainable = lora ? lora_p : blocks + edge;
  // Frozen LoRA bases quantise the block matmuls; embeddings and head stay in 16 bits.
  mem.weights =
      lora ? blocks * lora_base_bytes(t.lora_base) + edge * 2.0 + lora_p * e : (blocks + edge) * e;
  mem.trainable_weights = trainable * e;
  mem.weight_bytes_full = mem.weights;
  const double grad_b =
      (t.precision == Precision::FP32 || t.grad_precision == Precision::FP32) ? 4.0 : 2.0;
  mem.grad_bytes_full = trainable * grad_b;
  mem.grads = mem.grad_bytes_full / (t.zero >= 2 ? shard : 1.0);
  const double state_b =
      optimizer_state_bytes(t.optimizer) + (t.precision == Precision::FP32 ? 0.0 : 4.0);
  mem.optimizer = trainable * state_b / (t.zero >= 1 ? shard : 1.0);
  if (t.zero >= 3) {
    // Each rank keeps 1/shard of the weights between uses. While a unit (a block, or this
    // stage's embedding or head) runs, its weights are gathered whole, and so are the next
    // zero3_prefetch units'; in backward the unit's whole gradient also waits for its
    // reduce-scatter. The largest unit of the stage sets the size.
    const double block = static_cast<double>(block_params(m)) / tp;
    const double block_lora = layers > 0 ? lora_p / layers : 0.0;
    const double block_w = lora ? block * lora_base_bytes(t.lora_base) + block_lora * e : block * e;
    const double unit_w = std::max(block_w, edge * (lora ? 2.0 : e));
    const double unit_g = (lora ? block_lora : std::max(block, edge)) * grad_b;
    mem.weights /= shard;
    mem.trainable_weights /= shard;
    mem.gathered = (1.0 + std::max(0, t.zero3_prefetch)) * unit_w + unit_g;
  }

  const int mbs = micro_batches_per_step(t, layout);
  // Stage k of 1F1B holds p - k micro-batches; the last stage holds one.
  double inflight = inflight_microbatches(layout, mbs);
  if (!first) inflight = std::max(1.0, std::min<double>(inflight, p - stage));
  if (layout.schedule == "gpipe") inflight = mbs;
  const double rep_div = t.sequence_parallel ? tp : 1.0;
  // Context parallelism splits every sequence over cp ranks: each holds 1/cp of the tokens
  // (and of the score rows with standard attention).
  const double per_layer = layer_activation_bytes(m, t, s, b, tp) / cp;
  // Interleaved (unless a braid run's own split is given): the chunks the warm-up holds.
  const bool chunks = layout.schedule == "interleaved" && layout.vp > 1 && t.stage_blocks.empty();
  double act =
      (chunks ? interleaved_inflight_blocks(m, t, layout, mbs, stage) : layers * inflight) *
      per_layer;
  if (t.checkpointing == Checkpointing::Full) {
    // Recomputing one block needs its full activations once.
    TrainOptions full = t;
    full.checkpointing = Checkpointing::None;
    act += layer_activation_bytes(m, full, s, b, tp) / cp;
  }
  const double tokens = static_cast<double>(s) * b / cp;
  if (first) act += inflight * tokens * e * m.n_embd / rep_div;  // embedding output
  // Last stage: the final norm's input, the head's input and the fp32 logits of the loss
  // (4sbv/t). Sequence parallelism shards the norm's input; the head needs every position, so
  // its input is gathered whole.
  if (last) act += tokens * (e * m.n_embd / rep_div + e * m.n_embd + 4.0 * m.vocab_size / tp);
  mem.activations = act;

  double comm = 0;
  if (layout.dp > 1 && !t.grads_in_buckets) comm += 2 * kBucketBytes;
  if (tp > 1) comm += tokens * e * m.n_embd;          // all-reduce / all-gather scratch
  if (p > 1) comm += 4 * tokens * e * m.n_embd / tp;  // send/recv of both directions
  if (cp > 1)  // ring attention: the K, V chunk being received and the one being sent
    comm += 2.0 * 2.0 * tokens * e * static_cast<double>(m.kv_heads()) * m.head_dim() / tp;
  mem.comm = comm;
  // Fixed runtime overhead plus allocator fragmentation (5% of the dynamic memory).
  mem.overhead = gpu.overhead_gib * kGiB + 0.05 * (mem.activations + mem.comm);
  return mem;
}

MemoryBreakdown training_memory(const ModelConfig& m, const TrainOptions& t, const Layout& layout,
                                const GpuSpec& gpu) {
  MemoryBreakdown a = stage_memory(m, t, layout, gpu, 0);
  if (layout.pp == 1) return a;
  MemoryBreakdown z = stage_memory(m, t, layout, gpu, layout.pp - 1);
  return z.total() > a.total() ? z : a;
}

}  // namespace braid::plan
