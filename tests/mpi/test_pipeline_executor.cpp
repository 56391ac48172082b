// The pipeline executor on pp = world size stages, every schedule, both families: one step's
// losses and gradients equal the whole model on one rank, and so do 10 optimizer steps.
//
// Tolerance: everything is bit-exact (same kernels, same per-parameter order of accumulation
// over micro-batches) except GPT-2's tied embedding gradient on pp > 1: the whole model adds
// head and embedding contributions alternately per micro-batch, the pipeline sums each stage's
// own contributions and then adds the two sums: max |difference| <= 1e-6 * max |gradient|
// (measured: 3e-8). Over 10 optimizer steps that difference spreads to every weight of the
// GPT-2 model, so its losses are compared to 1e-5 relative (measured: at most 4e-7 on pp = 4);
// Llama (untied) must match bit for bit.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "parallel/pipeline_executor.h"
#include "tests/mpi/model_mpi_util.h"
#include "tests/mpi/mpi_test_util.h"

namespace braid::test {
namespace {

constexpr int64_t kB = 2, kT = 6;

struct Stage {
  std::vector<std::unique_ptr<Transformer>> chunks;
  std::vector<Parameter*> params;  // every chunk's parameters
  std::vector<Transformer*> ptrs() const {
    std::vector<Transformer*> v;
    for (auto& c : chunks) v.push_back(c.get());
    return v;
  }
};

Stage make_stage(ExecContext& ctx, const ModelConfig& cfg, const PipelineSchedule& ps, int stage) {
  Stage s;
  for (int c = 0; c < ps.spec.virtual_stages; ++c) {
    const BlockRange r =
        pipeline_block_range(cfg.n_layer, ps.num_virtual_stages(), ps.virtual_stage(stage, c));
    s.chunks.push_back(std::make_unique<Transformer>(ctx, cfg, r));
    s.chunks.back()->init_weights();
    for (Parameter* p : s.chunks.back()->parameters()) s.params.push_back(p);
  }
  return s;
}

struct Case {
  std::string family;
  ScheduleKind kind;
};

class PipelineExecutor : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    p_ = world().size();
    cfg_ = model_test::tiny(GetParam().family, 2 * p_);
    m_ = 2 * p_;
    spec_ = ScheduleSpec{GetParam().kind, p_, m_,
                         GetParam().kind == ScheduleKind::Interleaved1F1B ? 2 : 1, cfg_.n_layer};
    mc_ = std::make_unique<MeshComms>(world().build_mesh(Mesh::resolve(1, 1, p_, p_)));
  }
  int p_ = 1, m_ = 1;
  ModelConfig cfg_;
  ScheduleSpec spec_;
  std::unique_ptr<MeshComms> mc_;
};

TEST_P(PipelineExecutor, OneStepEqualsTheWholeModel) {
  ExecContext ctx;
  const PipelineSchedule ps = build_pipeline_schedule(spec_);
  const int stage = mc_->coord.pp;
  Stage st = make_stage(ctx, cfg_, ps, stage);
  std::vector<std::string> ready;
  PipelineExecutorOptions opt;
  opt.on_grad_ready = [&](Parameter& p) { ready.push_back(p.name); };
  braid::PipelineExecutor ex(ctx, ps, stage, st.ptrs(), mc_->pp, mc_->embedding, opt);
  const Batches b = batches(cfg_, m_, kB, kT, 0);
  const float scale = 1.0f / static_cast<float>(m_ * kB * kT);
  const PipelineStepResult r = ex.step({b.tokens, b.targets, kB, kT, scale});

  Transformer whole(ctx, cfg_);
  whole.init_weights();
  const LossSum ref = reference_step(ctx, whole, b, scale);
  const Grads gw = grads_of(whole.parameters());
  if (stage == p_ - 1) {
    EXPECT_EQ(r.loss.sum, ref.sum);  // same kernels, same order of the per-mb sums
    EXPECT_EQ(r.loss.count, ref.count);
  } else {
    EXPECT_EQ(r.loss.count, 0);
  }
  const Grads gs = grads_of(st.params);
  int owned = 0;
  for (Parameter* prm : st.params) {
    ASSERT_TRUE(gs.count(prm->name)) << prm->name << " has no gradient";
    const bool tied = cfg_.tied() && prm->name == "transformer.wte.weight";
    if (tied && p_ > 1)
      EXPECT_LT(max_scaled_err(gs.at(prm->name), gw.at(prm->name)), 1e-6) << prm->name;
    else
      EXPECT_EQ(gs.at(prm->name), gw.at(prm->name)) << prm->name << " on stage " << stage;
    if (!prm->replica) ++owned;
  }
  // Every parameter reported ready once per micro-batch.
  EXPECT_EQ(ready.size(), st.params.size() * static_cast<size_t>(m_));
  // The stages together own each of the whole model's parameters exactly once.
  Tensor n = Tensor::from_vector_i32({owned}, {1});
  world().world().all_reduce(n, ReduceOp::Sum).wait();
  EXPECT_EQ(n.data<int32_t>()[0], static_cast<int32_t>(whole.parameters().size()));
  EXPECT_GE(r.bubble(), 0.0);
  EXPECT_LT(r.bubble(), 1.0);
  EXPECT_GT(r.busy_s, 0.0);
  // The grad norm over the group counts the tied table once.
  const double norm = pipeline_grad_norm(ctx, st.params, mc_->pp);
  const double ref_norm = global_grad_norm(ctx, whole.parameters());
  EXPECT_NEAR(norm, ref_norm, 1e-6 * ref_norm);
}

