// The execution contract (docs/architecture.md): contexts, device dispatch, micro-batch state
// (deferred weight gradients, grad-ready callbacks, micro-batches in flight), named module
// slots and passes, frozen parameters, bindable gradients and pipeline stages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <thread>

#include "core/kernels/elementwise.h"
#include "core/kernels/linear.h"
#include "core/models/generate.h"
#include "core/models/transformer.h"
#include "kernel_test_util.h"
#include "launch/train/exec_setup.h"
#include "model_test_util.h"
#include "optim/adamw.h"

namespace braid {
namespace {

using model_test::grads_of;
using model_test::tiny;
using model_test::tokens_of;

// One micro-batch forward + loss + backward through the stage API on a whole model.
LossSum step_mb(Transformer& m, MicroBatch& mb, const Tensor& tokens, const Tensor& targets) {
  LossSum l = m.loss(m.forward(tokens, mb), targets, 0.05f, mb);
  m.backward(Tensor(), mb);
  return l;
}

// Trains `steps` AdamW steps on fixed batches; returns the per-step loss sums.
std::vector<double> train_losses(ExecContext& ctx, const ModelConfig& cfg, int steps) {
  Transformer m(ctx, cfg);
  m.init_weights();
  OptimConfig oc;
  oc.lr = 1e-2f;
  AdamW opt(ctx, m.parameters(), oc);
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) {
    m.zero_grad(ctx);
    MicroBatch mb(ctx);
    out.push_back(m.forward_backward(mb, tokens_of(2, 6, cfg.vocab_size, 10 + s),
                                     tokens_of(2, 6, cfg.vocab_size, 20 + s), 1.0f / 12)
                      .sum);
    clip_grad_norm(ctx, m.parameters(), global_grad_norm(ctx, m.parameters()), 1.0f);
    opt.step(1e-2f);
  }
  return out;
}

TEST(Contract, TwoContextsInOneProcessDoNotInterfere) {
  const ModelConfig a = tiny("gpt2"), b = tiny("llama", 3);
  ExecContext alone_a, alone_b;
  const std::vector<double> la = train_losses(alone_a, a, 4);
  const std::vector<double> lb = train_losses(alone_b, b, 4);
  ExecContext ca, cb, unused;
  std::vector<double> ta, tb;
  std::thread t1([&] { ta = train_losses(ca, a, 4); });
  std::thread t2([&] { tb = train_losses(cb, b, 4); });
  t1.join();
  t2.join();
  EXPECT_EQ(ta, la);  // bit for bit, although both trained at the same time
  EXPECT_EQ(tb, lb);
  // Each context counted only its own model: the same peaks as alone, nothing in the third.
  EXPECT_EQ(ca.allocator().stats().peak_total, alone_a.allocator().stats().peak_total);
  EXPECT_EQ(cb.allocator().stats().peak_total, alone_b.allocator().stats().peak_total);
  EXPECT_GT(ca.allocator().stats().peak_bytes[static_cast<int>(MemCategory::OptimizerState)], 0);
  EXPECT_EQ(unused.allocator().stats().peak_total, 0);
  EXPECT_GT(ca.profiler().times().total(), 0.0);
  EXPECT_EQ(unused.profiler().times().total(), 0.0);
  EXPECT_NE(ca.allocator().stats().peak_total, cb.allocator().stats().peak_total);
}

// A context runs at most the CPU's own instruction-set level (the default); asking for more
// fails, naming the missing feature.
TEST(Contract, ContextRunsAtMostTheCpusInstructionSet) {
  ExecContext dflt;
  EXPECT_EQ(dflt.cpu_isa(), cpu_isa_detected());
  ExecOptions low;
  low.cpu_isa = CpuIsa::Scalar;
  EXPECT_EQ(ExecContext(low).cpu_isa(), CpuIsa::Scalar);
  if (cpu_isa_detected() == CpuIsa::Amx) GTEST_SKIP() << "this CPU runs every level";
  ExecOptions o;
  o.cpu_isa = static_cast<CpuIsa>(static_cast<int>(cpu_isa_detected()) + 1);
  kernel_test::expect_error_with(
      [&] { ExecContext c(o); },
      {"cpu_isa", std::string(cpu_isa_name(o.cpu_isa)), "this CPU has no"});
}

// Sets an environment variable for one scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_.empty())
      ::unsetenv(name_);
    else
      ::setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

// BRAID_CPU_ISA (read by launch/, never by core) caps the level of the contexts launch makes
// and the GEMM plan with it; bad values are user errors naming the variable.
TEST(Contract, BraidCpuIsaCapsTheLaunchContext) {
  {
    ScopedEnv env("BRAID_CPU_ISA", "scalar");
    EXPECT_EQ(cpu_isa_from_env(), CpuIsa::Scalar);
    const std::unique_ptr<ExecContext> ctx = make_cpu_context();
    EXPECT_EQ(ctx->cpu_isa(), CpuIsa::Scalar);
    EXPECT_EQ(ctx->gemm().bf16_mode, Bf16Mode::Widen);  // no bf16 dot products at scalar
  }
  // cpu_isa_from_env() with BRAID_CPU_ISA=value throws a UserError saying every piece.
  auto expect_refused = [](const char* value, std::initializer_list<const char*> pieces) {
    ScopedEnv env("BRAID_CPU_ISA", value);
    try {
      cpu_isa_from_env();
      ADD_FAILURE() << "BRAID_CPU_ISA=" << value << " was accepted";
    } catch (const UserError& e) {
      const std::string msg = e.what();
      for (const char* piece : pieces) EXPECT_NE(msg.find(piece), std::string::npos) << msg;
    }
  };
  expect_refused("avx512bf16", {"BRAID_CPU_ISA", "'avx512bf16'", "avx512_bf16", "scalar"});
  if (cpu_isa_detected() != CpuIsa::Amx)
    expect_refused("amx", {"BRAID_CPU_ISA", "this CPU has no"});
  ScopedEnv unset("BRAID_CPU_ISA", "");
  EXPECT_EQ(cpu_isa_from_env(), cpu_isa_detected());
}

// BRAID_HUGE_PAGES: 1 or unset puts large host blocks on transparent huge pages, 0 keeps them
// on small pages; anything else is a user error naming the variable and the values.
TEST(Contract, BraidHugePagesPicksTheHostPages) {
  {
    ScopedEnv env("BRAID_HUGE_PAGES", "0");
    EXPECT_EQ(host_pages_from_env(), HostPages::Small);
  }
  {
    ScopedEnv env("BRAID_HUGE_PAGES", "1");
    EXPECT_EQ(host_pages_from_env(), HostPages::Huge);
  }
  {
    ScopedEnv env("BRAID_HUGE_PAGES", "");
    EXPECT_EQ(host_pages_from_env(), HostPages::Huge);
  }
  ScopedEnv env("BRAID_HUGE_PAGES", "yes");
  try {
    host_pages_from_env();
    ADD_FAILURE() << "BRAID_HUGE_PAGES=yes was accepted";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    for (const char* piece : {"BRAID_HUGE_PAGES", "'yes'", "1", "0"})
      EXPECT_NE(msg.find(piece), std::string::npos) << msg;
  }
}

// An allocator that hands out host memory but says it is device memory: how a test reaches the
// dispatch of a CUDA tensor on a machine without a GPU.
class FakeCudaAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cuda(0); }
  void* allocate(size_t bytes, MemCategory) override {
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  }
  void deallocate(void* p, size_t, MemCategory) override { std::free(p); }
  MemoryStats stats() const override { return {}; }
};

