// HF tokenizer.json writer and reader for byte-level BPE.
#include "data/hf_tokenizer.h"

#include <array>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/hf_bpe.h"

namespace braid {

namespace {

using json = nlohmann::json;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// Printable bytes stand for themselves; the others (controls, space, 0x7F-0xA0, 0xAD) take
// the code points from 256 up, in byte order.
const std::array<std::string, 256>& unicode_table() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = utf8(printable ? uint32_t(b) : next++);
    }
    return t;
  }();
  return table;
}

std::string to_unicode(const std::string& bytes) {
  std::string s;
  for (unsigned char c : bytes) s += byte_to_unicode(c);
  return s;
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

}  // namespace

const std::string& byte_to_unicode(unsigned char b) { return unicode_table()[b]; }

json hf_tokenizer_json(const Tokenizer& tok, std::string* warning) {
  if (warning) warning->clear();
  if (const auto* hf = dynamic_cast<const HfBpeTokenizer*>(&tok)) {  // read from such a file
    json j = hf->to_json();
    j.erase("braid_config");
    return j;
  }
  json vocab = json::object();
  json merges = json::array();
  json added = json::array();
  json pre = byte_level(true);
  bool ignore_merges = false;
  if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok)) {
    std::map<std::string, int32_t> seen;
    size_t dupes = 0;
    const size_t n = 256 + bpe->merges().size();
    for (size_t i = 0; i < n; ++i) {
      const std::string s = to_unicode(bpe->internal_bytes(i));
      if (!seen.emplace(s, bpe->external_id(i)).second) ++dupes;
      vocab[s] = bpe->external_id(i);
    }
    for (auto [a, b] : bpe->merges())
      merges.push_back(to_unicode(bpe->internal_bytes(a)) + " " +
                       to_unicode(bpe->internal_bytes(b)));
    for (const SpecialToken& t : bpe->specials()) {
      vocab[t.content] = t.id;
      added.push_back({{"id", t.id},
                       {"content", t.content},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    }
    if (bpe->presplit().is_legacy()) {
      if (warning && !bpe->merges().empty())
        *warning =
            "the tokenizer uses braid's legacy ASCII pre-split (format 1); HF's ByteLevel "
            "pre-tokenizer cuts non-ASCII text differently, so some ids will differ "
            "(re-run `braid prepare` to get the GPT-2 pre-split)";
    } else if (bpe->presplit().pattern() != kGpt2SplitPattern) {
      pre = {{"type", "Sequence"},
             {"pretokenizers",
              {{{"type", "Split"},
                {"pattern", {{"Regex", bpe->presplit().pattern()}}},
                {"behavior", "Isolated"},
                {"invert", false}},
               byte_level(false)}}};
    }
    if (dupes && warning)
      *warning = fmt::format(
          "{} merges make bytes another token already has; HF keeps one id "
          "per string, so those ids differ",
          dupes);
    ignore_merges = bpe->ignore_merges();
  } else {
    for (int b = 0; b < 256; ++b) vocab[byte_to_unicode(static_cast<unsigned char>(b))] = b;
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre},
          {"post_processor", nullptr},
          {"decoder", byte_level(true)},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", ignore_merges},
            {"vocab", vocab},
            {"merges", merges}}}};
}

json hf_tokenizer_config_json(const Tokenizer& tok, int model_max_length) {
  json j = {{"tokenizer_class", "PreTrainedTokenizerFast"},
            {"model_max_length", model_max_length},
            {"add_prefix_space", false},
            {"clean_up_tokenization_spaces", false}};
  if (auto eot = tok.eot_id()) {
    const std::string text = tok.decode(std::span(&*eot, 1));
    j["bos_token"] = text;
    j["eos_token"] = text;
  }
  if (const auto* hf = dynamic_cast<const HfBpeTokenizer*>(&tok))
    for (const auto& [k, v] : hf->config().items()) j[k] = v;  // the source's own settings
  return j;
}

