// Time model: roofline-style compute, ring collectives, pipeline bubble (docs/plan.md).
#include "launch/plan/time_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "launch/plan/cpu_model.h"
#include "launch/plan/gpu_table.h"
#include "launch/plan/memory_model.h"
#include "launch/plan/model_math.h"

namespace braid::plan {

double bubble_fraction(int p, int m, int v) {
  return static_cast<double>(p - 1) / (static_cast<double>(v) * m);
}

double ring_allreduce_s(double bytes, int n, double bw_gbs, double efficiency,
                        double hop_latency_s) {
  if (n <= 1 || bytes <= 0) return 0.0;
  return 2.0 * (n - 1) / n * bytes / (bw_gbs * 1e9 * efficiency) + 2.0 * (n - 1) * hop_latency_s;
}

double ring_gather_s(double bytes, int n, double bw_gbs, double efficiency, double hop_latency_s) {
  if (n <= 1 || bytes <= 0) return 0.0;
  return static_cast<double>(n - 1) / n * bytes / (bw_gbs * 1e9 * efficiency) +
         (n - 1) * hop_latency_s;
}

double tp_bandwidth(const Cluster& c, const Layout& l) {
  return l.tp <= c.gpus_per_node ? c.intra_bw_gbs : c.inter_bw_gbs;
}
double cp_bandwidth(const Cluster& c, const Layout& l) {
  return l.tp * l.cp <= c.gpus_per_node ? c.intra_bw_gbs : c.inter_bw_gbs;
}
double pp_bandwidth(const Cluster& c, const Layout& l) {
  return l.tp * l.cp * l.pp <= c.gpus_per_node ? c.intra_bw_gbs : c.inter_bw_gbs;
}
double dp_bandwidth(const Cluster& c, const Layout& l) {
  if (l.gpus() <= c.gpus_per_node) return c.intra_bw_gbs;
  // A data-parallel group with k members on each node crosses nodes through k NICs at once: a
  // ring (or NCCL's k channels) enters each node once per channel, so each member's share of the
  // inter-node bytes is 1/k. With tp x cp x pp filling a node (k = 1), one NIC per member.
  const int replica = l.tp * l.cp * l.pp;
  const int k = replica < c.gpus_per_node ? c.gpus_per_node / replica : 1;
  return std::min(c.intra_bw_gbs, c.inter_bw_gbs * k);
}

void check_layout(const ModelConfig& m, const TrainOptions& t, const Layout& l, const Cluster& c) {
  if (l.dp < 1 || l.tp < 1 || l.pp < 1 || l.vp < 1 || l.cp < 1)
    user_error("layout dp={} tp={} pp={} vp={} cp={}: every degree must be >= 1", l.dp, l.tp, l.pp,
               l.vp, l.cp);
  if (l.gpus() != c.total_gpus())
    user_error(
        "layout dp={} x tp={} x pp={} x cp={} = {} GPUs, but the cluster has {} ({} nodes x {})",
        l.dp, l.tp, l.pp, l.cp, l.gpus(), c.total_gpus(), c.nodes, c.gpus_per_node);
  const int64_t s = t.seq > 0 ? t.seq : m.context_length;
  if (l.cp > 1 && s % (2 * l.cp) != 0)
    user_error(
        "cp={} needs the sequence length ({}) divisible by 2 x cp (each rank takes two chunks so "
        "the "
        "causal work is balanced)",
        l.cp, s);
  if (m.n_head % l.tp != 0 || m.kv_heads() % l.tp != 0)
    user_error("tp={} must divide the heads ({}) and kv heads ({})", l.tp, m.n_head, m.kv_heads());
  if (l.pp * l.vp > m.n_layer && t.virtual_stage_blocks.empty())
    user_error("pp={} x vp={} exceeds the {} layers", l.pp, l.vp, m.n_layer);
  // The largest stage (ceil(L/p) layers, the one the time model runs) must split into vp equal
  // chunks; smaller first or last stages, as Llama 3 used, are allowed.
  if (!t.virtual_stage_blocks.empty()) {
    int sum = 0;
    for (int b : t.virtual_stage_blocks) sum += b < 0 ? m.n_layer + 1 : b;
    if (static_cast<int>(t.virtual_stage_blocks.size()) != l.pp * l.vp || sum != m.n_layer)
      user_error(
          "virtual stage blocks: {} entries summing to {}; expected pp x vp = {} entries "
          "(each >= 0) summing to the {} layers",
          t.virtual_stage_blocks.size(), sum, l.pp * l.vp, m.n_layer);
  }
  const int stage_layers = (m.n_layer + l.pp - 1) / l.pp;
  if (l.vp > 1 && t.virtual_stage_blocks.empty() && stage_layers % l.vp != 0)
    user_error(
        "vp={}: a stage of {} layers ({} layers over pp={}) does not split into {} equal virtual "
        "stages; "
        "choose a vp that divides {}",
        l.vp, stage_layers, m.n_layer, l.pp, l.vp, stage_layers);
  if (l.schedule != "gpipe" && l.schedule != "1f1b" && l.schedule != "interleaved")
    user_error("schedule '{}' is unknown; expected gpipe, 1f1b or interleaved", l.schedule);
  if (l.vp > 1 && l.schedule != "interleaved")
    user_error("vp={} needs --schedule interleaved", l.vp);
  if (t.micro_batch < 1) user_error("micro-batch is {}; expected >= 1", t.micro_batch);
  if (t.zero < 0 || t.zero > 3) user_error("zero is {}; expected 0, 1, 2 or 3", t.zero);
  if (t.stated_mfu < 0 || t.stated_mfu > 1)
    user_error("--mfu is {}; expected a fraction in (0, 1]", t.stated_mfu);
  if (t.attention_kernel != "flash" && t.attention_kernel != "cudnn")
    user_error("attention kernel '{}' is unknown; expected flash or cudnn", t.attention_kernel);
  if (t.optimizer != "adamw" && t.optimizer != "adamw8bit" && t.optimizer != "sgd")
    user_error("optimizer '{}' is unknown; expected adamw, adamw8bit or sgd", t.optimizer);
  if (t.grad_precision == Precision::FP16)
    user_error("grad precision fp16 is not modelled; expected fp32 or bf16");
  const int mbs = micro_batches_per_step(t, l);
  // Interleaving runs the micro-batches in groups of p (Megatron-LM requires a multiple of p);
  // with fewer, the chunks of one micro-batch still wait on each other and nothing is gained.
  if (l.vp > 1 && mbs % l.pp != 0)
    user_error(
        "vp={}: the interleaved schedule needs the micro-batches per step ({} = global batch {} / "
        "(dp {} x "
        "micro-batch {})) to be a multiple of pp={}; use --vp 1 or a larger global batch",
        l.vp, mbs, t.global_batch, l.dp, t.micro_batch, l.pp);
}

namespace {

// The rates a prediction works at: the GPU's (or CPU profile's) peak and efficiencies, and the
// links' collective model.
struct Rates {
  double peak = 0;       // dense FLOP/s at the run's precision
  double rate = 0;       // GEMM FLOP/s reached
  double attn_rate = 0;  // the attention core's FLOP/s
  double hbm = 0;        // memory bytes/s
  // A CPU profile with braid's all-reduce measured (tools/bench_allreduce --profile): every
  // group's link is that fit (ranks of one machine share one memory system); the measured
  // rate is already what a collective reaches, and its fixed cost is two ring hops of 2 ranks.
  bool cpu_comm = false;
  double eff = 0;  // the fraction of a link's bandwidth a collective reaches
  double hop = 0;  // one ring hop's fixed cost, s
  double cpu_bus_gbs = 0;
  double link(double group_bw) const { return cpu_comm ? cpu_bus_gbs : group_bw; }
};

Rates rates_of(const TrainOptions& t, const Cluster& c) {
  Rates k;
  k.peak = peak_tflops(c.gpu, t.precision) * 1e12;
  k.rate = k.peak * c.gpu.matmul_efficiency;
  k.attn_rate = k.peak * (c.gpu.attention_efficiency > 0 ? c.gpu.attention_efficiency
                                                         : c.gpu.matmul_efficiency);
  if (t.flash_attention && t.attention_kernel == "cudnn")
    k.attn_rate *= std::max(1.0, c.gpu.native_attention_speedup);
  k.hbm = c.gpu.mem_bw_gbs * 1e9;
  k.cpu_comm = c.cpu.comm_bus_gbs > 0;
  k.eff = k.cpu_comm ? 1.0 : kCollectiveEfficiency;
  k.hop = k.cpu_comm ? c.cpu.comm_latency_us * 1e-6 / 2.0 : kLinkLatencyS;
  k.cpu_bus_gbs = c.cpu.comm_bus_gbs;
  return k;
}

// One micro-batch through the slowest pipeline stage.
struct StageTime {
  double tok_mb = 0;         // tokens of one micro-batch on one rank (1/cp of them)
  double layers = 0;         // blocks of the slowest stage
  double layer_flops_s = 0;  // one block's GEMM + attention time (what TP overlap hides behind)
  double compute = 0;        // the stage's compute time
};

// The slowest stage: the ceil(L/p)-block one with the LM head, or, for a braid run's own split,
// whichever of its stages costs most. With a calibrated CPU profile the kernel groups are timed
// at the rates measured for braid's kernels (and r.cpu_kernels filled in).
StageTime stage_time(const ModelConfig& m, const TrainOptions& t, const Layout& l, const Cluster& c,
                     const Rates& k, int64_t s, int mbs, PlanResult& r) {
  StageTime st;
  const int64_t b = t.micro_batch;
  st.tok_mb = static_cast<double>(s) * b / l.cp;
  const double tok_mb = st.tok_mb;
  TrainOptions nock = t;
  nock.checkpointing = Checkpointing::None;
  const double act_layer = layer_activation_bytes(m, nock, s, b, l.tp) / l.cp;
  const double passes = t.checkpointing == Checkpointing::Full ? 1.5 : 1.0;  // extra forward
  // GEMMs at the matmul rate, the attention core at its own (fused attention kernels run below
  // large GEMMs; most visible for small widths and long sequences, where it is a larger share).
  const double attn_flops = block_attention_flops_per_token(m, t, s);
  st.layer_flops_s =
      ((block_hw_flops_per_token(m, t, s) - attn_flops) / k.rate + attn_flops / k.attn_rate) *
      tok_mb / l.tp;
  const double layer_s = st.layer_flops_s + c.gpu.elementwise_touches * passes * act_layer / k.hbm;
  const double head_s = head_flops_per_token(m, t) * tok_mb / l.tp / k.rate +
                        3.0 * 4.0 * tok_mb * m.vocab_size / l.tp / k.hbm;  // fp32 logits
  int slowest = l.pp - 1;
  for (int i = 0; i < l.pp; ++i)
    if (stage_blocks_of(t, m.n_layer, l.pp, i) * layer_s + (i == l.pp - 1 ? head_s : 0.0) >
        stage_blocks_of(t, m.n_layer, l.pp, slowest) * layer_s +
            (slowest == l.pp - 1 ? head_s : 0.0))
      slowest = i;
  st.layers = stage_blocks_of(t, m.n_layer, l.pp, slowest);
  st.compute = st.layers * layer_s + (slowest == l.pp - 1 ? head_s : 0.0);
  if (has_kernel_rates(c.cpu)) {
    // The slowest stage of a braid run's split: the last, or its largest other one.
    TrainOptions local = t;
    local.seq = static_cast<int>(s / l.cp);
    const TrainOptions& tt = l.cp > 1 ? local : t;
    CpuStepTime kt = cpu_microbatch_time(m, tt, c.cpu,
                                         stage_blocks_of(t, m.n_layer, l.pp, l.pp - 1), true, l.tp);
    st.layers = stage_blocks_of(t, m.n_layer, l.pp, l.pp - 1);
    for (int i = 0; i + 1 < l.pp && static_cast<int>(t.stage_blocks.size()) == l.pp; ++i) {
      const CpuStepTime o =
          cpu_microbatch_time(m, tt, c.cpu, stage_blocks_of(t, m.n_layer, l.pp, i), false, l.tp);
      if (o.compute() > kt.compute()) {
        kt = o;
        st.layers = stage_blocks_of(t, m.n_layer, l.pp, i);
      }
    }
    st.compute = kt.compute();
    r.kernel_model = true;
    r.cpu_kernels = {kt.gemm * mbs,
                     kt.attention * mbs,
                     kt.lm_head * mbs,
                     kt.elementwise * mbs,
                     kt.activation * mbs,
                     kt.calls * mbs,
                     0.0};
  }
  return st;
}

// Tensor parallel: 2 all-reduces (or RS+AG pairs) forward, 2 backward, 2 more per recompute.
// With overlap they hide behind the layer's GEMMs (Megatron's TP communication overlap).
double tp_comm_per_microbatch(const ModelConfig& m, const TrainOptions& t, const Layout& l,
                              const Cluster& c, const Rates& k, const StageTime& st) {
  if (l.tp <= 1) return 0.0;
  const double e = precision_bytes(t.precision);
  const double n_coll = t.checkpointing == Checkpointing::Full ? 6.0 : 4.0;
  double tp_mb =
      st.layers * n_coll *
      ring_allreduce_s(st.tok_mb * e * m.n_embd, l.tp, k.link(tp_bandwidth(c, l)), k.eff, k.hop);
  if (t.tp_overlap) tp_mb = std::max(0.0, tp_mb - st.layers * st.layer_flops_s);
  return tp_mb;
}

// Context parallel (ring attention): every rank passes its K, V chunk around the ring, cp - 1
// hops forward; backward passes K, V again and returns dK, dV (3 chunk volumes in all). The
// transfers overlap the attention core of the chunk in hand; what exceeds it is exposed.
double cp_comm_per_microbatch(const ModelConfig& m, const TrainOptions& t, const Layout& l,
                              const Cluster& c, const Rates& k, const StageTime& st, int64_t s) {
  if (l.cp <= 1) return 0.0;
  const double e = precision_bytes(t.precision);
  const double kv_chunk = 2.0 * st.tok_mb * e * m.kv_heads() * m.head_dim() / l.tp;
  const double per_layer =
      3.0 * (l.cp - 1) * (kv_chunk / (k.link(cp_bandwidth(c, l)) * 1e9) + k.hop);
  const double attn_core =
      12.0 * m.n_embd * static_cast<double>(s) * st.tok_mb / l.tp / k.attn_rate;
  return st.layers * std::max(0.0, per_layer - attn_core);
}

// Seconds of `comm_s` of collectives, split evenly over v model chunks, left exposed after the
// compute they overlap. Backward (gradient reduction): chunk k's gradients are final after its
// last backward, k p chunk-backwards before the end (interleaving runs the final group of p
// micro-batches chunk by chunk, the last chunk first), and its buckets start during that
// backward; the transfers queue on one link. Forward (parameter gathers before the next step):
// chunk k's weights are needed at its first forward, k p chunk-forwards after the start, by
// buckets during it. With v = 1 both are max(0, comm - window).
double exposed_after(double comm_s, int v, int p, double window_per_chunk, bool first_chunk_last) {
  if (comm_s <= 0) return 0.0;
  const double part = comm_s / v;
  if (first_chunk_last) {
    // Backward: the end of compute is 0; chunk k may start at -(k p + 1) window_per_chunk.
    double t = -1e300;
    for (int k = v - 1; k >= 0; --k)
      t = std::max(t, -(static_cast<double>(k) * p + 1.0) * window_per_chunk) + part;
    return std::max(0.0, t);
  }
  // Forward: the gathers start at 0; chunk k is needed by (k p + 1) window_per_chunk.
  double late = 0;
  for (int k = 0; k < v; ++k)
    late = std::max(late, (k + 1) * part - (static_cast<double>(k) * p + 1.0) * window_per_chunk);
  return late;
}

// Data parallel over dp x cp ranks (both hold the same weights). ZeRO 0: one all-reduce of the
// gradients per step; ZeRO-1 (Megatron's distributed optimizer, DeepSpeed stage 1, braid's
// optim.zero 1): a reduce-scatter of the gradients and, after the update, an all-gather of the
// weights in the compute dtype. With --dp-overlap the gradient reduction runs behind the last
// micro-batch's backward (chunk by chunk under interleaving); with --param-gather-overlap the
// weights are gathered behind the next step's first forward. ZeRO-2: a reduce-scatter per
// micro-batch behind that micro-batch's backward, the same weight all-gather per step. ZeRO-3:
// per micro-batch the weights are all-gathered for forward and again for backward (ZeRO paper
// §7: 1.5x the data-parallel volume).
void dp_comm(const TrainOptions& t, const Layout& l, const Cluster& c, const Rates& k,
             double stage_mb, double stage_compute, int mbs, PlanResult& r) {
  const MemoryBreakdown& mem = r.memory;
  const int shard = l.dp * l.cp;
  const double dp_bw = k.link(dp_bandwidth(c, l));
  const double backward_chunk = t.dp_overlap ? stage_mb * 2.0 / 3.0 / l.vp : 0.0;
  const double forward_chunk = t.param_gather_overlap ? stage_mb / 3.0 / l.vp : 0.0;
  const double ag = ring_gather_s(mem.weight_bytes_full, shard, dp_bw, k.eff, k.hop);
  if (t.zero == 0) {
    r.time.dp_exposed =
        exposed_after(ring_allreduce_s(mem.grad_bytes_full, shard, dp_bw, k.eff, k.hop), l.vp, l.pp,
                      backward_chunk, true);
  } else if (t.zero == 1) {
    r.time.dp_exposed =
        exposed_after(ring_gather_s(mem.grad_bytes_full, shard, dp_bw, k.eff, k.hop), l.vp, l.pp,
                      backward_chunk, true);
    r.time.param_gather = exposed_after(ag, l.vp, l.pp, forward_chunk, false);
  } else {
    const double rs = ring_gather_s(mem.grad_bytes_full, shard, dp_bw, k.eff, k.hop);
    r.time.dp_exposed = mbs * std::max(0.0, rs - backward_chunk * l.vp);
    if (t.zero == 2) {
      r.time.param_gather = exposed_after(ag, l.vp, l.pp, forward_chunk, false);
    } else {
      r.time.param_gather =
          mbs * std::max(0.0, 2.0 * ag - (t.param_gather_overlap ? stage_compute : 0.0));
    }
  }
}

// Optimizer step: memory bound over the trainable weights, their grads and state (read +
// write); a frozen LoRA base is not touched. With a calibrated CPU profile: measured on the
// trainer's own passes when the profile has them (calls included), else the copy bandwidth
// plus 4 calls per parameter tensor.
double optimizer_time(const ModelConfig& m, const TrainOptions& t, const Layout& l,
                      const Cluster& c, const Rates& k, const PlanResult& r) {
  const MemoryBreakdown& mem = r.memory;
  if (!r.kernel_model) return 2.0 * (mem.trainable_weights + mem.grads + mem.optimizer) / k.hbm;
  const double rank_params = static_cast<double>(r.trainable) / (l.tp * l.pp);
  return c.cpu.optimizer_by_params.empty()
             ? optimizer_step_bytes(rank_params, t.optimizer) / k.hbm +
                   4.0 * parameter_tensors(m) * c.cpu.kernel_call_us * 1e-6
             : optimizer_step_bytes(rank_params, t.optimizer) /
                   (rate_at(c.cpu.optimizer_by_params, rank_params) * 1e9);
}

// Throughput, MFU and cost from the step time.
void rates_and_cost(const TrainOptions& t, const Layout& l, const Cluster& c, double peak,
                    double tokens_step, PlanResult& r) {
  const double step = r.time.step();
  const int gpus = l.gpus();
  r.tokens_per_s = tokens_step / step;
  r.tflops_per_gpu = r.model_flops_step / step / gpus / 1e12;
  r.hw_tflops_per_gpu = r.hw_flops_step / step / gpus / 1e12;
  r.mfu = r.tflops_per_gpu * 1e12 / peak;
  r.hfu = r.hw_tflops_per_gpu * 1e12 / peak;
  r.price_per_gpu_hour = c.price_per_gpu_hour;
  r.currency = c.currency;
  r.price_source = c.price_source;
  if (t.train_tokens > 0) {
    r.train_seconds = t.train_tokens / r.tokens_per_s;
    r.train_cost = r.train_seconds / 3600.0 * gpus * c.price_per_gpu_hour;
  }
  if (t.stated_mfu > 0) {
    // The users' question: 6 N D FLOPs at a stated fraction of peak, nothing else.
    const double per_s = gpus * peak * t.stated_mfu;
    r.stated_step_s = 6.0 * static_cast<double>(r.params) * tokens_step / per_s;
    if (t.train_tokens > 0) {
      r.stated_train_seconds = 6.0 * static_cast<double>(r.params) * t.train_tokens / per_s;
      r.stated_train_cost = r.stated_train_seconds / 3600.0 * gpus * c.price_per_gpu_hour;
    }
  }
}

}  // namespace

PlanResult predict(const ModelConfig& m, const TrainOptions& t, const Layout& l, const Cluster& c) {
  check_layout(m, t, l, c);
  PlanResult r;
  r.layout = l;
  r.train = t;
  const int64_t s = t.seq > 0 ? t.seq : m.context_length;
  r.seq = s;
  const Rates k = rates_of(t, c);

  r.params = m.num_params();
  r.trainable = t.lora_rank > 0 ? static_cast<int64_t>(m.n_layer) *
                                      lora_params_per_block(m, t.lora_rank, t.lora_targets)
                                : r.params;
  r.memory = training_memory(m, t, l, c.gpu);
  r.capacity_bytes = c.gpu.memory_gib * kGiB;
  r.fits = r.memory.total() <= r.capacity_bytes;
  const int mbs = micro_batches_per_step(t, l);
  r.micro_batches = mbs;

  // FLOPs per step (whole model, all GPUs).
  const double tokens_step = static_cast<double>(t.global_batch) * s;
  const double model_tok =
      m.n_layer * block_model_flops_per_token(m, t, s) + head_flops_per_token(m, t);
  const double hw_tok = m.n_layer * block_hw_flops_per_token(m, t, s) + head_flops_per_token(m, t);
  r.model_flops_step = model_tok * tokens_step;
  r.hw_flops_step = hw_tok * tokens_step;

  // One micro-batch through the slowest stage, its exposed TP and CP communication.
  const StageTime st = stage_time(m, t, l, c, k, s, mbs, r);
  const double tp_mb = tp_comm_per_microbatch(m, t, l, c, k, st);
  const double cp_mb = cp_comm_per_microbatch(m, t, l, c, k, st, s);
  const double stage_mb = st.compute + tp_mb + cp_mb;
  r.time.compute = st.compute * mbs;
  r.time.tp_comm = tp_mb * mbs;
  r.time.cp_comm = cp_mb * mbs;
  r.time.bubble = bubble_fraction(l.pp, mbs, l.vp) * stage_mb * mbs;
  if (l.pp > 1) {
    // Activations cross stage boundaries scattered over TP (Narayanan et al. 2021 §4.1).
    const double e = precision_bytes(t.precision);
    const double xfer =
        st.tok_mb * e * m.n_embd / l.tp / (k.link(pp_bandwidth(c, l)) * 1e9) + k.hop;
    // With overlap (Megatron's default) the steady-state sends and receives run beside compute;
    // the pipeline's fill and drain still wait on theirs.
    const double transfers = 2.0 * mbs * l.vp + 2.0 * (l.pp - 1);
    r.time.p2p = (t.pp_overlap ? 2.0 * (l.pp - 1) : transfers) * xfer;
  }
  dp_comm(t, l, c, k, stage_mb, st.compute, mbs, r);
  r.time.optimizer = optimizer_time(m, t, l, c, k, r);
  if (r.kernel_model) r.cpu_kernels.optimizer = r.time.optimizer;

  rates_and_cost(t, l, c, k.peak, tokens_step, r);
  return r;
}

}  // namespace braid::plan
