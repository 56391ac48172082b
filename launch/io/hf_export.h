// Writing a model as a Hugging Face directory: weights (sharded above a size), config.json and
// generation_config.json; shared by `braid export` and `braid merge-lora`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "launch/io/hf_format.h"

namespace braid {

// transformers 4's default max_shard_size (transformers 5 uses 50GB); every shard of a model
// on the Hub is about this size.
constexpr const char* kDefaultMaxShardSize = "5GB";

struct HfExport {
  DType dtype = DType::F32;                  // of the tensors in the files
  uint64_t max_shard_bytes = 5000000000ull;  // above this the weights are sharded
  std::optional<int32_t> eos_token_id;       // also bos; null in the files when unset
};

// Writes params (braid names and layout) into dir, which must exist: model.safetensors or the
// shards and their index, config.json and generation_config.json. Returns the weight files.
std::vector<std::string> write_hf_model(const std::filesystem::path& dir, const ModelConfig& cfg,
                                        const NamedTensors& params, const HfExport& how);

}  // namespace braid
