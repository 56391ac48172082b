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

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Memory-bound element-wise work (norms, activations, softmax, dropout, residuals) touches each
// stored activation byte about twice in forward and twice in backward.
constexpr double kElementwiseTouches = 4.0;
constexpr double kLinkLatencyS = 10e-6;  // per collective / per p2p message
}  // namespace

double bubble_fraction(int p, int m, int v) {
  return static_cast<double>(p - 1) / (static_cast<double>(v) * m);
}

double ring_allreduce_s(double bytes, int n, double bw_gbs) {
  if (n <= 1 || bytes <= 0) return 0.0;
  return 2.0 * (n - 1) / n * bytes / (bw_gbs * 1e9 * kCollectiveEfficiency) +
         2.0 * (n - 1) * kLinkLatencyS;
}

double tp_bandwidth(const Cluster& c, const Layout& l) {
  return l.tp <= c.gpus_per_node ? c.intra_bw_gbs : c.inter_bw_gbs;
}
double pp_bandwidth(const Cluster& c, const Layout& l) {
  return l.tp * l.pp <= c.gpus_per_node ? c.intra_bw_gbs : c.inter_bw_gbs;
}
double dp_bandwidth(const Cluster& c, const Layout& l) {
  return l.gpus() <= c.gpus_per_node ? c.intra_bw_gbs : c.inter_bw_gbs;
}

void check_layout(const ModelConfig& m, const TrainOptions& t, const Layout& l, const Cluster& c) {
  if (l.dp < 1 || l.tp < 1 || l.pp < 1 || l.vp < 1)
    user_error("layout dp={} tp={} pp={} vp={}: every degree must be >= 1", l.dp, l.tp, l.pp, l.vp);
  if (l.gpus() != c.total_gpus())
    user_error("layout dp={} x tp={} x pp={} = {} GPUs, but the cluster has {} ({} nodes x {})",
               l.dp, l.tp, l.pp, l.gpus(), c.total_gpus(), c.nodes, c.gpus_per_node);
  if (m.n_head % l.tp != 0 || m.kv_heads() % l.tp != 0)
    user_error("tp={} must divide the heads ({}) and kv heads ({})", l.tp, m.n_head, m.kv_heads());
  if (l.pp * l.vp > m.n_layer)
    user_error("pp={} x vp={} exceeds the {} layers", l.pp, l.vp, m.n_layer);
  if (l.schedule != "gpipe" && l.schedule != "1f1b" && l.schedule != "interleaved")
    user_error("schedule '{}' is unknown; expected gpipe, 1f1b or interleaved", l.schedule);
  if (l.vp > 1 && l.schedule != "interleaved")
    user_error("vp={} needs --schedule interleaved", l.vp);
  if (t.micro_batch < 1) user_error("micro-batch is {}; expected >= 1", t.micro_batch);
  if (t.zero != 0 && t.zero != 1) user_error("zero is {}; expected 0 or 1", t.zero);
  if (t.optimizer != "adamw" && t.optimizer != "sgd")
    user_error("optimizer '{}' is unknown; expected adamw or sgd", t.optimizer);
  if (t.grad_precision != "fp32" && t.grad_precision != "bf16")
    user_error("grad precision '{}' is unknown; expected fp32 or bf16", t.grad_precision);
  micro_batches_per_step(t, l);
}

