// Tokenizer files: save as JSON, load and validate by "type" (braid format 1 or 2) or as a
// Hugging Face tokenizer.json.
#include "data/tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/file_util.h"
#include "data/hf_bpe.h"
#include "data/hf_tokenizer.h"
#include "core/checksum.h"

namespace braid {

std::string Tokenizer::fingerprint() const {
  // Computed on the tokenizer.json this tokenizer exports, so a braid tokenizer and its HF
  // export (or an import of that) agree. The legacy pre-split has no HF form: its own hash.
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(this);
  if (!bpe || !bpe->presplit().is_legacy()) try {
      return HfBpeTokenizer(hf_tokenizer_json(*this, nullptr), "fingerprint").fingerprint();
    } catch (const UserError&) {
      // a tokenizer HF cannot express (e.g. a custom pattern PCRE2 alone reads): its own hash
    }
  const std::string s = to_json().dump();  // object keys sorted: canonical
  return kind() + "-own-" + sha256_hex(s.data(), s.size()).substr(0, 16);
}

void Tokenizer::save(const std::string& path) const {
  write_file_atomic(path, to_json().dump() + "\n");
}

namespace {

constexpr int kTokenizerFormatVersion = 2;

std::vector<SpecialToken> read_specials(const nlohmann::json& j, const std::string& path) {
  std::vector<SpecialToken> out;
  if (!j.contains("special_tokens")) return out;
  if (!j["special_tokens"].is_array())
    user_error("tokenizer file '{}': special_tokens is {}; expected a list of {{id, content}}",
               path, j["special_tokens"].dump());
  for (const auto& t : j["special_tokens"]) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string())
      user_error("tokenizer file '{}': special token {} needs an integer id and a string content",
                 path, t.dump());
    const int64_t id = t["id"].get<int64_t>();
    if (id < 0 || id >= (int64_t{1} << 30))
      user_error("tokenizer file '{}': special token id {} is out of range", path, id);
    out.push_back({static_cast<int32_t>(id), t["content"].get<std::string>()});
  }
  return out;
}

std::unique_ptr<Tokenizer> load_bpe(const nlohmann::json& j, const std::string& path) {
  int version = 1;
  if (j.contains("format_version")) {
    if (!j["format_version"].is_number_integer())
      user_error("tokenizer file '{}': format_version is {}; expected an integer", path,
                 j["format_version"].dump());
    version = j["format_version"].get<int>();
    if (version < 1 || version > kTokenizerFormatVersion)
      user_error(
          "tokenizer file '{}' has format_version {}; this braid reads versions 1 to {} "
          "(a newer braid wrote it?)",
          path, version, kTokenizerFormatVersion);
  }
  if (!j.contains("merges") || !j["merges"].is_array())
    user_error(
        "tokenizer file '{}': a \"bpe\" tokenizer needs a \"merges\" array of [left, right] id "
        "pairs",
        path);
  const auto& m = j["merges"];
  std::vector<std::pair<int32_t, int32_t>> merges;
  merges.reserve(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    const auto& e = m[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number_integer())
      user_error("tokenizer file '{}': merges[{}] is {}; expected a pair of integer ids", path, i,
                 e.dump());
    const int64_t a = e[0].get<int64_t>(), b = e[1].get<int64_t>(), next = 256 + int64_t(i);
    if (a < 0 || b < 0 || a >= next || b >= next)
      user_error(
          "tokenizer file '{}': merges[{}] is [{}, {}]; ids must be in 0..{} (tokens made "
          "before this merge)",
          path, i, a, b, next - 1);
    merges.emplace_back(static_cast<int32_t>(a), static_cast<int32_t>(b));
  }
  // Version 1 files use the legacy byte-class pre-split, whatever they say; version 2 names it.
  PreSplit split = PreSplit::legacy();
  const std::string pre = j.value("pretokenize", std::string("braid-v1"));
  if (pre == "regex" && version >= 2) {
    if (!j.contains("pattern") || !j["pattern"].is_string())
      user_error("tokenizer file '{}': pretokenize \"regex\" needs a string \"pattern\"", path);
    try {
      split = PreSplit::regex(j["pattern"].get<std::string>());
    } catch (const UserError& e) {
      user_error("tokenizer file '{}': {}", path, e.what());
    }
  } else if (pre != "braid-v1") {
    user_error("tokenizer file '{}': pretokenize is \"{}\"; format version {} knows \"braid-v1\"{}",
               path, pre, version, version >= 2 ? " and \"regex\"" : "");
  }
  std::vector<int32_t> ids;
  if (j.contains("token_ids")) {
    if (!j["token_ids"].is_array())
      user_error("tokenizer file '{}': token_ids is not a list of ids", path);
    for (const auto& v : j["token_ids"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= (int64_t{1} << 30))
        user_error("tokenizer file '{}': token_ids holds {}; expected ids in 0..2^30", path,
                   v.dump());
      ids.push_back(v.get<int32_t>());
    }
  }
  std::vector<SpecialToken> specials = read_specials(j, path);
  if (std::string bad = BpeTokenizer::problem(merges, specials, ids); !bad.empty())
    user_error("tokenizer file '{}': {}", path, bad);
  auto tok =
      std::make_unique<BpeTokenizer>(std::move(merges), std::move(split), std::move(specials),
                                     std::move(ids), j.value("ignore_merges", false));
  if (j.contains("eot") && (!j["eot"].is_string() || !tok->mark_eot(j["eot"].get<std::string>())))
    user_error("tokenizer file '{}': eot is {}; expected the text of one of its special_tokens",
               path, j["eot"].dump());
  if (j.contains("vocab_size") &&
      (!j["vocab_size"].is_number_integer() || j["vocab_size"].get<int64_t>() != tok->vocab_size()))
    user_error("tokenizer file '{}': vocab_size is {} but its tokens make {}", path,
               j["vocab_size"].dump(), tok->vocab_size());
  return tok;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "tokenizer file");
  if (j.is_object() && j.contains("model") && j["model"].is_object()) {
    // A Hugging Face tokenizer.json; a copy braid saved carries its tokenizer_config values.
    auto tok = std::make_unique<HfBpeTokenizer>(j, path);
    if (j.contains("braid_config")) tok->apply_config(j["braid_config"], path);
    return tok;
  }
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    user_error(
        "tokenizer file '{}' has no string \"type\" field; expected \"byte\" or \"bpe\" "
        "(a file written by `braid prepare`) or a Hugging Face tokenizer.json",
        path);
  const std::string type = j["type"].get<std::string>();
  if (type == "byte") {
    if (j.contains("vocab_size") && j["vocab_size"] != 256)
      user_error("tokenizer file '{}': a \"byte\" tokenizer has vocab_size 256, not {}", path,
                 j["vocab_size"].dump());
    return std::make_unique<ByteTokenizer>();
  }
  if (type == "bpe") return load_bpe(j, path);
  user_error("tokenizer file '{}' has type \"{}\"; expected \"byte\" or \"bpe\"", path, type);
}

}  // namespace braid
