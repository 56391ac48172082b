// libFuzzer target: safetensors files (header length, JSON header, offsets), then every tensor.
#include <cstdint>

#include "core/error.h"
#include "core/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = braid::fuzz::write_input(data, size, "model.safetensors");
  try {
    braid::SafetensorsFile f = braid::SafetensorsFile::open(path);
    for (const std::string& n : f.names()) {
      if (f.info(n).dtype) (void)f.get(n);  // only readable dtypes; others throw by design
    }
  } catch (const braid::UserError&) {
  }
  return 0;
}
