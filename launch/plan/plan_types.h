// Value types of the planner: hardware, training options, layout, and the predicted results.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpointing_mode.h"
#include "core/model_config.h"
#include "core/precision.h"

namespace braid::plan {

// Bytes per MiB and GiB: the planner reports memory in binary units, as nvidia-smi does.
inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * kMiB;

// A rate measured at one shape: `key` is the shape the kernel was run at (n_embd for GEMMs, block
// element-wise kernels and the LM head, head_dim or seq for attention, tokens, vocabulary);
// `rate` is TFLOP/s for FLOP tables and GB/s for byte tables.
struct RatePoint {
  double key = 0;
  double rate = 0;
};

// One accelerator kind. Rates are dense (no structured sparsity) peaks from the vendor sheet;
// bandwidths are per GPU and per direction.
struct GpuSpec {
  std::string name;
  std::string description;
  double memory_gib = 0;   // usable device memory
  double tflops_fp32 = 0;  // plain fp32 (no TF32)
  double tflops_bf16 = 0;  // 0: not supported
  double tflops_fp16 = 0;
  double mem_bw_gbs = 0;           // device memory bandwidth, GB/s
  double intra_bw_gbs = 0;         // GPU-to-GPU inside a node (NVLink/xGMI/PCIe), GB/s
  double inter_bw_gbs = 0;         // per GPU between nodes (its share of the NICs), GB/s
  double matmul_efficiency = 0.7;  // achievable fraction of peak for large GEMMs
  // Fraction of peak the attention core (scores and values, 12*h*s FLOPs per token and layer
  // with backward) reaches; fused attention kernels run below large GEMMs. 0: as the GEMMs.
  double attention_efficiency = 0;
  // Bytes the memory-bound kernels (norms, activations, residuals, casts) move per byte of stored
  // activation, forward and backward together.
  double elementwise_touches = 4.0;
  // How much faster than attention_efficiency a fused attention kernel written for this chip
  // runs (cuDNN's fused attention, FlashAttention-3 on Hopper: TrainOptions::attention_kernel
  // "cudnn"); 1: none faster than FlashAttention-2.
  double native_attention_speedup = 1.0;
  double overhead_gib = 1.0;  // runtime context, library workspaces, collective buffers
  int gpus_per_node = 8;
  std::string source;  // where the numbers come from
};

// Per-CPU rates of braid's own kernels, measured by `braid plan --calibrate` (launch/calibrate/);
// empty for the built-in GPUs. Only the CPU step model (launch/plan/cpu_model.h) reads them:
// a GpuSpec describes any accelerator, this describes how braid's CPU trainer runs on one.
struct CpuProfile {
  // Empty tables: not measured (the generic roofline is used). cpu_model.h says what each counts.
  std::vector<RatePoint> gemm_by_width;          // f32 linear-layer GEMMs (fwd, dx, dW), by n_embd
  std::vector<RatePoint> gemm_llama_by_width;    // the same on Llama block shapes (GQA 4, SwiGLU)
  std::vector<RatePoint> attention_by_head_dim;  // causal attention fwd+bwd, by head_dim
  std::vector<RatePoint> attention_gqa_by_head_dim;  // the same with 4 query heads per KV head
  // Sequence-length and token-count dependence, as separable factors: a rate measured at seq s
  // is scaled by rate_at(attention_by_seq, s) / rate_at(attention_by_seq, attention_ref_seq)
  // (the head_dim tables were measured at attention_ref_seq); GEMMs likewise by tokens per
  // micro-batch against gemm_ref_tokens.
  std::vector<RatePoint> attention_by_seq;  // causal attention fwd+bwd at head_dim 64, by seq
  double attention_ref_seq = 0;
  std::vector<RatePoint> attention_by_width;  // the same at T attention_ref_seq, by n_embd
  double attention_ref_width = 0;
  std::vector<RatePoint> gemm_by_tokens;  // GPT-2 block GEMMs at n_embd 512, by tokens
  double gemm_ref_tokens = 0;
  std::vector<RatePoint> lm_head_by_vocab;  // LM head + CE at n_embd 256, by vocabulary
  double lm_head_ref_vocab = 0;
  // The optimizer's passes (gradient norm, clipping, AdamW) as the trainer runs them: GB/s of
  // their fp32 arrays, by parameter count (small models stay in cache).
  std::vector<RatePoint> optimizer_by_params;
  // The element-wise kernels of one real block (norms, bias writes and sums, RoPE, residual
  // adds), timed inside a block forward + backward: GB/s of the bytes
  // block_elementwise_bytes_per_token counts, by n_embd. Empty: elementwise_gbs is used.
  std::vector<RatePoint> block_elementwise_by_width;
  std::vector<RatePoint> block_elementwise_llama_by_width;
  std::vector<RatePoint> lm_head_by_width;  // fused LM head + cross-entropy fwd+bwd, by n_embd
  double elementwise_gbs = 0;  // memory-bound kernels on activations (norms, adds), GB/s
  double gelu_gelems = 0;      // GELU forward + backward, 1e9 elements of its (N, F) input per s
  double swiglu_gelems = 0;    // SwiGLU forward + backward, 1e9 elements of its (N, F) output per s
  double kernel_call_us = 0;   // fixed cost of one parallel kernel call (fork/join), microseconds
  // Communication between ranks of this machine, fitted to braid's all-reduce timed under
  // mpirun (tools/bench_allreduce --profile): t = comm_latency_us + bus bytes / comm_bus_gbs
  // for a 2-rank all-reduce, bus bytes = 2 (n-1)/n x buffer bytes. 0: not measured (the link
  // is then half the copy bandwidth at the GPU collective efficiency and latency).
  double comm_bus_gbs = 0;
  double comm_latency_us = 0;
  int threads = 0;  // OpenMP threads the rates were measured on (0: not recorded)
};

// What a device profile file holds (and what --calibrate measures): the accelerator-level
// figures and, for a calibrated CPU, its kernel rates.
struct DeviceProfile {
  GpuSpec gpu;
  CpuProfile cpu;
  // Where the kernel rates were measured: "cpu" or "cuda" (--calibrate --device); empty for
  // the built-in table and for profiles written before the key existed (all CPU calibrations).
  std::string device;
};

// The cluster the plan is for.
struct Cluster {
  GpuSpec gpu;
  CpuProfile cpu;  // kernel rates of a calibrated CPU (empty for GPUs)
  int gpus_per_node = 8;
  int nodes = 1;
  double intra_bw_gbs = 0;  // effective values after overrides
  double inter_bw_gbs = 0;
  double price_per_gpu_hour = 0;  // 0: no cost estimate
  std::string currency = "USD";   // of price_per_gpu_hour and the cost
  std::string price_source;       // where the price comes from (printed beside the cost)
  int total_gpus() const { return gpus_per_node * nodes; }
};

// How the model is trained (independent of the layout).
struct TrainOptions {
  int64_t global_batch = 512;                  // sequences per optimizer step
  int micro_batch = 1;                         // sequences per micro-batch
  int seq = 0;                                 // sequence length; 0: model context_length
  Precision precision = Precision::BF16;       // compute dtype
  Precision grad_precision = Precision::FP32;  // gradient accumulation/all-reduce: fp32 or bf16
  std::string optimizer = "adamw";             // adamw or sgd (with momentum)
  // ZeRO stage (Rajbhandari et al. 2020): 1 shards optimizer state over dp, 2 also the
  // gradients (reduce-scatter per micro-batch), 3 also the weights (all-gathered per layer in
  // forward and again in backward).
  int zero = 0;
  // Recomputation; Selective is Megatron-LM's (the attention core: Korthikanti et al. 2022).
  Checkpointing checkpointing = Checkpointing::None;
  bool sequence_parallel = true;  // shard norm/dropout activations over tp
  bool flash_attention = true;    // attention scores never stored (s^2 terms vanish)
  // The fused attention kernel: "flash" (FlashAttention-2 class, what the built-in efficiencies
  // were fitted on) or "cudnn" (cuDNN fused attention / FlashAttention-3, written for Hopper:
  // GpuSpec::native_attention_speedup faster). Transformer Engine uses cuDNN's on Hopper.
  std::string attention_kernel = "flash";
  int dropout = -1;  // -1: family default (gpt2 yes, llama no)
  // Overlap (defaults as the common frameworks ship: DDP overlaps gradient reduction with
  // backward; Megatron's TP communication overlap is opt-in; FSDP prefetches parameters):
  bool dp_overlap = true;            // gradient reduction hidden behind the last backward
  bool tp_overlap = false;           // TP collectives hidden behind the layer's GEMMs
  bool param_gather_overlap = true;  // ZeRO parameter all-gathers hidden behind compute
  // Pipeline sends and receives of the steady state run beside compute (Megatron-Core's
  // default); only those of the pipeline's fill and drain wait.
  bool pp_overlap = true;
  // ZeRO-3: units (blocks, or the embedding/head) gathered ahead of the one being computed
  // (FSDP's forward/backward prefetch, DeepSpeed's prefetch bucket); 0: none.
  int zero3_prefetch = 1;
  int lora_rank = 0;  // 0: full training
  std::vector<std::string> lora_targets = {"q", "v"};
  std::string lora_base = "bf16";  // frozen base: bf16, int8, 4bit
  double train_tokens = 0;         // 0: no time/cost estimate
  double stated_mfu = 0;           // > 0: also time 6*N*D FLOPs at this fraction of peak
  // braid binds the gradients into its data-parallel buckets (no second copy to reduce from);
  // torch DDP and Megatron copy into 2 x 25 MiB of buckets.
  bool grads_in_buckets = false;
  // Blocks held by each pipeline stage as a braid run splits them (its chunks summed under
  // interleaving; used when it has pp entries). Empty: the even split, whose largest stage,
  // ceil(n_layer / pp) blocks, is modelled as the one with the LM head (published runs).
  std::vector<int> stage_blocks;
  // Blocks of each virtual stage of an interleaved schedule, pp x vp entries in model order
  // (virtual stage i runs on pipeline rank i % pp), when they are not equal: Llama 3 405B put
  // no block in the first (embedding only) and the last (head only). Empty: equal chunks.
  std::vector<int> virtual_stage_blocks;
};

// Blocks of pipeline stage `stage` of pp: t.stage_blocks when it has pp entries, else the sum of
// its t.virtual_stage_blocks, else ceil(n_layer / pp).
inline double stage_blocks_of(const TrainOptions& t, int n_layer, int pp, int stage) {
  if (static_cast<int>(t.stage_blocks.size()) == pp) return t.stage_blocks[stage];
  const int nv = static_cast<int>(t.virtual_stage_blocks.size());
  if (nv > 0 && nv % pp == 0) {
    double sum = 0;
    for (int i = stage; i < nv; i += pp) sum += t.virtual_stage_blocks[i];
    return sum;
  }
  return static_cast<double>((n_layer + pp - 1) / pp);
}

// Parallel layout. dp*tp*pp*cp must equal the GPUs used; ranks are ordered tp fastest, then cp,
// then pp, then dp.
struct Layout {
  int dp = 1, tp = 1, pp = 1;
  int vp = 1;                     // virtual stages per pipeline rank (interleaved 1F1B)
  std::string schedule = "1f1b";  // gpipe, 1f1b, interleaved
  int cp = 1;  // context parallel: the sequence split over cp ranks (ring attention)
  int gpus() const { return dp * tp * pp * cp; }
};

// Bytes per GPU (the worst pipeline stage).
struct MemoryBreakdown {
  // Model states (ZeRO's term): weights, gradients and optimizer state as each rank keeps them
  // between steps, sharded as the ZeRO stage says.
  double weights = 0, grads = 0, optimizer = 0;
  // ZeRO-3 working buffers: the un-sharded weights of the unit being computed and of the
  // prefetched ones, and the un-sharded gradient of the unit awaiting its reduce-scatter.
  double gathered = 0;
  double activations = 0, comm = 0, overhead = 0;
  // Not added to total(): the part of `weights` the optimizer updates, and the un-sharded bytes
  // of this stage's weights and gradients (what ZeRO's collectives move).
  double trainable_weights = 0, weight_bytes_full = 0, grad_bytes_full = 0;
  double model_states() const { return weights + grads + optimizer; }
  double total() const { return model_states() + gathered + activations + comm + overhead; }
  int stage = 0;  // which pipeline stage this is (0 or pp-1)
};

// Seconds per optimizer step.
struct TimeBreakdown {
  double compute = 0, tp_comm = 0, cp_comm = 0, bubble = 0, p2p = 0, dp_exposed = 0,
         param_gather = 0, optimizer = 0;
  double step() const {
    return compute + tp_comm + cp_comm + bubble + p2p + dp_exposed + param_gather + optimizer;
  }
};

// Seconds per optimizer step by kernel group (the calibrated CPU model, launch/plan/cpu_model.h).
struct CpuStepTime {
  // The groups are those braid's kernel profiler reports (core/profile.h; `kernel_s` in a
  // run's metrics.jsonl), so a prediction can be compared with a run group by group.
  double gemm = 0, attention = 0, lm_head = 0, elementwise = 0, activation = 0, calls = 0,
         optimizer = 0;
  double compute() const { return gemm + attention + lm_head + elementwise + activation + calls; }
  double total() const { return compute() + optimizer; }
};

struct PlanResult {
  Layout layout;
  TrainOptions train;
  int64_t params = 0, trainable = 0;
  MemoryBreakdown memory;
  double capacity_bytes = 0;
  bool fits = false;
  std::vector<std::string> fit_hints;  // changes that would make it fit (launch/plan/fit_advice.h)
  int largest_micro_batch = 0;         // when it fits: the largest micro-batch that still would
  int micro_batches = 0;               // per pipeline per step
  double model_flops_step = 0, hw_flops_step = 0;
  TimeBreakdown time;
  bool kernel_model = false;  // compute came from calibrated kernel rates (cpu_kernels)
  CpuStepTime cpu_kernels;
  double tokens_per_s = 0, tflops_per_gpu = 0, hw_tflops_per_gpu = 0, mfu = 0, hfu = 0;
  double train_seconds = 0, train_cost = 0;
  double price_per_gpu_hour = 0;  // the cluster's, with its currency and source
  std::string currency, price_source;
  int64_t seq = 0;  // the sequence length assumed
  // With TrainOptions::stated_mfu: 6*N FLOPs per token at that fraction of peak, without the
  // planner's efficiency model.
  double stated_step_s = 0, stated_train_seconds = 0, stated_train_cost = 0;
};

// Serving estimate.
struct InferenceResult {
  std::string weight_dtype;
  double weight_bytes = 0, kv_bytes = 0, overhead_bytes = 0, capacity_bytes = 0;
  bool fits = false;
  int tp = 1;
  int smallest_fitting_tp = 0;  // when it does not fit: the least tp that would (0: none up to 64)
  bool context_exceeds_model =
      false;  // the context asked for is longer than the model was trained on
  int64_t context = 0, model_context = 0;
  double decode_step_s = 0, tokens_per_s = 0, tokens_per_s_per_seq = 0;
  bool memory_bound = true;
};

}  // namespace braid::plan
