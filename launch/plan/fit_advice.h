// What to change so that a plan fits in memory (and, when it fits, how much room is left):
// single changes first, then the smallest combination, each with its memory and step time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/model_config.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

// One way to change the plan: the options to type and what they give.
struct FitChange {
  std::string what;        // e.g. "--micro-batch 2 --checkpointing full"
  int changes = 0;         // how many options differ from the plan's
  double total_bytes = 0;  // per GPU with the change
  double step_s = 0;       // seconds per optimizer step with the change (same global batch)
  double tokens_per_s = 0;
};

struct FitAdvice {
  // Single changes that fit: checkpointing, ZeRO, the largest micro-batch that fits, more
  // tensor or pipeline parallelism (dp reduced), a quantised LoRA base (QLoRA for a full
  // fine-tune), the longest sequence length that fits.
  std::vector<FitChange> single;
  // When no single change fits without shortening the sequence: the combination of
  // recomputation, micro-batch, ZeRO and LoRA base with the fewest changes, then the highest
  // token rate; when none fits on these GPUs, the same on 2, 4 or 8 times as many GPUs per node
  // with the pipeline over them; a shorter sequence only when none of those fits.
  std::optional<FitChange> combined;
  // When the plan fits: the largest micro-batch (up to 64, dividing the global batch per
  // replica) that still fits, 0 when none larger than the plan's does.
  int largest_micro_batch = 0;
};

FitAdvice fit_advice(const ModelConfig& m, const TrainOptions& t, const Layout& l,
                     const Cluster& c);

// fit_advice's changes as report lines ("--checkpointing full -> 21.3 GiB per GPU, step +33%").
std::vector<std::string> fit_hints(const ModelConfig& m, const TrainOptions& t, const Layout& l,
                                   const Cluster& c);

}  // namespace braid::plan
