// braid train's default pipeline split (parallel/stage_split.h): the LM head counted on the last
// stage, the even split kept when the head is cheap, and the exact optimum (checked against every
// partition) when it is not; the trainer's cost model (the model's FLOPs) and the planner's
// (launch/plan/stage_cost.h) split every preset alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "launch/plan/config_input.h"
#include "launch/plan/presets.h"
#include "launch/plan/stage_cost.h"
#include "launch/train/rank_model.h"
#include "parallel/stage_split.h"

namespace braid {
namespace {

double worst(const std::vector<int>& b, double block, double first, double last) {
  double w = 0;
  const int k = static_cast<int>(b.size());
  for (int i = 0; i < k; ++i)
    w = std::max(w, b[i] * block + (i == 0 ? first : 0) + (i == k - 1 ? last : 0));
  return w;
}

// The smallest most-expensive stage over every partition of n into k positive parts.
double brute_force(int n, int k, double block, double first, double last) {
  double best = 1e300;
  std::vector<int> b;
  std::function<void(int, int)> go = [&](int left, int stages) {
    if (stages == 1) {
      b.push_back(left);
      best = std::min(best, worst(b, block, first, last));
      b.pop_back();
      return;
    }
    for (int x = 1; x <= left - (stages - 1); ++x) {
      b.push_back(x);
      go(left - x, stages - 1);
      b.pop_back();
    }
  };
  go(n, k);
  return best;
}

TEST(StageSplit, CheapHeadKeepsTheEvenSplit) {
  EXPECT_EQ(min_max_stage_blocks(8, 2, {1.0, 0.0, 0.16}), (std::vector<int>{4, 4}));
  EXPECT_EQ(min_max_stage_blocks(5, 2, {1.0, 0.0, 0.05}), (std::vector<int>{3, 2}));
  EXPECT_EQ(min_max_stage_blocks(6, 4, {1.0, 0.0, 0.05}), (std::vector<int>{2, 2, 1, 1}));
  EXPECT_EQ(min_max_stage_blocks(4, 1, {1.0, 0.0, 3.0}), (std::vector<int>{4}));
}

TEST(StageSplit, ExpensiveHeadMovesBlocksForward) {
  // GPT-2 124M at 1024 tokens: the head is ~4.9 blocks; 6/6 costs 10.9, 8/4 costs 8.9.
  EXPECT_EQ(min_max_stage_blocks(12, 2, {1.0, 0.0, 4.9}), (std::vector<int>{8, 4}));
  EXPECT_EQ(min_max_stage_blocks(12, 4, {1.0, 0.0, 4.9}), (std::vector<int>{4, 4, 3, 1}));
}

TEST(StageSplit, OptimalAgainstEveryPartition) {
  for (int n = 1; n <= 10; ++n)
    for (int k = 1; k <= n; ++k)
      for (double last : {0.0, 0.3, 1.0, 2.5, 7.0})
        for (double first : {0.0, 0.6}) {
          const std::vector<int> b = min_max_stage_blocks(n, k, {1.0, first, last});
          ASSERT_EQ(static_cast<int>(b.size()), k);
          int sum = 0;
          for (int x : b) {
            ASSERT_GE(x, 1);
            sum += x;
          }
          ASSERT_EQ(sum, n);
          const double best = brute_force(n, k, 1.0, first, last);
          EXPECT_LE(worst(b, 1.0, first, last), best + 1e-9)
              << "n " << n << " k " << k << " first " << first << " last " << last;
        }
}

TEST(PlanStageSplit, Gpt2HeadCountsOnTheLastStage) {
  const ModelConfig m = plan::find_preset("gpt2-124m");
  plan::TrainOptions t;
  t.seq = 1024;
  const std::vector<int> b = plan::balanced_stage_blocks(m, t, 2);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0] + b[1], 12);
  EXPECT_GT(b[0], b[1]);  // the 50257-row head weighs as several blocks
}

// The trainer splits by ModelConfig's FLOPs, the planner (modelling a braid run) by its own
// formulas: the same split for every preset, sequence length and stage count.
TEST(StageSplit, TrainerAndPlannerSplitAlike) {
  int compared = 0, uneven = 0;
  for (const plan::ModelPreset& p : plan::model_presets())
    for (int seq : {128, 1024, 4096})
      for (int nv : {2, 3, 4, 8}) {
        RunConfig cfg;
        cfg.model = p.model;
        cfg.data.seq_len = seq;
        if (cfg.model.n_layer < nv) continue;
        const plan::TrainOptions t = plan::plan_input_from_run_config(cfg).train;
        const std::vector<int> trainer = pipeline_split(cfg, nv);
        EXPECT_EQ(trainer, plan::braid_virtual_stage_blocks(cfg, t, nv))
            << p.name << " at seq " << seq << " over " << nv << " stages";
        ++compared;
        uneven += trainer.front() - trainer.back() > 1;
      }
  EXPECT_GE(compared, 40);
  EXPECT_GE(uneven, 5);  // the head moved blocks forward somewhere: the costs were compared
}

}  // namespace
}  // namespace braid
