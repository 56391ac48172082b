// libFuzzer target: tokenizer files (braid formats 1 and 2, HF tokenizer.json); a tokenizer
// that loads must round-trip text exactly and keep its ids inside its vocabulary.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = braid::fuzz::write_input(data, size, "tokenizer.json");
  std::unique_ptr<braid::Tokenizer> tok;
  try {
    tok = braid::Tokenizer::load(path);
  } catch (const braid::UserError&) {
    return 0;
  }
  const std::string text = "Hello, wörld! 123 'll  \n\t\xff\xfe x";
  const std::vector<int32_t> ids = tok->encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
  if (tok->decode(ids) != text) __builtin_trap();
  std::string warning;
  (void)braid::hf_tokenizer_json(*tok, &warning).dump();
  return 0;
}