// Device tensors (from a fake GPU allocator: no GPU is needed) never reach a host kernel: a
// host context refuses them naming the argument and both devices, and outputs made beside a
// device tensor live on its device. (A CUDA context itself needs a GPU; tests/gpu/ runs the
// kernels there, and test_device_memory.cpp checks the error without one.)
TEST(Contract, DeviceTensorsNeverReachHostKernels) {
  auto fake = std::make_shared<FakeCudaAllocator>();
  Tensor x = Tensor::empty(fake, {4, 3}, DType::F32, MemCategory::Activations);
  Tensor w = Tensor::empty(fake, {2, 3}, DType::F32, MemCategory::Weights);
  EXPECT_EQ(x.device(), Device::cuda(0));
  Tensor hx = kernel_test::random_tensor({4, 3}, 1), hy = Tensor::empty({4, 2});
  kernel_test::expect_error_with([&] { linear_forward(test_ctx(), hy, hx, w, Tensor()); },
                                 {"linear_forward", "w is on cuda:0", "context runs on cpu"});
  kernel_test::expect_error_with([&] { add_inplace(test_ctx(), hx, x); },
                                 {"add_inplace", "x is on cuda:0"});
  // Outputs made beside an input live on its device.
  EXPECT_EQ(empty_like(x).device(), Device::cuda(0));
}

class ContractFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(ContractFamily, DeferredWeightGradientsEqualInline) {
  const ModelConfig cfg = tiny(GetParam());
  ExecContext& ctx = test_ctx();
  const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 1), tgt = tokens_of(2, 6, cfg.vocab_size, 2);
  Transformer inline_m(ctx, cfg), defer_m(ctx, cfg);
  inline_m.init_weights();
  defer_m.init_weights();
  MicroBatch a(ctx);
  const LossSum la = step_mb(inline_m, a, tok, tgt);
  EXPECT_EQ(a.deferred(), 0u);

  MicroBatch b(ctx, /*defer_weight_grads=*/true);
  const LossSum lb = step_mb(defer_m, b, tok, tgt);
  // Really deferred: every linear queued its weight GEMM and no linear weight has a gradient.
  const size_t linears = cfg.n_layer * (cfg.is_llama() ? 7 : 4);
  EXPECT_EQ(b.deferred(), linears);
  const std::string probe = cfg.is_llama() ? "model.layers.0.self_attn.q_proj.weight"
                                           : "transformer.h.0.attn.c_attn.weight";
  EXPECT_FALSE(defer_m.find_parameter(probe)->has_grad());
  b.run_deferred();
  EXPECT_EQ(b.deferred(), 0u);
  EXPECT_EQ(la.sum, lb.sum);
  EXPECT_EQ(grads_of(inline_m), grads_of(defer_m));
  EXPECT_EQ(grads_of(inline_m).size(), inline_m.parameters().size());
}

TEST_P(ContractFamily, GradReadyFiresOncePerParameterInReverseOrderOfUse) {
  const ModelConfig cfg = tiny(GetParam());
  ExecContext& ctx = test_ctx();
  Transformer m(ctx, cfg);
  m.init_weights();
  const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 3), tgt = tokens_of(2, 6, cfg.vocab_size, 4);
  for (bool defer : {false, true}) {
    std::vector<std::string> fired;
    MicroBatch mb(ctx, defer);
    mb.on_grad_ready = [&](Parameter& p) {
      fired.push_back(p.name);
      // Final means final: the gradient exists when it is reported.
      EXPECT_TRUE(p.has_grad()) << p.name;
    };
    step_mb(m, mb, tok, tgt);
    mb.run_deferred();
    std::vector<std::string> expected;
    for (Parameter* p : m.parameters()) expected.push_back(p->name);
    if (!defer) {
      // parameters() is the order of first use; the tied GPT-2 table is used first (embedding)
      // and last (head), and is final only after the embedding's backward.
      std::reverse(expected.begin(), expected.end());
      EXPECT_EQ(fired, expected);
    } else {
      std::sort(expected.begin(), expected.end());
      std::vector<std::string> sorted = fired;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, expected);  // once each, in whatever order the queue ran
    }
  }
}

