// libFuzzer target: HF config.json -> ModelConfig (keys, sizes, RoPE settings) and the
// memory check that runs before any allocation.
#include <cstdint>

#include "core/error.h"
#include "data/file_util.h"
#include "fuzz_util.h"
#include "launch/io/hf_format.h"
#include "launch/io/model_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = braid::fuzz::write_input(data, size, "config.json");
  try {
    const braid::ModelConfig c =
        braid::model_config_from_hf(braid::read_json_file(path, "HF config"), path);
    braid::check_model_fits(c, 4);
    (void)braid::hf_config_json(c).dump();
  } catch (const braid::UserError&) {
  }
  return 0;
}