namespace {

template <typename... Args>
[[noreturn]] void hf_error(const std::string& path, fmt::format_string<Args...> f, Args&&... args) {
  user_error("HF tokenizer '{}': {}", path, fmt::format(f, std::forward<Args>(args)...));
}

// The PreSplit an HF pre_tokenizer describes (ByteLevel with its regex, or Split + ByteLevel).
PreSplit presplit_from_hf(const json& pre, const std::string& path) {
  auto is_type = [](const json& p, const char* t) {
    return p.is_object() && p.contains("type") && p["type"] == t;
  };
  auto check_byte_level = [&](const json& p) {
    if (p.value("add_prefix_space", false))
      hf_error(path,
               "pre_tokenizer ByteLevel has add_prefix_space true, which braid does not "
               "implement");
  };
  if (is_type(pre, "ByteLevel")) {
    check_byte_level(pre);
    if (!pre.value("use_regex", true))
      hf_error(path, "ByteLevel without its regex is not supported");
    return PreSplit::gpt2();
  }
  if (is_type(pre, "Sequence") && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array() && pre["pretokenizers"].size() == 2) {
    const json& split = pre["pretokenizers"][0];
    const json& bl = pre["pretokenizers"][1];
    if (is_type(split, "Split") && is_type(bl, "ByteLevel") && !bl.value("use_regex", true) &&
        split.contains("pattern") && split["pattern"].is_object() &&
        split["pattern"].contains("Regex") && split["pattern"]["Regex"].is_string() &&
        split.value("behavior", std::string()) == "Isolated" && !split.value("invert", false)) {
      check_byte_level(bl);
      return PreSplit::regex(split["pattern"]["Regex"].get<std::string>());
    }
  }
  hf_error(path,
           "pre_tokenizer {} is not supported; braid reads ByteLevel, or a Split regex "
           "(Isolated) followed by ByteLevel without regex",
           pre.dump().substr(0, 200));
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_hf(const json& j, const std::string& path) {
  const json& m = j["model"];
  if (m.value("type", std::string()) != "BPE")
    hf_error(path, "model.type is {}; braid reads byte-level BPE only",
             m.value("type", json()).dump());
  if (j.contains("normalizer") && !j["normalizer"].is_null())
    hf_error(path, "has a normalizer ({}); braid applies none",
             j["normalizer"].value("type", json()).dump());
  for (const char* k : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null()) hf_error(path, "model.{} is set; not supported", k);
  if (m.value("byte_fallback", false))
    hf_error(path, "model.byte_fallback is true (a SentencePiece-style model); not supported");
  if (!m.contains("vocab") || !m["vocab"].is_object() || !m.contains("merges") ||
      !m["merges"].is_array())
    hf_error(path, "model needs a vocab object and a merges list");
  PreSplit split = presplit_from_hf(j.value("pre_tokenizer", json()), path);

  std::unordered_map<std::string, int32_t> vocab;
  for (const auto& [s, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 30))
      hf_error(path, "vocab entry '{}' has id {}; expected 0..2^30", s, id.dump());
    vocab.emplace(s, id.get<int32_t>());
  }
  std::vector<int32_t> ext;                               // internal -> HF id
  std::unordered_map<int32_t, int32_t> internal;          // HF id -> internal
  std::unordered_map<std::string, std::string> bytes_of;  // token string -> bytes
  for (int b = 0; b < 256; ++b) {
    const std::string& s = byte_to_unicode(static_cast<unsigned char>(b));
    auto it = vocab.find(s);
    if (it == vocab.end())
      hf_error(path, "vocab lacks the byte-level token for byte {}; not a byte-level BPE", b);
    ext.push_back(it->second);
    internal.emplace(it->second, b);
  }
  std::vector<std::pair<int32_t, int32_t>> merges;
  const json& jm = m["merges"];
  for (size_t i = 0; i < jm.size(); ++i) {
    std::string l, r;
    if (jm[i].is_string()) {
      const std::string s = jm[i].get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        hf_error(path, "merges[{}] is \"{}\"; expected \"left right\"", i, s);
      l = s.substr(0, sp), r = s.substr(sp + 1);
    } else if (jm[i].is_array() && jm[i].size() == 2 && jm[i][0].is_string() &&
               jm[i][1].is_string()) {
      l = jm[i][0].get<std::string>(), r = jm[i][1].get<std::string>();
    } else {
      hf_error(path, "merges[{}] is {}; expected \"left right\" or [left, right]", i, jm[i].dump());
    }
    auto id_of = [&](const std::string& s) {
      auto it = vocab.find(s);
      if (it == vocab.end())
        hf_error(path, "merges[{}] uses '{}', which is not in the vocab", i, s);
      auto in = internal.find(it->second);
      if (in == internal.end())
        hf_error(path, "merges[{}] uses '{}' before any merge makes it", i, s);
      return std::pair{it->second, in->second};
    };
    const auto [la, li] = id_of(l);
    const auto [ra, ri] = id_of(r);
    auto res = vocab.find(l + r);
    if (res == vocab.end())
      hf_error(path, "merges[{}] makes '{}{}', which is not in the vocab", i, l, r);
    if (internal.count(res->second))
      hf_error(path, "merges[{}] makes '{}{}' a second time; braid needs one merge per token", i, l,
               r);
    (void)la, (void)ra;
    internal.emplace(res->second, static_cast<int32_t>(256 + merges.size()));
    ext.push_back(res->second);
    merges.emplace_back(li, ri);
  }
  std::vector<SpecialToken> specials;
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const auto& t : j["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string())
        hf_error(path, "added token {} needs an integer id and a string content",
                 t.dump().substr(0, 100));
      const int64_t id = t["id"].get<int64_t>();
      if (id < 0 || id >= (int64_t{1} << 30)) hf_error(path, "added token id {} out of range", id);
      if (!internal.count(static_cast<int32_t>(id)))
        specials.push_back({static_cast<int32_t>(id), t["content"].get<std::string>()});
    }
  if (std::string bad = BpeTokenizer::problem(merges, specials, ext); !bad.empty())
    hf_error(path, "{}", bad);
  auto tok =
      std::make_unique<BpeTokenizer>(std::move(merges), std::move(split), std::move(specials),
                                     std::move(ext), m.value("ignore_merges", false));
  for (const char* eot : {"<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "</s>"})
    if (tok->mark_eot(eot)) break;
  return tok;
}

}  // namespace braid