// Two micro-batches in flight (F0 F1 B1 B0) give what running them one after the other in the
// same backward order gives (F1 B1 F0 B0): the stashes do not interfere. A pipeline's last
// stage runs loss() at the start of its backward action (the fused LM head writes its weight
// gradient there), so the tied GPT-2 table sees the same order of additions both ways.
TEST_P(ContractFamily, TwoMicroBatchesInFlightEqualSequential) {
  const ModelConfig cfg = tiny(GetParam());
  ExecContext& ctx = test_ctx();
  const Tensor t0 = tokens_of(2, 6, cfg.vocab_size, 5), g0 = tokens_of(2, 6, cfg.vocab_size, 6);
  const Tensor t1 = tokens_of(2, 6, cfg.vocab_size, 7), g1 = tokens_of(2, 6, cfg.vocab_size, 8);
  Transformer inflight(ctx, cfg), seq(ctx, cfg);
  inflight.init_weights();
  seq.init_weights();
  MicroBatch m0(ctx), m1(ctx);
  const Tensor h0 = inflight.forward(t0, m0);
  const Tensor h1 = inflight.forward(t1, m1);
  const LossSum a1 = inflight.loss(h1, g1, 0.05f, m1);
  inflight.backward(Tensor(), m1);
  const LossSum a0 = inflight.loss(h0, g0, 0.05f, m0);
  inflight.backward(Tensor(), m0);
  EXPECT_EQ(m0.stash_size() + m1.stash_size(), 0u);
  MicroBatch s1(ctx), s0(ctx);
  const LossSum b1 = step_mb(seq, s1, t1, g1);
  const LossSum b0 = step_mb(seq, s0, t0, g0);
  EXPECT_EQ(a0.sum, b0.sum);
  EXPECT_EQ(a1.sum, b1.sum);
  EXPECT_EQ(grads_of(inflight), grads_of(seq));
}

// A module that counts its calls and delegates to the module it wraps (which keeps its path).
class Counting : public Module {
 public:
  explicit Counting(std::unique_ptr<Module> inner) : Module(inner->path()) {
    add_slot("base", std::move(inner));
  }
  Tensor forward(const Tensor& x, MicroBatch& mb) override {
    ++forwards;
    return child(0).forward(x, mb);
  }
  Tensor backward(const Tensor& dy, MicroBatch& mb) override {
    ++backwards;
    return child(0).backward(dy, mb);
  }
  Tensor infer(const Tensor& x, InferState& st) override {
    ++infers;
    return child(0).infer(x, st);
  }
  int forwards = 0, backwards = 0, infers = 0;
};

TEST_P(ContractFamily, PassWrapsEveryLinearForTrainingAndDecoding) {
  const ModelConfig cfg = tiny(GetParam());
  ExecContext& ctx = test_ctx();
  Transformer plain(ctx, cfg), wrapped(ctx, cfg);
  std::vector<Counting*> wrappers;
  const int n = wrapped.replace(is_linear, [&](std::unique_ptr<Module> m) {
    auto c = std::make_unique<Counting>(std::move(m));
    wrappers.push_back(c.get());
    return c;
  });
  const int linears = cfg.n_layer * (cfg.is_llama() ? 7 : 4);
  EXPECT_EQ(n, linears);
  wrapped.refresh_parameters();
  EXPECT_EQ(wrapped.parameters().size(), plain.parameters().size());  // same parameters, same order
  plain.init_weights();
  wrapped.init_weights();
  // Addressable by HF path, the wrapper first.
  const std::string path =
      cfg.is_llama() ? "model.layers.1.self_attn.q_proj" : "transformer.h.1.attn.c_attn";
  EXPECT_NE(dynamic_cast<Counting*>(wrapped.find(path)), nullptr);
  EXPECT_TRUE(is_linear(*plain.find(path)));

  const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 9), tgt = tokens_of(2, 6, cfg.vocab_size, 10);
  MicroBatch a(ctx), b(ctx);
  EXPECT_EQ(step_mb(plain, a, tok, tgt).sum, step_mb(wrapped, b, tok, tgt).sum);
  EXPECT_EQ(grads_of(plain), grads_of(wrapped));
  for (Counting* c : wrappers) {
    EXPECT_EQ(c->forwards, 1) << c->path();
    EXPECT_EQ(c->backwards, 1) << c->path();
  }
  // KV-cache decoding goes through the wrappers too, with the same tokens as the plain model.
  SampleOptions so;
  so.max_new_tokens = 4;
  so.temperature = 0.0f;
  EXPECT_EQ(generate(ctx, plain, {1, 2, 3}, so), generate(ctx, wrapped, {1, 2, 3}, so));
  for (Counting* c : wrappers) EXPECT_EQ(c->infers, 4) << c->path();  // prefill + 3 steps
}

