// HfBpeTokenizer: tokenizer.json parsing, the encode pipeline of `tokenizers`, decode.
#include "data/hf_bpe.h"

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <queue>

#include "core/checksum.h"
#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/file_util.h"
#include "data/hf_tokenizer.h"

namespace braid {

namespace {

using json = nlohmann::json;

template <typename... Args>
[[noreturn]] void hf_fail(const std::string& path, fmt::format_string<Args...> f, Args&&... args) {
  user_error("HF tokenizer '{}': {}", path, fmt::format(f, std::forward<Args>(args)...));
}

std::string short_dump(const json& j) { return j.dump().substr(0, 160); }

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : j.dump().substr(0, 80);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t at = 0;
  for (size_t p; (p = s.find(from, at)) != std::string::npos; at = p + from.size())
    out.append(s, at, p - at).append(to);
  out.append(s, at, std::string::npos);
  return out;
}

// Length of the UTF-8 character at s[i] (1 for a byte that does not start a valid one).
size_t char_len(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}

// Rust's char::is_whitespace for the characters tokenizers' lstrip/rstrip take.
size_t whitespace_len(std::string_view s, size_t i) {
  static const char* const kSpaces[] = {" ", "\t", "\n", "\v", "\f", "\r", "\xC2\x85", "\xC2\xA0",
                                        "\xE1\x9A\x80", "\xE2\x80\xA8", "\xE2\x80\xA9",
                                        "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
  for (const char* w : kSpaces)
    if (s.substr(i).starts_with(w)) return std::string_view(w).size();
  const unsigned char c = static_cast<unsigned char>(s[i]);  // U+2000..U+200A
  if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
      static_cast<unsigned char>(s[i + 2]) >= 0x80 && static_cast<unsigned char>(s[i + 2]) <= 0x8A)
    return 3;
  return 0;
}

// NFC with ICU; text that is not valid UTF-8 is left as it is (it cannot be normalized, and
// braid keeps every byte).
std::string nfc(std::string_view s) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* n = unorm2_getNFCInstance(&err);
  int32_t len16 = 0;
  u_strFromUTF8(nullptr, 0, &len16, s.data(), static_cast<int32_t>(s.size()), &err);
  if (err != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(err)) return std::string(s);
  err = U_ZERO_ERROR;
  std::u16string u(static_cast<size_t>(len16), u'\0');
  u_strFromUTF8(reinterpret_cast<UChar*>(u.data()), len16, nullptr, s.data(),
                static_cast<int32_t>(s.size()), &err);
  if (U_FAILURE(err)) return std::string(s);
  if (unorm2_isNormalized(n, reinterpret_cast<const UChar*>(u.data()), len16, &err) &&
      U_SUCCESS(err))
    return std::string(s);
  err = U_ZERO_ERROR;
  std::u16string o(static_cast<size_t>(len16) * 3 + 16, u'\0');
  const int32_t olen = unorm2_normalize(n, reinterpret_cast<const UChar*>(u.data()), len16,
                                        reinterpret_cast<UChar*>(o.data()),
                                        static_cast<int32_t>(o.size()), &err);
  if (U_FAILURE(err)) return std::string(s);
  int32_t len8 = 0;
  u_strToUTF8(nullptr, 0, &len8, reinterpret_cast<const UChar*>(o.data()), olen, &err);
  err = U_ZERO_ERROR;
  std::string out(static_cast<size_t>(len8), '\0');
  u_strToUTF8(out.data(), len8, nullptr, reinterpret_cast<const UChar*>(o.data()), olen, &err);
  return U_FAILURE(err) ? std::string(s) : out;
}

bool get_bool(const json& o, const char* key, bool def, const std::string& path,
              const std::string& where) {
  if (!o.contains(key) || o[key].is_null()) return def;
  if (!o[key].is_boolean())
    hf_fail(path, "{}.{} is {}; expected true or false", where, key, o[key].dump());
  return o[key].get<bool>();
}

std::string get_str(const json& o, const char* key, const std::string& path,
                    const std::string& where) {
  if (!o.contains(key) || !o[key].is_string())
    hf_fail(path, "{}.{} is {}; expected a string", where, key,
            o.contains(key) ? o[key].dump() : "missing");
  return o[key].get<std::string>();
}

}  // namespace

