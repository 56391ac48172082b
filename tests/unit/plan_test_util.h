// Shared fixtures of the planner tests: a tiny model and a calibrated-looking CPU profile.
#pragma once

#include "core/model_config.h"
#include "launch/plan/plan_types.h"

namespace braid::plan::testing {

// GPT-2 family, L=2, h=64, a=4 (head_dim 16), F=256, V=128, T=32.
inline ModelConfig tiny_gpt2() {
  ModelConfig m;
  m.family = "gpt2";
  m.n_layer = 2;
  m.n_embd = 64;
  m.n_head = 4;
  m.vocab_size = 128;
  m.context_length = 32;
  return m;
}

// fp32 training of micro-batches of 2 x 32 tokens; `global_batch` sequences per step.
inline TrainOptions tiny_train(int64_t global_batch = 2) {
  TrainOptions t;
  t.precision = "fp32";
  t.global_batch = global_batch;
  t.micro_batch = 2;
  t.seq = 32;
  return t;
}

// A profile as --calibrate writes it, with round rates (all multiplied by `scale`; the call
// cost, a time, divided by it) and no block, side or optimizer tables.
inline GpuSpec cpu_profile(double scale = 1.0) {
  GpuSpec g;
  g.name = "cpu-test";
  g.memory_gib = 8;
  g.tflops_fp32 = 0.1 * scale;
  g.mem_bw_gbs = 10 * scale;
  g.intra_bw_gbs = g.inter_bw_gbs = 5 * scale;
  g.matmul_efficiency = 1;
  g.overhead_gib = 0;
  g.gpus_per_node = 1;
  g.gemm_by_width = {{32, 0.05 * scale}, {128, 0.1 * scale}};
  g.attention_by_head_dim = {{16, 0.04 * scale}};
  g.lm_head_by_width = {{64, 0.08 * scale}};
  g.elementwise_gbs = 20 * scale;
  g.gelu_gelems = 0.5 * scale;
  g.swiglu_gelems = 0.25 * scale;
  g.kernel_call_us = 10 / scale;
  return g;
}

}  // namespace braid::plan::testing
