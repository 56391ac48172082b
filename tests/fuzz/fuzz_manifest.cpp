// libFuzzer target: checkpoint manifest.json (format version, step, files and checksums, the
// model config inside), read the way `eval` and `resume` read a checkpoint directory.
#include <cstdint>
#include <filesystem>

#include "core/error.h"
#include "fuzz_util.h"
#include "launch/io/checkpoint.h"
#include "launch/io/model_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = braid::fuzz::write_input(data, size, "manifest.json");
  const std::string dir = std::filesystem::path(path).parent_path().string();
  try {
    (void)braid::model_config_at(dir);
  } catch (const braid::UserError&) {
  }
  try {
    (void)braid::CheckpointManager::load(dir);
  } catch (const braid::UserError&) {
  }
  return 0;
}
