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
  t.precision = Precision::FP32;
  t.global_batch = global_batch;
  t.micro_batch = 2;
  t.seq = 32;
  return t;
}

// A profile as --calibrate writes it, with round rates (all multiplied by `scale`; the call
// cost, a time, divided by it) and no block, side or optimizer tables.
inline DeviceProfile cpu_profile(double scale = 1.0) {
  DeviceProfile d;
  GpuSpec& g = d.gpu;
  CpuProfile& k = d.cpu;
  g.name = "cpu-test";
  g.memory_gib = 8;
  g.tflops_fp32 = 0.1 * scale;
  g.mem_bw_gbs = 10 * scale;
  g.intra_bw_gbs = g.inter_bw_gbs = 5 * scale;
  g.matmul_efficiency = 1;
  g.overhead_gib = 0;
  g.gpus_per_node = 1;
  k.gemm_by_width = {{32, 0.05 * scale}, {128, 0.1 * scale}};
  k.attention_by_head_dim = {{16, 0.04 * scale}};
  k.lm_head_by_width = {{64, 0.08 * scale}};
  k.elementwise_gbs = 20 * scale;
  k.gelu_gelems = 0.5 * scale;
  k.swiglu_gelems = 0.25 * scale;
  k.kernel_call_us = 10 / scale;
  return d;
}

// A one-node cluster of `d` (the planner's view of a calibrated machine).
inline Cluster cpu_cluster(const DeviceProfile& d) {
  Cluster c;
  c.gpu = d.gpu;
  c.cpu = d.cpu;
  c.gpus_per_node = 1;
  c.intra_bw_gbs = c.inter_bw_gbs = d.gpu.intra_bw_gbs;
  return c;
}

}  // namespace braid::plan::testing
