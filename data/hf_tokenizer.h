// braid tokenizers <-> Hugging Face tokenizer.json (byte-level BPE: the GPT-2 family's format).
//
// HF's byte-level BPE writes every byte as one printable character (the GPT-2 byte-to-unicode
// table) and every token as the concatenation of its bytes' characters; merges are pairs of
// such token strings, in rank order. braid's ids are kept: bytes are ids 0..255 (or the ids
// an imported vocabulary gives them), merge i makes the next id.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "data/tokenizer.h"

namespace braid {

// tokenizer.json for a byte or BPE tokenizer. `warning` receives why HF would encode some text
// differently from braid ("" when it encodes the same): a tokenizer trained with the legacy
// "braid-v1" pre-split, or two merges that make the same bytes.
nlohmann::json hf_tokenizer_json(const Tokenizer& tok, std::string* warning);

// tokenizer_config.json: PreTrainedTokenizerFast, the end-of-text token as bos/eos, and the
// model's context length.
nlohmann::json hf_tokenizer_config_json(const Tokenizer& tok, int model_max_length);

// A BPE tokenizer from an HF tokenizer.json whose model is byte-level BPE (ByteLevel
// pre-tokenizer, alone or after a Split regex; no normalizer). Anything else (SentencePiece,
// WordPiece, byte fallback, a normalizer) is a braid::UserError naming the file and the field.
std::unique_ptr<Tokenizer> tokenizer_from_hf(const nlohmann::json& j, const std::string& path);

// The GPT-2 byte-to-unicode table: the UTF-8 text of the character that stands for byte b.
const std::string& byte_to_unicode(unsigned char b);

}  // namespace braid
