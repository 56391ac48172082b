// The trainer's checkpoints: what the manifest records, who writes which files in each
// layout, and the LoRA adapter files beside them.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "launch/checkpoint.h"
#include "launch/mixed_precision.h"
#include "launch/rank_model.h"
#include "launch/run_record.h"
#include "launch/train_config.h"
#include "launch/zero_adamw.h"
#include "optim/adamw.h"
#include "parallel/communicator.h"

namespace braid {

// The manifest's `state`: everything besides the tensors that a resume needs.
nlohmann::json checkpoint_state(const RunConfig& cfg, int64_t done, int64_t optimizer_steps,
                                const MixedPrecision& mp, const ParallelLayout& layout);

// Writes checkpoint `step`; collective over `world` (null: one process). With tp = pp = 1
// rank 0 (`lead`) writes model.safetensors (with ZeRO-1 and 16 bits the masters gathered
// first) and, without ZeRO, optimizer.safetensors; with ZeRO-1 every DP rank writes its own
// part of the moments (optimizer-dpR.safetensors). With tp or pp > 1, DP rank 0 of every
// (tp, pp) shard writes its files, and with ZeRO-1 every rank its moments' pieces of its shard
// (optimizer-tpT-ppS-dpR.safetensors, each piece with its tensor-parallel record). All write into the staging directory rank 0 made; rank 0
// commits (manifest last) once all have written, so a rank dying part-way leaves the previous
// checkpoint as it was. Exactly one of plain / zero is set. Returns the checkpoint's directory.
std::string write_checkpoint(CheckpointManager& ckpt, int64_t step, const RankModel& model,
                             MixedPrecision& mp, const AdamW* plain, const ZeroAdamW* zero,
                             const nlohmann::json& manifest_state, Communicator* world, bool lead,
                             int dp_rank);

// The PEFT adapter files of a LoRA run. Under tensor or pipeline parallelism the adapters are
// spread over the ranks: they are read back whole from the checkpoint just committed, into a
// whole model with the same LoRA wrapping, and written from there.
void save_lora_adapter(ExecContext& ctx, const RunConfig& cfg, Transformer* whole,
                       const std::string& checkpoint, const std::filesystem::path& dir);

}  // namespace braid