HfBpeTokenizer::HfBpeTokenizer(const json& j, const std::string& path) : json_(j) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  // ---- normalizer ----
  const json norm = j.value("normalizer", json());
  auto add_norm = [&](const json& n) {
    const std::string t = type_of(n);
    if (t == "Prepend") {
      norm_.push_back({Norm::Prepend, get_str(n, "prepend", path, "normalizer"), ""});
      strip_prefix_ = true;
    } else if (t == "Replace") {
      if (!n.contains("pattern") || !n["pattern"].is_object() || !n["pattern"].contains("String"))
        hf_fail(path, "normalizer Replace pattern {} is not supported; braid reads {{\"String\": ...}}",
                short_dump(n.value("pattern", json())));
      norm_.push_back({Norm::Replace, get_str(n["pattern"], "String", path, "normalizer.pattern"),
                       get_str(n, "content", path, "normalizer")});
    } else if (t == "NFC") {
      norm_.push_back({Norm::Nfc, "", ""});
    } else {
      hf_fail(path,
              "normalizer type \"{}\" is not supported; braid reads Prepend, Replace (a string "
              "pattern), NFC and a Sequence of them",
              t);
    }
  };
  if (!norm.is_null()) {
    if (type_of(norm) == "Sequence") {
      if (!norm.contains("normalizers") || !norm["normalizers"].is_array())
        hf_fail(path, "normalizer Sequence needs a \"normalizers\" list");
      for (const json& n : norm["normalizers"]) add_norm(n);
    } else {
      add_norm(norm);
    }
  }
  // ---- pre_tokenizer ----
  const json pre = j.value("pre_tokenizer", json());
  auto add_pre = [&](const json& p) {
    const std::string t = type_of(p);
    PreStep s{};
    if (t == "Split") {
      if (!p.contains("pattern") || !p["pattern"].is_object() || !p["pattern"].contains("Regex") ||
          !p["pattern"]["Regex"].is_string())
        hf_fail(path, "pre_tokenizer Split pattern {} is not supported; braid reads {{\"Regex\": ...}}",
                short_dump(p.value("pattern", json())));
      const std::string behavior = p.value("behavior", json("")).is_string()
                                       ? p.value("behavior", std::string())
                                       : std::string();
      if (behavior != "Isolated")
        hf_fail(path, "pre_tokenizer Split behavior is \"{}\"; braid reads \"Isolated\"", behavior);
      if (get_bool(p, "invert", false, path, "pre_tokenizer Split"))
        hf_fail(path, "pre_tokenizer Split invert is true; braid reads false");
      s.kind = Pre::Split;
      try {
        s.split = PreSplit::regex(p["pattern"]["Regex"].get<std::string>());
      } catch (const UserError& e) {
        hf_fail(path, "pre_tokenizer Split: {}", e.what());
      }
    } else if (t == "ByteLevel") {
      if (get_bool(p, "add_prefix_space", false, path, "pre_tokenizer ByteLevel"))
        hf_fail(path, "pre_tokenizer ByteLevel add_prefix_space is true; braid reads false");
      s.kind = Pre::ByteLevel;
      s.use_regex = get_bool(p, "use_regex", true, path, "pre_tokenizer ByteLevel");
      if (s.use_regex) s.split = PreSplit::gpt2();
      byte_level_ = true;
    } else if (t == "Metaspace") {
      s.kind = Pre::Metaspace;
      s.replacement = get_str(p, "replacement", path, "pre_tokenizer Metaspace");
      if (p.contains("prepend_scheme")) {
        s.prepend = get_str(p, "prepend_scheme", path, "pre_tokenizer Metaspace");
        if (s.prepend != "always" && s.prepend != "first" && s.prepend != "never")
          hf_fail(path, "pre_tokenizer Metaspace prepend_scheme is \"{}\"; expected always, first or never",
                  s.prepend);
      } else {
        s.prepend = get_bool(p, "add_prefix_space", true, path, "pre_tokenizer Metaspace")
                        ? "always"
                        : "never";
      }
      s.split_words = get_bool(p, "split", true, path, "pre_tokenizer Metaspace");
      if (s.prepend != "never") strip_prefix_ = true;
    } else {
      hf_fail(path,
              "pre_tokenizer type \"{}\" is not supported; braid reads Split (a regex, "
              "Isolated), ByteLevel, Metaspace and a Sequence of them",
              t);
    }
    pre_.push_back(std::move(s));
  };
  if (!pre.is_null()) {
    if (type_of(pre) == "Sequence") {
      if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array())
        hf_fail(path, "pre_tokenizer Sequence needs a \"pretokenizers\" list");
      for (const json& p : pre["pretokenizers"]) add_pre(p);
    } else {
      add_pre(pre);
    }
  }
  // ---- model ----
  if (!j.contains("model") || !j["model"].is_object()) hf_fail(path, "has no \"model\" object");
  const json& m = j["model"];
  if (m.value("type", json("BPE")) != "BPE")
    hf_fail(path, "model.type is {}; braid reads BPE", m["type"].dump());
  for (const char* k : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !(m[k].is_string() && m[k] == ""))
      hf_fail(path, "model.{} is {}; braid reads null", k, m[k].dump());
  byte_fallback_ = get_bool(m, "byte_fallback", false, path, "model");
  ignore_merges_ = get_bool(m, "ignore_merges", false, path, "model");
  fuse_unk_ = get_bool(m, "fuse_unk", false, path, "model");
  if (byte_level_ && byte_fallback_)
    hf_fail(path, "model.byte_fallback is true with a ByteLevel pre_tokenizer; braid reads one or the other");
  if (!m.contains("vocab") || !m["vocab"].is_object() || !m.contains("merges") ||
      !m["merges"].is_array())
    hf_fail(path, "model needs a \"vocab\" object and a \"merges\" list");
  int32_t max_id = -1;
  for (const auto& [s, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 30))
      hf_fail(path, "model.vocab[\"{}\"] is {}; expected an id in 0..2^30", s, id.dump());
    vocab_.emplace(s, id.get<int32_t>());
    max_id = std::max(max_id, id.get<int32_t>());
  }
  if (const json u = m.value("unk_token", json()); !u.is_null()) {
    if (!u.is_string() || !vocab_.count(u.get<std::string>()))
      hf_fail(path, "model.unk_token is {}; expected a token of the vocab", u.dump());
    unk_ = vocab_.at(u.get<std::string>());
  }
  if (byte_fallback_)
    for (int b = 0; b < 256; ++b)
      if (auto it = vocab_.find(fmt::format("<0x{:02X}>", b)); it != vocab_.end())
        byte_ids_[b] = it->second;
  if (byte_level_)
    for (int b = 0; b < 256; ++b)
      if (!vocab_.count(byte_to_unicode(static_cast<unsigned char>(b))))
        hf_fail(path, "model.vocab lacks the ByteLevel token of byte {}", b);
  const json& jm = m["merges"];
  for (size_t i = 0; i < jm.size(); ++i) {
    std::string l, r;
    if (jm[i].is_string()) {
      const std::string s = jm[i].get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos)
        hf_fail(path, "model.merges[{}] is \"{}\"; expected \"left right\"", i, s);
      l = s.substr(0, sp), r = s.substr(sp + 1);
    } else if (jm[i].is_array() && jm[i].size() == 2 && jm[i][0].is_string() &&
               jm[i][1].is_string()) {
      l = jm[i][0].get<std::string>(), r = jm[i][1].get<std::string>();
    } else {
      hf_fail(path, "model.merges[{}] is {}; expected \"left right\" or [left, right]", i,
              short_dump(jm[i]));
    }
    auto id = [&](const std::string& s) {
      auto it = vocab_.find(s);
      if (it == vocab_.end())
        hf_fail(path, "model.merges[{}] needs \"{}\", which is not in model.vocab", i, s);
      return it->second;
    };
    const int32_t a = id(l), b = id(r), c = id(l + r);
    merges_.emplace(bpe_pair_key(a, b), std::pair{static_cast<int32_t>(i), c});
  }
  // ---- added tokens ----
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) hf_fail(path, "added_tokens is not a list");
    for (const json& t : j["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string() || t["content"] == "" ||
          t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() >= (int64_t{1} << 30))
        hf_fail(path, "added token {} needs an id in 0..2^30 and a non-empty string content",
                short_dump(t));
      HfAddedToken a;
      a.id = t["id"].get<int32_t>();
      a.content = t["content"].get<std::string>();
      const std::string where = fmt::format("added token \"{}\"", a.content);
      a.special = get_bool(t, "special", false, path, where);
      a.normalized = get_bool(t, "normalized", !a.special, path, where);
      a.lstrip = get_bool(t, "lstrip", false, path, where);
      a.rstrip = get_bool(t, "rstrip", false, path, where);
      if (get_bool(t, "single_word", false, path, where))
        hf_fail(path, "{} has single_word true; braid reads false", where);
      added_match_.push_back(a.normalized ? normalize(a.content) : a.content);
      if (!added_match_.back().empty())
        added_first_[static_cast<unsigned char>(added_match_.back()[0])] = true;
      max_id = std::max(max_id, a.id);
      added_.push_back(std::move(a));
    }
  }
  // Ids index tables: a sparse numbering (a huge id) would make them huge.
  const int64_t tokens = static_cast<int64_t>(vocab_.size() + added_.size());
  if (max_id >= 2 * tokens + 1024)
    hf_fail(path, "the largest token id is {} for {} tokens; expected ids numbered densely from 0",
            max_id, tokens);
  vocab_size_ = max_id + 1;
  token_text_.assign(static_cast<size_t>(vocab_size_), std::string());
  for (const auto& [s, id] : vocab_) token_text_[static_cast<size_t>(id)] = s;
  // tokenizers' default eos guesses when no tokenizer_config.json says otherwise.
  for (const char* e : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>"})
    if (auto id = token_id(e)) {
      eos_ = id;
      break;
    }
}

