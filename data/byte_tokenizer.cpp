// ByteTokenizer: identity mapping between bytes and ids 0..255.
#include "data/byte_tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace braid {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] > 255)
      user_error("token id {} at position {} is outside the byte tokenizer's vocabulary (0..255)",
                 ids[i], i);
    out[i] = static_cast<char>(ids[i]);
  }
  return out;
}

nlohmann::json ByteTokenizer::to_json() const {
  return {{"type", "byte"}, {"vocab_size", 256}};
}

}  // namespace braid
