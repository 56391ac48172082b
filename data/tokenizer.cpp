// Tokenizer files: save as JSON, load and validate by "type".
#include "data/tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/file_util.h"

namespace braid {

void Tokenizer::save(const std::string& path) const {
  write_file_atomic(path, to_json().dump() + "\n");
}

namespace {

std::unique_ptr<Tokenizer> load_bpe(const nlohmann::json& j, const std::string& path) {
  if (!j.contains("merges") || !j["merges"].is_array())
    user_error("tokenizer file '{}': a \"bpe\" tokenizer needs a \"merges\" array of [left, right] id pairs", path);
  const auto& m = j["merges"];
  std::vector<std::pair<int32_t, int32_t>> merges;
  merges.reserve(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    const auto& e = m[i];
    const int64_t next_id = 256 + static_cast<int64_t>(i);
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number_integer())
      user_error("tokenizer file '{}': merges[{}] is {}; expected a pair of integer ids", path, i,
                 e.dump());
    int64_t a = e[0].get<int64_t>(), b = e[1].get<int64_t>();
    if (a < 0 || b < 0 || a >= next_id || b >= next_id)
      user_error("tokenizer file '{}': merges[{}] is [{}, {}]; ids must be in 0..{} (tokens made "
                 "before this merge)", path, i, a, b, next_id - 1);
    merges.emplace_back(static_cast<int32_t>(a), static_cast<int32_t>(b));
  }
  const int64_t vocab = 256 + static_cast<int64_t>(merges.size());
  if (j.contains("vocab_size") && (!j["vocab_size"].is_number_integer() || j["vocab_size"].get<int64_t>() != vocab))
    user_error("tokenizer file '{}': vocab_size is {} but 256 byte tokens + {} merges make {}",
               path, j["vocab_size"].dump(), merges.size(), vocab);
  if (j.contains("pretokenize") && j["pretokenize"] != "braid-v1")
    user_error("tokenizer file '{}': pretokenize is {}; this braid knows only \"braid-v1\"", path,
               j["pretokenize"].dump());
  try {
    return std::make_unique<BpeTokenizer>(std::move(merges));
  } catch (const Error& e) {
    user_error("tokenizer file '{}': invalid merges: {}", path, e.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  const std::string text = read_file_bytes(path, "tokenizer file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    user_error("tokenizer file '{}' is not valid JSON: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    user_error("tokenizer file '{}' has no string \"type\" field; expected \"byte\" or \"bpe\" "
               "(a file written by `braid prepare`)", path);
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
