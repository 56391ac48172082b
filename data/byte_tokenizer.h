// ByteTokenizer: one token per byte, vocabulary 256, nothing to train.
#pragma once

#include "data/tokenizer.h"

namespace braid {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int vocab_size() const override { return 256; }
  std::string kind() const override { return "byte"; }
  nlohmann::json to_json() const override;
};

}  // namespace braid
