// libFuzzer target: YAML config text -> RunConfig (mapping, type checks, validation).
#include <cstdint>
#include <string>

#include "core/error.h"
#include "launch/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    braid::RunConfig cfg = braid::parse_run_config(text, "fuzz.yaml");
    braid::validate_run_config(cfg);
    (void)braid::dump_run_config(cfg);
  } catch (const braid::UserError&) {
  }
  return 0;
}
