// The time model's overlap mechanisms: data-parallel reduction and parameter gathers (ZeRO-0/1,
// interleaved chunks), pipeline sends, and the fused-attention kernel's rate.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "launch/plan/gpu_table.h"
#include "launch/plan/presets.h"
#include "launch/plan/time_model.h"

namespace braid::plan {

namespace {

Cluster h100(int nodes) {
  Cluster c;
  c.gpu = find_gpu("h100-sxm");
  c.nodes = nodes;
  c.intra_bw_gbs = c.gpu.intra_bw_gbs;
  c.inter_bw_gbs = c.gpu.inter_bw_gbs;
  return c;
}

// Llama 2 70B on 64 H100s, tp 8 pp 2 (dp 4, one data-parallel member per node).
struct Llama70B {
  ModelConfig m = find_preset("llama2-70b");
  TrainOptions t;
  Layout l{4, 8, 2, 1, "1f1b"};
  Cluster c = h100(8);
  Llama70B() {
    t.global_batch = 16;
    t.seq = 4096;
    t.zero = 1;
  }
  double dp_bw() const { return dp_bandwidth(c, l); }
};

double stage_microbatch_s(const PlanResult& r) {
  return (r.time.compute + r.time.tp_comm + r.time.cp_comm) / r.micro_batches;
}

}  // namespace

// ZeRO-1 (a distributed optimizer) reduce-scatters the gradients and all-gathers the updated
// weights in the compute dtype; ZeRO-0 all-reduces the gradients. Without overlap all of it is
// exposed.
TEST(PlanOverlap, DataParallelVolumesWithoutOverlap) {
  Llama70B s;
  s.t.dp_overlap = false;
  s.t.param_gather_overlap = false;
  const PlanResult z1 = predict(s.m, s.t, s.l, s.c);
  const int n = s.l.dp;
  EXPECT_NEAR(z1.time.dp_exposed, ring_gather_s(z1.memory.grad_bytes_full, n, s.dp_bw()), 1e-12);
  EXPECT_NEAR(z1.time.param_gather, ring_gather_s(z1.memory.weight_bytes_full, n, s.dp_bw()),
              1e-12);
  // fp32 gradients, bf16 weights: the gather moves half the bytes of the reduce-scatter.
  EXPECT_NEAR(z1.time.param_gather * 2, z1.time.dp_exposed, 1e-4);
  s.t.zero = 0;
  const PlanResult z0 = predict(s.m, s.t, s.l, s.c);
  EXPECT_NEAR(z0.time.dp_exposed, ring_allreduce_s(z0.memory.grad_bytes_full, n, s.dp_bw()), 1e-12);
  EXPECT_EQ(z0.time.param_gather, 0.0);
}

// With overlap the reduce-scatter hides behind the last micro-batch's backward (2/3 of it) and
// the gather behind the next step's first forward (1/3); interleaving releases the later chunks'
// gradients p chunk-backwards earlier each, so less of the same volume is exposed.
TEST(PlanOverlap, DataParallelWindows) {
  Llama70B s;
  const PlanResult r = predict(s.m, s.t, s.l, s.c);
  const double mb = stage_microbatch_s(r);
  const double rs = ring_gather_s(r.memory.grad_bytes_full, s.l.dp, s.dp_bw());
  const double ag = ring_gather_s(r.memory.weight_bytes_full, s.l.dp, s.dp_bw());
  ASSERT_GT(rs, mb * 2 / 3);  // the case where the window matters
  EXPECT_NEAR(r.time.dp_exposed, std::max(0.0, rs - mb * 2 / 3), 1e-9);
  EXPECT_NEAR(r.time.param_gather, std::max(0.0, ag - mb / 3), 1e-9);
  Layout v2 = s.l;
  v2.vp = 2;
  v2.schedule = "interleaved";
  const PlanResult i = predict(s.m, s.t, v2, s.c);
  const double mb2 = stage_microbatch_s(i);
  // Two chunks of rs/2: the later one may start 1 + p = 3 chunk-backwards before the end, the
  // first one chunk-backward before it.
  const double chunk_bwd = mb2 * 2 / 3 / 2;
  const double later_done = std::max(-3 * chunk_bwd + rs / 2, -chunk_bwd) + rs / 2;
  EXPECT_NEAR(i.time.dp_exposed, std::max(0.0, later_done), 1e-9);
  EXPECT_LT(i.time.dp_exposed, r.time.dp_exposed);
}

// Pipeline sends: with overlap only the fill and drain, 2 (p - 1) messages, wait; without, every
// one of the 2 m v + 2 (p - 1).
TEST(PlanOverlap, PipelineSendsOverlapTheSteadyState) {
  Llama70B s;
  s.t.global_batch = 64;  // 16 micro-batches
  const PlanResult on = predict(s.m, s.t, s.l, s.c);
  s.t.pp_overlap = false;
  const PlanResult off = predict(s.m, s.t, s.l, s.c);
  ASSERT_GT(on.time.p2p, 0);
  const int m = on.micro_batches, p = s.l.pp;
  EXPECT_NEAR(off.time.p2p / on.time.p2p, (2.0 * m + 2 * (p - 1)) / (2.0 * (p - 1)), 1e-9);
}

// cuDNN's fused attention (Transformer Engine on Hopper) runs the attention core
// native_attention_speedup times faster than the FlashAttention-2 class rate; elsewhere (no faster
// kernel known) the two are the same. Anything else is refused.
TEST(PlanOverlap, NativeAttentionKernel) {
  const ModelConfig m = find_preset("llama3-8b");
  TrainOptions t;
  t.global_batch = 8;
  t.seq = 8192;
  const Layout l{8, 1, 1, 1, "1f1b"};
  Cluster c = h100(1);
  const double flash = predict(m, t, l, c).time.compute;
  t.attention_kernel = "cudnn";
  const double cudnn = predict(m, t, l, c).time.compute;
  // The attention core: 12 h s FLOPs per token and layer at attention_efficiency of the peak.
  const double tokens = 8.0 * 8192 / 8;  // per GPU per step
  const double attn = 12.0 * m.n_embd * 8192 * m.n_layer * tokens /
                      (c.gpu.tflops_bf16 * 1e12 * c.gpu.attention_efficiency);
  EXPECT_NEAR(flash - cudnn, attn * (1 - 1 / c.gpu.native_attention_speedup), 1e-9);
  EXPECT_GT(c.gpu.native_attention_speedup, 1.0);
  Cluster a = c;
  a.gpu = find_gpu("a100-80gb");
  t.attention_kernel = "flash";
  const double a_flash = predict(m, t, l, a).time.compute;
  t.attention_kernel = "cudnn";
  EXPECT_DOUBLE_EQ(predict(m, t, l, a).time.compute, a_flash);
  t.attention_kernel = "xformers";
  EXPECT_THROW(predict(m, t, l, c), UserError);
}

}  // namespace braid::plan