TEST_P(ContractFamily, FrozenParametersGetNoGradientsAndChangeNothingElse) {
  const ModelConfig cfg = tiny(GetParam());
  ExecContext& ctx = test_ctx();
  Transformer all(ctx, cfg), part(ctx, cfg);
  all.init_weights();
  part.init_weights();
  // Freeze everything except one projection in each block (a LoRA-like layout).
  const std::string keep = cfg.is_llama() ? "v_proj" : "c_fc";
  for (Parameter* p : part.parameters())
    if (p->name.find(keep) == std::string::npos) p->freeze();
  const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 11), tgt = tokens_of(2, 6, cfg.vocab_size, 12);
  MicroBatch a(ctx), b(ctx);
  std::vector<std::string> fired;
  b.on_grad_ready = [&](Parameter& p) { fired.push_back(p.name); };
  EXPECT_EQ(step_mb(all, a, tok, tgt).sum, step_mb(part, b, tok, tgt).sum);
  const auto ga = grads_of(all), gp = grads_of(part);
  int trainable = 0;
  for (Parameter* p : part.parameters()) {
    if (p->trainable) {
      ++trainable;
      ASSERT_TRUE(gp.count(p->name)) << p->name;
      EXPECT_EQ(gp.at(p->name), ga.at(p->name)) << p->name;
    } else {
      EXPECT_FALSE(p->has_grad()) << p->name << " is frozen but has a gradient";
    }
  }
  EXPECT_EQ(trainable, cfg.n_layer * (cfg.is_llama() ? 1 : 2));
  EXPECT_EQ(static_cast<int>(fired.size()), trainable);
  // No optimizer state for frozen parameters.
  ExecContext c2;
  AdamW opt(c2, part.parameters(), OptimConfig{});
  EXPECT_EQ(static_cast<int>(opt.state_tensors().size()), 2 * trainable);
}

TEST_P(ContractFamily, GradientsBoundToAFlatBufferLandThere) {
  const ModelConfig cfg = tiny(GetParam());
  ExecContext& ctx = test_ctx();
  Transformer ref(ctx, cfg), bound(ctx, cfg);
  ref.init_weights();
  bound.init_weights();
  int64_t total = 0;
  for (Parameter* p : bound.parameters()) total += p->value.numel();
  Tensor flat = ctx.zeros({total}, DType::F32, MemCategory::Grads);  // one bucket
  int64_t off = 0;
  for (auto it = bound.parameters().rbegin(); it != bound.parameters().rend(); ++it) {
    (*it)->bind_grad(flat.slice0(off, off + (*it)->value.numel()).view((*it)->value.shape()));
    off += (*it)->value.numel();
  }
  const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 13), tgt = tokens_of(2, 6, cfg.vocab_size, 14);
  MicroBatch a(ctx), b(ctx);
  step_mb(ref, a, tok, tgt);
  step_mb(bound, b, tok, tgt);
  EXPECT_EQ(grads_of(ref), grads_of(bound));
  // The bucket holds them, in reverse order of use.
  const Parameter* last_used = bound.parameters().back();
  EXPECT_EQ(0, std::memcmp(flat.f32(), ref.find_parameter(last_used->name)->grad_if_any().f32(),
                           last_used->value.nbytes()));
}

