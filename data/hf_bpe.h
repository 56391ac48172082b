// HfBpeTokenizer: a Hugging Face tokenizer.json with a BPE model, encoded as the `tokenizers`
// library does: added tokens split out first, then the normalizer, the pre-tokenizer and the
// BPE merges (by rank, leftmost first), with byte fallback.
//
// Two styles are read: SentencePiece-style BPE (Llama 2, TinyLlama, Mistral: byte_fallback,
// the normalizers Prepend/Replace "▁" or the Metaspace pre-tokenizer) and byte-level BPE
// (GPT-2, Llama 3, Qwen2: ByteLevel after an optional Split regex, NFC normalizer). Anything
// else is refused with a braid::UserError naming the field and its value.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/pretokenize.h"
#include "data/tokenizer.h"

namespace braid {

// An entry of tokenizer.json's added_tokens.
struct HfAddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;  // matched in the normalized text (content normalized too)
  bool lstrip = false;      // the match takes the whitespace before it
  bool rstrip = false;      // the match takes the whitespace after it
};

class HfBpeTokenizer final : public Tokenizer {
 public:
  // j: the whole tokenizer.json; path names it in errors.
  HfBpeTokenizer(const nlohmann::json& j, const std::string& path);

  // Reads tokenizer_config.json's bos_token / eos_token / pad_token (a string or an
  // {"content": ...} object) and add_bos_token / add_eos_token. Without add_bos_token, the
  // post_processor's template decides (a template that starts with the bos token adds it).
  void apply_config(const nlohmann::json& cfg, const std::string& path);

  std::vector<int32_t> encode(std::string_view text) const override;
  // Token texts joined (byte-level characters and <0xNN> tokens back to bytes, "▁" to a
  // space, the prefix "▁" the encoder added dropped).
  std::string decode(std::span<const int32_t> ids) const override;
  int vocab_size() const override { return vocab_size_; }
  std::string kind() const override { return "hf"; }
  // The tokenizer.json document as read, plus the tokenizer_config values under
  // "braid_config" (so a saved copy loads back the same).
  nlohmann::json to_json() const override;
  std::optional<int32_t> eot_id() const override { return eos_; }
  std::optional<int32_t> bos_id() const override { return add_bos_ ? bos_ : std::nullopt; }
  std::string fingerprint() const override;

  std::optional<int32_t> pad_id() const { return pad_; }
  // The tokenizer_config.json values apply_config() read (bos/eos/pad tokens, add_*_token).
  const nlohmann::json& config() const { return config_; }
  bool add_eos() const { return add_eos_; }

 private:
  enum class Norm { Prepend, Replace, Nfc };
  struct NormStep {
    Norm kind;
    std::string a, b;  // Prepend: a; Replace: a -> b
  };
  enum class Pre { Split, ByteLevel, Metaspace };
  struct PreStep {
    Pre kind;
    PreSplit split;                // Split, ByteLevel with its regex
    bool use_regex = false;        // ByteLevel
    std::string replacement;       // Metaspace
    std::string prepend = "never"; // Metaspace: always | first | never
    bool split_words = false;      // Metaspace
  };

  std::string normalize(std::string_view s) const;
  // Pre-tokenizes one normalized piece (at_start: it starts the input) and BPE-encodes it.
  void encode_piece(std::string piece, bool at_start, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // Splits text around the added tokens of one kind (normalized or not): (text, -1) pieces and
  // (match, id) pieces.
  std::vector<std::pair<std::string, int32_t>> split_added(std::string_view text,
                                                           bool normalized) const;
  std::optional<int32_t> token_id(const std::string& content) const;

  nlohmann::json json_;
  nlohmann::json config_ = nlohmann::json::object();
  std::vector<NormStep> norm_;
  std::vector<PreStep> pre_;
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  bool strip_prefix_ = false;  // decode drops one leading space (a "▁" the encoder prepended)
  std::optional<int32_t> unk_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> token_text_;               // id -> token string ("" for none)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // pair -> (rank, new id)
  std::vector<HfAddedToken> added_;
  std::vector<std::string> added_match_;  // what is searched for (normalized content if normalized)
  bool added_first_[256] = {};            // bytes an added token's match can start with
  int32_t byte_ids_[256] = {};            // byte fallback <0xNN> ids (-1 none)
  std::optional<int32_t> bos_, eos_, pad_;
  bool add_bos_ = false, add_eos_ = false;
  int vocab_size_ = 0;
};

// The tokenizer in a Hugging Face model folder or a tokenizer.json file (with the folder's
// tokenizer_config.json when there is one), or a braid tokenizer file. UserError when none.
std::unique_ptr<Tokenizer> load_tokenizer_path(const std::string& path);

}  // namespace braid
