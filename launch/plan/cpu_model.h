// Kernel-by-kernel step time of braid's CPU trainer from the rates --calibrate measures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_config.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

// True when `g` carries calibrated kernel rates (a profile written by --calibrate).
bool has_kernel_rates(const CpuProfile& g);

// TFLOP/s at `key`: linear in log(key) between the two nearest points (sorted or not), the end
// value beyond either end. Throws Error on an empty table or a non-positive key.
double rate_at(const std::vector<RatePoint>& table, double key);

// The factor a separable side table applies to a rate measured at `ref`: rate_at(table, key) /
// rate_at(table, ref); 1 when the table is empty (profiles written before it existed).
double side_factor(const std::vector<RatePoint>& table, double key, double ref);

// FLOPs braid's causal attention kernel performs per token and block at sequence length s:
// forward QK^T and PV over the causal half (2·h·s), backward recomputes the scores and forms
// dV, dP, dQ and dK (5·h·s). GQA does not change it (work is per query head).
double attention_kernel_flops_per_token(const ModelConfig& m, int64_t s);

// Bytes of fp32 memory-bound traffic per token of one block, forward + backward: norms, RoPE,
// residual adds, bias writes and bias-gradient sums (counted from the kernels core/models
// runs; an estimate, not a trace). GELU/SwiGLU are timed apart.
double block_elementwise_bytes_per_token(const ModelConfig& m);
// Seconds per token of one block for GELU (gpt2) or SwiGLU (llama) forward + backward over the
// MLP width, at the calibrated element rate (they are compute-bound on CPUs: tanh, exp).
double block_activation_seconds_per_token(const ModelConfig& m, const CpuProfile& g);
// The same for the embedding lookup/scatter and the final norm (once per token, not per block).
double edge_elementwise_bytes_per_token(const ModelConfig& m);

// Bytes the per-step passes over all parameters move: the global norm reads g, AdamW reads p, g,
// m, v and writes p, m, v with the clip factor applied as it reads g (SGD with momentum: reads
// p, g, m, writes p, m): 8 (AdamW) or 6 (SGD) fp32 arrays. zero_grad moves nothing: the step's
// first weight-gradient contributions overwrite the gradients.
double optimizer_step_bytes(double params, const std::string& optimizer);

// Parallel kernel calls (OpenMP regions: each element-wise kernel and each GEMM) of one block,
// forward + backward, counted from core/models: gpt2 35 (15 forward, 20 backward), llama 42
// (16 + 26). Each costs CpuProfile::kernel_call_us on top of its work.
double block_kernel_calls(const ModelConfig& m);
// Parameter tensors of the model; each gets a zero_grad, norm, clip and optimizer call per step.
double parameter_tensors(const ModelConfig& m);

// One micro-batch of `tokens` tokens (micro_batch x seq) through `layers` blocks, plus the LM
// head when `with_head`, with matmul work split `tp` ways. optimizer is left 0.
CpuStepTime cpu_microbatch_time(const ModelConfig& m, const TrainOptions& t, const CpuProfile& g,
                                double layers, bool with_head, int tp);

}  // namespace braid::plan