// The stages of a split model, run in order in one process, give the whole model's losses and
// gradients exactly (two micro-batches of gradient accumulation). GPT-2's tied embedding: the
// last stage's head replica shares the first stage's table and gradient buffer here, the
// in-process form of the sum the pipeline layer does over the two stages.
TEST_P(ContractFamily, PipelineStagesEqualTheWholeModel) {
  const ModelConfig cfg = tiny(GetParam(), 3);
  ExecContext& ctx = test_ctx();
  Transformer whole(ctx, cfg);
  whole.init_weights();
  std::vector<std::unique_ptr<Transformer>> st;
  for (int s = 0; s < 3; ++s) {
    st.push_back(std::make_unique<Transformer>(ctx, cfg, BlockRange{s, s + 1}));
    st.back()->init_weights();
  }
  EXPECT_TRUE(st[0]->has_embedding() && !st[0]->has_head());
  EXPECT_TRUE(!st[1]->has_embedding() && !st[1]->has_head());
  EXPECT_TRUE(st[2]->has_head() && !st[2]->has_embedding());
  if (cfg.tied()) {
    Parameter* first = st[0]->tied_embedding();
    Parameter* replica = st[2]->tied_embedding();
    ASSERT_TRUE(first && replica && replica->replica && !first->replica);
    EXPECT_EQ(st[1]->tied_embedding(), nullptr);
    EXPECT_TRUE(
        kernel_test::bitwise_equal(first->value, replica->value));  // same init from the same name
    replica->value = first->value;
    replica->bind_grad(first->grad());
  }
  LossSum whole_loss, stage_loss;
  for (int m = 0; m < 2; ++m) {
    const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 30 + m),
                 tgt = tokens_of(2, 6, cfg.vocab_size, 40 + m);
    MicroBatch w(ctx);
    whole_loss.sum += whole.forward_backward(w, tok, tgt, 0.05f).sum;
    MicroBatch m0(ctx), m1(ctx), m2(ctx);
    const Tensor h = st[1]->forward(st[0]->forward(tok, m0), m1);
    stage_loss.sum += st[2]->loss(st[2]->forward(h, m2), tgt, 0.05f, m2).sum;
    EXPECT_FALSE(st[0]->backward(st[1]->backward(st[2]->backward(Tensor(), m2), m1), m0).defined());
    // Evaluation on stages equals the whole model's.
    const LossSum we = whole.forward_loss(ctx, tok, tgt);
    const LossSum se = st[2]->loss_eval(
        ctx, st[2]->forward_eval(ctx, st[1]->forward_eval(ctx, st[0]->forward_eval(ctx, tok))),
        tgt);
    EXPECT_EQ(we.sum, se.sum);
  }
  EXPECT_EQ(whole_loss.sum, stage_loss.sum);
  const auto gw = grads_of(whole);
  size_t seen = 0;
  for (auto& s : st) {
    for (Parameter* p : s->parameters()) {
      if (p->replica) continue;
      ASSERT_TRUE(gw.count(p->name)) << p->name;
      EXPECT_EQ(gw.at(p->name), grads_of(*s).at(p->name)) << p->name;
      ++seen;
    }
  }
  EXPECT_EQ(seen, whole.parameters().size());
}

