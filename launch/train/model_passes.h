// What the trainer does to the model between building it and training it: start from
// lora.init_from, wrap LoRA adapters, wrap activation checkpointing (in that order, the
// order of the passes in docs/architecture.md), and the per-micro-batch dropout seed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "launch/io/model_io.h"
#include "launch/config/train_config.h"

namespace braid {

// cfg with its model section replaced by the shape of lora.init_from's model (its config
// only: the weights are read by build_model); cfg itself when init_from is empty.
RunConfig resolve_init_from(const RunConfig& cfg);

// LoRA (lora.rank > 0) and train.checkpointing, in that order, on the single-rank model;
// a tensor-parallel placement comes after them. Prints one line per pass when `verbose`.
void apply_training_passes(Transformer& model, const RunConfig& cfg, bool verbose = true);

// The blocks `range` of the model a run trains, with the training passes, `place` (the
// tensor-parallel pass, or nothing) and lora.base_quant's quantised base, in that order.
// Without lora.init_from the weights are drawn (init_weights), overwritten by `init_from`'s
// (run.init_from, read whole before the passes) unless it is "", and the base quantised after
// `place`. With it, the model is built without weights (meta tensors), the passes place
// their shapes, and then lora.init_from's tensors are read one at a time: each is cut to this
// rank's part (tensor-parallel rank `tp_rank`) and a quantised linear is quantised as soon as
// its weights are read, so the full-precision base is never held whole beside the quantised
// one (peak: the quantised base plus about one tensor).
std::unique_ptr<Transformer> build_model(ExecContext& ctx, const RunConfig& cfg, BlockRange range,
                                         const std::string& init_from,
                                         const std::function<void(Transformer&)>& place,
                                         int tp_rank, bool verbose = true);

// The dropout stream of micro-batch `micro` of optimizer step `step`: a pure function of the
// data seed and the position, never 0 (0 means no dropout), so a resumed run draws the same
// masks as an uninterrupted one.
uint64_t micro_batch_dropout_seed(uint64_t seed, int64_t step, int micro);

}  // namespace braid
