// An HF model directory from braid parameters.
#include "launch/io/hf_export.h"

#include "data/file_util.h"

namespace braid {

std::vector<std::string> write_hf_model(const std::filesystem::path& dir, const ModelConfig& cfg,
                                        const NamedTensors& params, const HfExport& how) {
  std::vector<std::string> files =
      save_hf_weights(dir, hf_tensors_out(cfg, params, how.dtype), how.max_shard_bytes);
  nlohmann::json j = hf_config_json(cfg);
  j["torch_dtype"] = how.dtype == DType::F32    ? "float32"
                     : how.dtype == DType::BF16 ? "bfloat16"
                                                : "float16";
  const nlohmann::json eos =
      how.eos_token_id ? nlohmann::json(*how.eos_token_id) : nlohmann::json(nullptr);
  j["bos_token_id"] = eos;
  j["eos_token_id"] = eos;
  write_file_atomic((dir / "config.json").string(), j.dump(2) + "\n");
  const nlohmann::json gen = {{"bos_token_id", eos},
                              {"eos_token_id", eos},
                              {"max_length", cfg.context_length},
                              {"do_sample", true}};
  write_file_atomic((dir / "generation_config.json").string(), gen.dump(2) + "\n");
  return files;
}

}  // namespace braid