// The multi-process form of the tied sum: each stage keeps its own gradient and the two are
// added after the backward. Equal to the whole model up to the order of additions.
TEST(Contract, TiedEmbeddingGradientSumAcrossStages) {
  const ModelConfig cfg = tiny("gpt2", 2);
  ExecContext& ctx = test_ctx();
  Transformer whole(ctx, cfg), s0(ctx, cfg, {0, 1}), s1(ctx, cfg, {1, 2});
  whole.init_weights();
  s0.init_weights();
  s1.init_weights();
  const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 50), tgt = tokens_of(2, 6, cfg.vocab_size, 51);
  MicroBatch w(ctx), m0(ctx), m1(ctx);
  whole.forward_backward(w, tok, tgt, 0.05f);
  s1.loss(s1.forward(s0.forward(tok, m0), m1), tgt, 0.05f, m1);
  s0.backward(s1.backward(Tensor(), m1), m0);
  Tensor& g0 = s0.tied_embedding()->grad();
  Tensor& g1 = s1.tied_embedding()->grad();
  add_inplace(ctx, g0, g1);  // what the all-reduce over {first, last} computes
  g1.copy_from(g0);
  const Tensor& gw = whole.find_parameter("transformer.wte.weight")->grad_if_any();
  kernel_test::expect_close(g0, std::vector<double>(gw.f32(), gw.f32() + gw.numel()), 1e-7, 1e-5,
                            "summed tied gradient");
  EXPECT_TRUE(kernel_test::bitwise_equal(g0, g1));
}

INSTANTIATE_TEST_SUITE_P(Families, ContractFamily, ::testing::Values("gpt2", "llama"));

TEST(Contract, StageWithoutTheHeadRefusesTheLoss) {
  const ModelConfig cfg = tiny("llama", 2);
  Transformer s0(test_ctx(), cfg, {0, 1});
  MicroBatch mb(test_ctx());
  const Tensor tok = tokens_of(1, 4, cfg.vocab_size, 1);
  Tensor h = s0.forward(tok, mb);
  kernel_test::expect_error_with([&] { s0.loss(h, tok, 1.0f, mb); },
                                 {"loss()", "without the LM head"});
  kernel_test::expect_error_with([&] { s0.backward(Tensor(), mb); },
                                 {"without an output gradient"});
}

TEST(ShardSpec, FusedBlocksSplitWithinEachBlock) {
  // A GPT-2 c_attn weight (3C, C) with C = 4: rows [0, 4) are q, [4, 8) k, [8, 12) v.
  Tensor full = Tensor::empty({12, 2});
  for (int64_t i = 0; i < full.numel(); ++i) full.f32()[i] = static_cast<float>(i);
  ShardSpec s{0, 2, {4, 4, 4}};
  EXPECT_EQ(s.local_shape(full.shape()), (Shape{6, 2}));
  const auto r1 = s.ranges(full.shape(), 1);
  ASSERT_EQ(r1.size(), 3u);
  EXPECT_EQ(r1[0], (std::pair<int64_t, int64_t>{2, 4}));
  EXPECT_EQ(r1[2], (std::pair<int64_t, int64_t>{10, 12}));
  Tensor p1 = extract_shard(full, s, 1);
  // Part 1 holds the second half of each of q, k, v: rows 2, 3, 6, 7, 10, 11.
  const std::vector<int> rows = {2, 3, 6, 7, 10, 11};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p1.f32()[2 * i], 2.0f * rows[i]) << i;
  Tensor back = Tensor::zeros({12, 2});
  insert_shard(back, extract_shard(full, s, 0), s, 0);
  insert_shard(back, p1, s, 1);
  EXPECT_TRUE(kernel_test::bitwise_equal(back, full));
  // A column split (row-parallel weight): dim 1.
  Tensor w = Tensor::empty({2, 6});
  for (int64_t i = 0; i < w.numel(); ++i) w.f32()[i] = static_cast<float>(i);
  Tensor c2 = extract_shard(w, ShardSpec{1, 3, {}}, 2);
  EXPECT_EQ(c2.shape(), (Shape{2, 2}));
  EXPECT_EQ(c2.f32()[0], 4.0f);
  EXPECT_EQ(c2.f32()[2], 10.0f);
  kernel_test::expect_error_with(
      [&] {
        ShardSpec{0, 3, {4, 4, 4}}.validate(full.shape(), "c_attn");
      },
      {"c_attn", "does not split into 3"});
}

}  // namespace
}  // namespace braid