TEST_P(PipelineExecutor, TenOptimizerStepsEqualTheWholeModel) {
  ExecContext ctx;
  const PipelineSchedule ps = build_pipeline_schedule(spec_);
  const int stage = mc_->coord.pp;
  Stage st = make_stage(ctx, cfg_, ps, stage);
  braid::PipelineExecutor ex(ctx, ps, stage, st.ptrs(), mc_->pp, mc_->embedding);
  Transformer whole(ctx, cfg_);
  whole.init_weights();
  const OptimConfig oc = test_optim();
  AdamW opt(ctx, st.params, oc), ref_opt(ctx, whole.parameters(), oc);
  const float scale = 1.0f / static_cast<float>(m_ * kB * kT);
  for (int step = 0; step < 10; ++step) {
    const Batches b = batches(cfg_, m_, kB, kT, step + 1);
    for (Parameter* prm : st.params) prm->zero_grad();
    whole.zero_grad(ctx);
    const PipelineStepResult r = ex.step({b.tokens, b.targets, kB, kT, scale});
    clip_grad_norm(ctx, st.params, pipeline_grad_norm(ctx, st.params, mc_->pp), oc.grad_clip);
    opt.step(oc.lr);
    const LossSum ref = reference_step(ctx, whole, b, scale);
    clip_grad_norm(ctx, whole.parameters(), global_grad_norm(ctx, whole.parameters()),
                   oc.grad_clip);
    ref_opt.step(oc.lr);
    if (stage != p_ - 1) continue;
    if (cfg_.tied() && p_ > 1)
      EXPECT_NEAR(r.loss.sum, ref.sum, 1e-5 * std::abs(ref.sum)) << "step " << step;
    else
      EXPECT_EQ(r.loss.sum, ref.sum) << "step " << step;
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  std::string k = schedule_kind_name(i.param.kind);
  for (char& c : k)
    if (c == '-') c = '_';
  return i.param.family + "_" + k;
}

INSTANTIATE_TEST_SUITE_P(
    All, PipelineExecutor,
    ::testing::Values(Case{"gpt2", ScheduleKind::GPipe}, Case{"gpt2", ScheduleKind::OneFOneB},
                      Case{"gpt2", ScheduleKind::Interleaved1F1B}, Case{"gpt2", ScheduleKind::ZbH1},
                      Case{"llama", ScheduleKind::GPipe}, Case{"llama", ScheduleKind::OneFOneB},
                      Case{"llama", ScheduleKind::Interleaved1F1B},
                      Case{"llama", ScheduleKind::ZbH1}),
    case_name);

// The timeline: every rank's actions, gathered into one Chrome trace on rank 0.
TEST(PipelineTrace, OneFileForTheJobWithEveryAction) {
  const int p = world().size();
  const ModelConfig cfg = model_test::tiny("llama", p);
  MeshComms mc = world().build_mesh(Mesh::resolve(1, 1, p, p));
  ExecContext ctx;
  const PipelineSchedule ps = build_pipeline_schedule({ScheduleKind::ZbH1, p, 4, 1, cfg.n_layer});
  Stage st = make_stage(ctx, cfg, ps, mc.coord.pp);
  PipelineExecutorOptions opt;
  opt.trace = true;
  braid::PipelineExecutor ex(ctx, ps, mc.coord.pp, st.ptrs(), mc.pp, mc.embedding, opt);
  const Batches b = batches(cfg, 4, kB, kT, 0);
  ex.step({b.tokens, b.targets, kB, kT, 0.01f});
  const std::vector<TraceEvent> all = gather_trace(world().world(), ex.trace());
  if (world().rank() != 0) {
    EXPECT_TRUE(all.empty());
    return;
  }
  std::set<int> pids;
  std::map<std::string, int> by_cat;
  for (const TraceEvent& e : all) {
    pids.insert(e.pid);
    ++by_cat[e.category];
    EXPECT_GE(e.dur_us, 0.0) << e.name;
  }
  EXPECT_EQ(static_cast<int>(pids.size()), p);
  EXPECT_EQ(by_cat["forward"], 4 * p);
  EXPECT_EQ(by_cat["backward"], 4 * p);
  EXPECT_EQ(by_cat["weight"], 4 * p);
  EXPECT_EQ(by_cat["send"], 2 * 4 * (p - 1));  // activations forward, gradients back
  EXPECT_EQ(by_cat["recv"], 2 * 4 * (p - 1));
  EXPECT_EQ(by_cat["wait"] >= 2 * 4 * (p - 1), true);
  const std::string path = ::testing::TempDir() + "/braid_pipeline_trace.json";
  write_chrome_trace(path, all);
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["traceEvents"].size(), all.size() + pids.size());  // + process names
  std::remove(path.c_str());
}

TEST(PipelineTrace, ChunksThatDoNotMatchTheScheduleAreRefused) {
  const int p = world().size();
  const ModelConfig cfg = model_test::tiny("gpt2", 2 * p);
  MeshComms mc = world().build_mesh(Mesh::resolve(1, 1, p, p));
  ExecContext ctx;
  const PipelineSchedule ps = build_pipeline_schedule({ScheduleKind::OneFOneB, p, 2, 1, 0});
  Transformer whole(ctx, cfg);  // the whole model on every stage: embedding and head misplaced
  EXPECT_THROW(braid::PipelineExecutor(ctx, ps, mc.coord.pp, {&whole}, mc.pp, mc.embedding), Error);
  EXPECT_THROW(pipeline_block_range(3, 4, 0), UserError);
  EXPECT_THROW(pipeline_block_range(4, 2, 0, {1, 2}), UserError);
  EXPECT_EQ(pipeline_block_range(5, 2, 1).first, 3);
  EXPECT_EQ(pipeline_block_range(5, 2, 1, {1, 4}).first, 1);
}

}  // namespace
}  // namespace braid::test