PlanResult predict(const ModelConfig& m, const TrainOptions& t, const Layout& l,
                   const Cluster& c) {
  check_layout(m, t, l, c);
  PlanResult r;
  r.layout = l;
  r.train = t;
  const int64_t s = t.seq > 0 ? t.seq : m.context_length;
  const int64_t b = t.micro_batch;
  const double e = precision_bytes(t.precision);
  const double peak = peak_tflops(c.gpu, t.precision) * 1e12;
  const double rate = peak * c.gpu.matmul_efficiency;
  const double hbm = c.gpu.mem_bw_gbs * 1e9;

  r.params = m.num_params();
  r.trainable = t.lora_rank > 0
                    ? static_cast<int64_t>(m.n_layer) *
                          lora_params_per_block(m, t.lora_rank, t.lora_targets)
                    : r.params;
  r.memory = training_memory(m, t, l, c.gpu);
  r.capacity_bytes = c.gpu.memory_gib * kGiB;
  r.fits = r.memory.total() <= r.capacity_bytes;
  const int mbs = micro_batches_per_step(t, l);
  r.micro_batches = mbs;

  // FLOPs per step (whole model, all GPUs).
  const double tokens_step = static_cast<double>(t.global_batch) * s;
  const double model_tok = m.n_layer * block_model_flops_per_token(m, t, s) + head_flops_per_token(m, t);
  const double hw_tok = m.n_layer * block_hw_flops_per_token(m, t, s) + head_flops_per_token(m, t);
  r.model_flops_step = model_tok * tokens_step;
  r.hw_flops_step = hw_tok * tokens_step;

  // One micro-batch through the slowest stage (the last one carries the LM head).
  const double layers = std::ceil(static_cast<double>(m.n_layer) / l.pp);
  const double tok_mb = static_cast<double>(s) * b;
  TrainOptions nock = t;
  nock.checkpointing = Checkpointing::None;
  const double act_layer = layer_activation_bytes(m, nock, s, b, l.tp);
  const double passes = t.checkpointing == Checkpointing::Full ? 1.5 : 1.0;  // extra forward
  const double layer_s = block_hw_flops_per_token(m, t, s) * tok_mb / l.tp / rate +
                         kElementwiseTouches * passes * act_layer / hbm;
  const double head_s = head_flops_per_token(m, t) * tok_mb / l.tp / rate +
                        3.0 * 4.0 * tok_mb * m.vocab_size / l.tp / hbm;  // fp32 logits
  double stage_compute = layers * layer_s + head_s;
  if (has_kernel_rates(c.gpu)) {
    // A calibrated CPU profile: time each kernel group at the rate measured for braid's kernels.
    const CpuStepTime k = cpu_microbatch_time(m, t, c.gpu, layers, true, l.tp);
    stage_compute = k.compute();
    r.kernel_model = true;
    r.cpu_kernels = {k.gemm * mbs, k.attention * mbs, k.lm_head * mbs, k.elementwise * mbs,
                     k.activation * mbs, k.calls * mbs, 0.0};
  }

  // Tensor parallel: 2 all-reduces (or RS+AG pairs) forward, 2 backward, 2 more per recompute.
  double tp_mb = 0;
  if (l.tp > 1) {
    const double n_coll = t.checkpointing == Checkpointing::Full ? 6.0 : 4.0;
    tp_mb = layers * n_coll * ring_allreduce_s(tok_mb * e * m.n_embd, l.tp, tp_bandwidth(c, l));
  }
  const double stage_mb = stage_compute + tp_mb;
  r.time.compute = stage_compute * mbs;
  r.time.tp_comm = tp_mb * mbs;
  r.time.bubble = bubble_fraction(l.pp, mbs, l.vp) * stage_mb * mbs;
  if (l.pp > 1) {
    // Activations cross stage boundaries scattered over TP (Narayanan et al. 2021 §4.1).
    const double xfer = tok_mb * e * m.n_embd / l.tp / (pp_bandwidth(c, l) * 1e9) + kLinkLatencyS;
    r.time.p2p = (2.0 * mbs * l.vp + 2.0 * (l.pp - 1)) * xfer;
  }

  // Data parallel: gradients of this rank's parameters (ZeRO-1: reduce-scatter + all-gather
  // of the same volume). Overlap hides it behind the last micro-batch's backward.
  const MemoryBreakdown& mem = r.memory;
  const double dp_s = ring_allreduce_s(mem.grads, l.dp, dp_bandwidth(c, l));
  const double window = t.dp_overlap ? stage_mb * 2.0 / 3.0 : 0.0;
  r.time.dp_exposed = std::max(0.0, dp_s - window);
  // Optimizer step: memory bound over weights, grads and state (read + write).
  r.time.optimizer = 2.0 * (mem.weights + mem.grads + mem.optimizer) / hbm;
  if (r.kernel_model) {
    const double rank_params = static_cast<double>(r.trainable) / (l.tp * l.pp);
    // Measured on the trainer's own passes when the profile has them (calls included), else
    // the copy bandwidth plus 4 calls per parameter tensor.
    r.time.optimizer =
        c.gpu.optimizer_by_params.empty()
            ? optimizer_step_bytes(rank_params, t.optimizer) / hbm +
                  4.0 * parameter_tensors(m) * c.gpu.kernel_call_us * 1e-6
            : optimizer_step_bytes(rank_params, t.optimizer) /
                  (rate_at(c.gpu.optimizer_by_params, rank_params) * 1e9);
    r.cpu_kernels.optimizer = r.time.optimizer;
  }

  const double step = r.time.step();
  const int gpus = l.gpus();
  r.tokens_per_s = tokens_step / step;
  r.tflops_per_gpu = r.model_flops_step / step / gpus / 1e12;
  r.hw_tflops_per_gpu = r.hw_flops_step / step / gpus / 1e12;
  r.mfu = r.tflops_per_gpu * 1e12 / peak;
  r.hfu = r.hw_tflops_per_gpu * 1e12 / peak;
  if (t.train_tokens > 0) {
    r.train_seconds = t.train_tokens / r.tokens_per_s;
    r.train_cost = r.train_seconds / 3600.0 * gpus * c.price_per_gpu_hour;
  }
  return r;
}

}  // namespace braid::plan
