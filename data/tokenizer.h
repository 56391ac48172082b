// Tokenizer: the abstract text <-> token id interface, and its JSON file format.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace braid {

// File names of a tokenizer in data and run directories: braid's own format, and the name
// older braid versions used (which Hugging Face uses for its format; load() reads both).
inline constexpr const char* kTokenizerFile = "braid_tokenizer.json";
inline constexpr const char* kLegacyTokenizerFile = "tokenizer.json";

// Every tokenizer in braid is byte-level: any byte string encodes, and decode(encode(s)) == s
// exactly, even when s is not valid UTF-8.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Concatenated bytes of the tokens (may be invalid UTF-8 when a multi-byte character is
  // split across a boundary). An id outside [0, vocab_size()) is a braid::UserError.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int vocab_size() const = 0;
  // The "type" field of the JSON file: "byte" or "bpe".
  virtual std::string kind() const = 0;
  // The whole JSON document, "type" included.
  virtual nlohmann::json to_json() const = 0;
  // The end-of-text token put between documents, when this tokenizer has one.
  virtual std::optional<int32_t> eot_id() const { return std::nullopt; }
  // The token put before every document, when this tokenizer's configuration asks for one.
  virtual std::optional<int32_t> bos_id() const { return std::nullopt; }
  // Short text that is equal for two tokenizers exactly when they give the same ids: a hash of
  // the canonical vocabulary, merges, special tokens and normalizer/pre-tokenizer settings.
  virtual std::string fingerprint() const;

  // Writes to_json() to path (temp file + rename, so a crash leaves no half-written file).
  void save(const std::string& path) const;
  // Reads a file written by save() (any format version), or a Hugging Face tokenizer.json with
  // a BPE model (data/hf_bpe.h says which). A missing or malformed file is a braid::UserError naming the file
  // and what is wrong.
  static std::unique_ptr<Tokenizer> load(const std::string& path);
};

}  // namespace braid
