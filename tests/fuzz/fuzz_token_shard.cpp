// libFuzzer target: token shard files (header, size, id range), then reading every id.
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "data/shard.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = braid::fuzz::write_input(data, size, "train.bin");
  try {
    braid::TokenShard s(path);
    std::vector<int32_t> ids(static_cast<size_t>(s.size()));
    if (s.size() > 0) s.read(0, s.size(), ids.data());
    for (int32_t id : ids)
      if (id < 0 || id >= s.vocab_size()) __builtin_trap();  // the reader promised valid ids
  } catch (const braid::UserError&) {
  }
  return 0;
}
