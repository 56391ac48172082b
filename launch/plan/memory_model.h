// Per-GPU training memory: weights, gradients, optimizer state, activations, buffers.
#pragma once

#include "core/model_config.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

// Activation bytes one block stores for one micro-batch of b sequences of length s on one
// tensor-parallel rank (Korthikanti et al. 2022, generalised to GQA, any FFN width, SwiGLU,
// flash attention and no dropout; reduces to s*b*h*(34 + 5*a*s/h) for GPT with t = 1).
double layer_activation_bytes(const ModelConfig& m, const TrainOptions& t, int64_t s, int64_t b,
                              int tp);

// Micro-batches whose activations stage 0 holds at the peak of the schedule:
// gpipe m, 1f1b min(p, m), interleaved p + (p-1)/v (capped by m*... see docs/plan.md).
double inflight_microbatches(const Layout& layout, int micro_batches);

// Block activations (in units of one block's for one micro-batch) that pipeline rank `stage`
// holds at the peak of an interleaved schedule: Megatron-LM's warm-up runs 2 (p - 1 - stage) +
// (v - 1) p + 1 chunk forwards (at most m v) before the first backward, chunk by chunk in groups
// of p micro-batches, each holding its own chunk's blocks (t.virtual_stage_blocks, or
// ceil(L/p)/v each). For stage 0 with equal chunks: ceil(L/p) (p + (p - 1)/v).
double interleaved_inflight_blocks(const ModelConfig& m, const TrainOptions& t,
                                   const Layout& layout, int micro_batches, int stage);

// Bytes per GPU on pipeline stage `stage` (0 .. pp-1).
MemoryBreakdown stage_memory(const ModelConfig& m, const TrainOptions& t, const Layout& layout,
                             const GpuSpec& gpu, int stage);

// The larger of the first and last stage.
MemoryBreakdown training_memory(const ModelConfig& m, const TrainOptions& t, const Layout& layout,
                                const GpuSpec& gpu);

// Bytes per parameter of a frozen LoRA base (bf16 2, int8 1, 4bit 0.5 + block constants).
double lora_base_bytes(const std::string& base);

// Bytes per weight of a base quantised block-wise as braid stores it (core/kernels/quantize.h):
// the codes (nf4 0.5, int8 1) and the per-block constants (an f32 absmax per block of `block`;
// with double quantisation a byte per block plus an f32 per 256 blocks).
struct QuantBytesPerWeight {
  double codes = 0, constants = 0;
};
QuantBytesPerWeight quant_bytes_per_weight(const std::string& base, int64_t block,
                                           bool double_quant);

// Optimizer state bytes per trainable parameter, masters not counted: adamw 8 (two f32
// moments), adamw8bit 2 + 8 / 2048 (two 1-byte codes and two f32 absmax per block of 2048),
// sgd 4 (momentum).
double optimizer_state_bytes(const std::string& optimizer);

// Micro-batches per pipeline per step; throws UserError when global batch does not divide.
int micro_batches_per_step(const TrainOptions& t, const Layout& layout);

}  // namespace braid::plan
