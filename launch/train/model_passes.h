// What the trainer does to the model between building it and training it: start from
// lora.init_from, wrap LoRA adapters, wrap activation checkpointing (in that order, the
// order of the passes in docs/architecture.md), and the per-micro-batch dropout seed.
#pragma once

#include <cstdint>
#include <memory>

#include "launch/io/model_io.h"
#include "launch/config/train_config.h"

namespace braid {

// cfg with its model section replaced by the shape of lora.init_from's model (loaded into
// `base`, kept for apply_model_passes); cfg itself when init_from is empty.
RunConfig resolve_init_from(const RunConfig& cfg, std::unique_ptr<LoadedModel>& base);

// Copies `base`'s weights (lora.init_from's model, if any) into `model` (a whole model or a
// pipeline stage: it takes the base's tensors it holds).
void copy_base_weights(Transformer& model, const RunConfig& cfg, const LoadedModel* base,
                       bool verbose = true);
// LoRA (lora.rank > 0) and train.checkpointing, in that order, on the single-rank model;
// a tensor-parallel placement comes after them.
void apply_training_passes(Transformer& model, const RunConfig& cfg, bool verbose = true);
// Both, on one rank. Prints one line per pass when `verbose`. Call after init_weights and
// before the optimizer is built.
void apply_model_passes(Transformer& model, const RunConfig& cfg, const LoadedModel* base,
                        bool verbose = true);

// The dropout stream of micro-batch `micro` of optimizer step `step`: a pure function of the
// data seed and the position, never 0 (0 means no dropout), so a resumed run draws the same
// masks as an uninterrupted one.
uint64_t micro_batch_dropout_seed(uint64_t seed, int64_t step, int micro);

}  // namespace braid