std::optional<int32_t> HfBpeTokenizer::token_id(const std::string& content) const {
  for (const HfAddedToken& a : added_)
    if (a.content == content) return a.id;
  if (auto it = vocab_.find(content); it != vocab_.end()) return it->second;
  return std::nullopt;
}

void HfBpeTokenizer::apply_config(const json& cfg, const std::string& path) {
  if (!cfg.is_object()) user_error("tokenizer config '{}' is not a JSON object", path);
  auto token = [&](const char* key) -> std::optional<int32_t> {
    if (!cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
    const json& v = cfg[key];
    std::string content;
    if (v.is_string())
      content = v.get<std::string>();
    else if (v.is_object() && v.contains("content") && v["content"].is_string())
      content = v["content"].get<std::string>();
    else
      user_error("tokenizer config '{}': {} is {}; expected a string or {{\"content\": ...}}", path,
                 key, short_dump(v));
    auto id = token_id(content);
    if (!id)
      user_error("tokenizer config '{}': {} \"{}\" is not a token of the tokenizer", path, key,
                 content);
    return id;
  };
  bos_ = token("bos_token");
  if (auto e = token("eos_token")) eos_ = e;
  pad_ = token("pad_token");
  auto flag = [&](const char* key, bool def) {
    if (!cfg.contains(key) || cfg[key].is_null()) return def;
    if (!cfg[key].is_boolean())
      user_error("tokenizer config '{}': {} is {}; expected true or false", path, key,
                 cfg[key].dump());
    return cfg[key].get<bool>();
  };
  // Without add_bos_token, the post-processor template says whether the bos token leads.
  bool template_bos = false;
  const json pp = json_.value("post_processor", json());
  if (bos_ && type_of(pp) == "TemplateProcessing" && pp.contains("single") &&
      pp["single"].is_array() && !pp["single"].empty()) {
    const json& first = pp["single"][0];
    template_bos = first.is_object() && first.contains("SpecialToken") &&
                   token_id(first["SpecialToken"].value("id", std::string())) == bos_;
  }
  add_bos_ = flag("add_bos_token", template_bos) && bos_.has_value();
  add_eos_ = flag("add_eos_token", false) && eos_.has_value();
  config_ = json::object();
  for (const char* k : {"bos_token", "eos_token", "pad_token", "add_bos_token", "add_eos_token"})
    if (cfg.contains(k)) config_[k] = cfg[k];
  // The chat template travels with the tokenizer (data/chat_template.h renders it). HF also
  // writes a list of named templates; the one named "default" is the chat template.
  if (cfg.contains("chat_template") && !cfg["chat_template"].is_null()) {
    const json& t = cfg["chat_template"];
    if (t.is_string()) {
      config_["chat_template"] = t;
    } else if (t.is_array()) {
      for (const json& named : t)
        if (named.is_object() && named.value("name", std::string()) == "default" &&
            named.contains("template") && named["template"].is_string())
          config_["chat_template"] = named["template"];
    } else {
      user_error("tokenizer config '{}': chat_template is {}; expected a string", path,
                 short_dump(t));
    }
  }
}

std::string HfBpeTokenizer::normalize(std::string_view s) const {
  std::string t(s);
  for (const NormStep& n : norm_) {
    if (t.empty()) break;
    if (n.kind == Norm::Prepend)
      t = n.a + t;
    else if (n.kind == Norm::Replace)
      t = replace_all(std::move(t), n.a, n.b);
    else
      t = nfc(t);
  }
  return t;
}

std::vector<std::pair<std::string, int32_t>> HfBpeTokenizer::split_added(std::string_view text,
                                                                         bool normalized) const {
  std::vector<std::pair<std::string, int32_t>> out;
  size_t at = 0, pending = 0;  // text[pending, at) is not yet emitted
  while (at < text.size()) {
    if (!added_first_[static_cast<unsigned char>(text[at])]) {
      ++at;
      continue;
    }
    // Leftmost-longest among the added tokens of this kind.
    size_t best_len = 0;
    int best = -1;
    for (size_t k = 0; k < added_.size(); ++k) {
      if (added_[k].normalized != normalized) continue;
      const std::string& m = added_match_[k];
      if (m.size() > best_len && text.substr(at).starts_with(m)) best_len = m.size(), best = int(k);
    }
    if (best < 0) {
      ++at;
      continue;
    }
    const HfAddedToken& a = added_[static_cast<size_t>(best)];
    size_t start = at, end = at + best_len;
    if (a.lstrip)  // whitespace right before the token goes with it
      while (start > pending) {
        size_t p = start - 1;
        while (p > pending && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
        if (whitespace_len(text, p) != start - p) break;
        start = p;
      }
    if (a.rstrip)
      for (size_t w; end < text.size() && (w = whitespace_len(text, end)) > 0;) end += w;
    if (start > pending) out.emplace_back(std::string(text.substr(pending, start - pending)), -1);
    out.emplace_back(std::string(text.substr(start, end - start)), a.id);
    at = pending = end;
  }
  if (pending < text.size()) out.emplace_back(std::string(text.substr(pending)), -1);
  return out;
}

std::vector<int32_t> HfBpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  size_t offset = 0;
  for (auto& [raw, id] : split_added(text, false)) {
    const bool at_start = offset == 0;
    offset += raw.size();
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    bool first = at_start;
    for (auto& [piece, nid] : split_added(normalize(raw), true)) {
      if (nid >= 0)
        out.push_back(nid);
      else
        encode_piece(std::move(piece), first, out);
      first = false;
    }
  }
  return out;
}

void HfBpeTokenizer::encode_piece(std::string piece, bool at_start,
                                  std::vector<int32_t>& out) const {
  std::vector<std::string> words{std::move(piece)};
  for (const PreStep& p : pre_) {
    std::vector<std::string> next;
    for (std::string& w : words) {
      if (p.kind == Pre::Metaspace) {
        std::string t = replace_all(std::move(w), " ", p.replacement);
        if (!t.starts_with(p.replacement) &&
            (p.prepend == "always" || (p.prepend == "first" && at_start)))
          t = p.replacement + t;
        if (!p.split_words) {
          next.push_back(std::move(t));
          continue;
        }
        // MergedWithNext: every replacement starts a new word.
        size_t s = 0;
        for (size_t f; (f = t.find(p.replacement, s + 1)) != std::string::npos; s = f)
          next.push_back(t.substr(s, f - s));
        next.push_back(t.substr(s));
        continue;
      }
      if (p.kind == Pre::Split) {
        for (std::string_view c : p.split.split(w)) next.emplace_back(c);
        continue;
      }
      // ByteLevel: its own regex split (when use_regex), then every byte as its character.
      std::vector<std::string_view> cs;
      if (p.use_regex)
        cs = p.split.split(w);
      else
        cs.push_back(w);
      for (std::string_view c : cs) {
        std::string u;
        for (unsigned char b : c) u += byte_to_unicode(b);
        next.push_back(std::move(u));
      }
    }
    words = std::move(next);
    at_start = false;
  }
  for (const std::string& w : words)
    if (!w.empty()) encode_word(w, out);
}

void HfBpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_)
    if (auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  // The symbols of the word: one per character, or its bytes' <0xNN> tokens, or unk.
  struct Sym {
    int32_t id;
    int prev, next;
    bool alive = true;
  };
  std::vector<Sym> sym;
  bool last_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t n = char_len(word, i);
    const std::string ch(word.substr(i, n));
    i += n;
    if (auto it = vocab_.find(ch); it != vocab_.end()) {
      sym.push_back({it->second, 0, 0});
      last_unk = false;
      continue;
    }
    bool all = byte_fallback_;
    for (unsigned char b : ch) all = all && byte_ids_[b] >= 0;
    if (all) {
      for (unsigned char b : ch) sym.push_back({byte_ids_[b], 0, 0});
      last_unk = false;
      continue;
    }
    if (!unk_)
      user_error("HF tokenizer: text has the character '{}', which is not in the vocabulary "
                 "and the model has no unk_token nor byte fallback",
                 ch);
    // fuse_unk: consecutive unknown characters become one unk token.
    if (!(last_unk && fuse_unk_)) sym.push_back({*unk_, 0, 0});
    last_unk = true;
  }
  const int n = static_cast<int>(sym.size());
  for (int i = 0; i < n; ++i) sym[i].prev = i - 1, sym[i].next = i + 1 < n ? i + 1 : -1;
  // tokenizers' merge loop: the lowest rank first, then the leftmost position.
  using Cand = std::tuple<int32_t, int, int32_t>;  // rank, position, new id
  std::priority_queue<Cand, std::vector<Cand>, std::greater<>> queue;
  auto push = [&](int pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    auto it = merges_.find(bpe_pair_key(sym[pos].id, sym[sym[pos].next].id));
    if (it != merges_.end()) queue.emplace(it->second.first, pos, it->second.second);
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    auto [rank, pos, new_id] = queue.top();
    queue.pop();
    Sym& s = sym[pos];
    if (!s.alive || s.next < 0) continue;
    auto it = merges_.find(bpe_pair_key(s.id, sym[s.next].id));
    if (it == merges_.end() || it->second.first != rank) continue;  // stale
    Sym& r = sym[s.next];
    r.alive = false;
    s.id = new_id;
    s.next = r.next;
    if (r.next >= 0) sym[r.next].prev = pos;
    push(s.prev);
    push(pos);
  }
  for (int i = 0; i >= 0 && i < n; i = sym[i].next) out.push_back(sym[i].id);
}

std::string HfBpeTokenizer::decode(std::span<const int32_t> ids) const {
  static const std::unordered_map<std::string, unsigned char> kBytes = [] {
    std::unordered_map<std::string, unsigned char> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_to_unicode(static_cast<unsigned char>(b)), b);
    return m;
  }();
  std::string replacement = "\xE2\x96\x81";
  for (const PreStep& p : pre_)
    if (p.kind == Pre::Metaspace) replacement = p.replacement;
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size_)
      user_error("token id {} at position {} is outside the tokenizer's vocabulary (0..{})", id, i,
                 vocab_size_ - 1);
    // An added token reads as its content (normalized, when it is matched normalized), and
    // goes through the decoder like any token, as in tokenizers.
    const std::string* text = &token_text_[static_cast<size_t>(id)];
    for (size_t k = 0; k < added_.size(); ++k)
      if (added_[k].id == id) text = added_[k].normalized ? &added_match_[k] : &added_[k].content;
    const std::string& t = *text;
    if (t.empty()) user_error("token id {} at position {} stands for no text", id, i);
    if (byte_level_) {
      for (size_t k = 0; k < t.size();) {
        const size_t n = char_len(t, k);
        auto it = kBytes.find(t.substr(k, n));
        if (it == kBytes.end()) {
          out.append(t, k, n);
        } else {
          out += static_cast<char>(it->second);
        }
        k += n;
      }
    } else if (byte_fallback_ && t.size() == 6 && t.starts_with("<0x") && t.back() == '>') {
      out += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
    } else {
      out += replace_all(t, replacement, " ");
    }
  }
  if (strip_prefix_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

json HfBpeTokenizer::to_json() const {
  json j = json_;
  if (!config_.empty()) j["braid_config"] = config_;
  return j;
}

std::string HfBpeTokenizer::fingerprint() const {
  // What decides the ids, read back from the parsed tokenizer (so two files that differ only
  // in how they spell it agree): vocabulary, merges in rank order, model options, added
  // tokens, normalizer and pre-tokenizer steps, and the bos/eos a document gets. nlohmann's
  // objects sort their keys, so the dump is canonical.
  std::vector<std::pair<int32_t, uint64_t>> ranked;
  for (const auto& [key, rn] : merges_) ranked.emplace_back(rn.first, key);
  std::sort(ranked.begin(), ranked.end());
  json merges = json::array();
  for (const auto& [rank, key] : ranked)
    merges.push_back({token_text_[key >> 32], token_text_[key & 0xFFFFFFFFu]});
  json added = json::array();
  for (const HfAddedToken& a : added_)
    added.push_back({a.id, a.content, a.normalized, a.lstrip, a.rstrip});
  std::sort(added.begin(), added.end());
  json norm = json::array(), pre = json::array();
  for (const NormStep& n : norm_) norm.push_back({static_cast<int>(n.kind), n.a, n.b});
  for (const PreStep& p : pre_)
    pre.push_back({static_cast<int>(p.kind), p.split.pattern(), p.use_regex, p.replacement,
                   p.prepend, p.split_words});
  const json c = {{"vocab", vocab_},
                  {"merges", merges},
                  {"model", {byte_fallback_, ignore_merges_, unk_ ? *unk_ : -1,
                             fuse_unk_}},
                  {"added", added},
                  {"normalizer", norm},
                  {"pre_tokenizer", pre},
                  {"bos", add_bos_ && bos_ ? *bos_ : -1},
                  {"eos", eos_ ? *eos_ : -1}};
  const std::string s = c.dump();
  return "hf-" + sha256_hex(s.data(), s.size()).substr(0, 16);
}

std::unique_ptr<Tokenizer> load_tokenizer_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(path, ec)) {
    file = fs::path(path) / "tokenizer.json";
    if (!fs::exists(file, ec)) file = fs::path(path) / kTokenizerFile;
    if (!fs::exists(file, ec))
      user_error("--tokenizer '{}' is a folder without tokenizer.json or {}; expected a Hugging "
                 "Face model folder or a tokenizer file",
                 path, kTokenizerFile);
  } else if (!fs::exists(path, ec)) {
    user_error("--tokenizer '{}' does not exist; expected byte, bpe, a Hugging Face model folder "
               "or a tokenizer.json file",
               path);
  }
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(file.string());
  const fs::path cfg = file.parent_path() / "tokenizer_config.json";
  auto* hf = dynamic_cast<HfBpeTokenizer*>(tok.get());
  if (!hf || !fs::exists(cfg, ec)) return tok;
  json c = read_json_file(cfg.string(), "tokenizer config");
  // Newer transformers save the chat template beside the config, in chat_template.jinja.
  const fs::path jinja = file.parent_path() / "chat_template.jinja";
  if (c.is_object() && !c.contains("chat_template") && fs::exists(jinja, ec)) {
    std::ifstream in(jinja, std::ios::binary);
    c["chat_template"] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  hf->apply_config(c, cfg.string());
  return tok;
}

}  // namespace braid
