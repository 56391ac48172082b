// HF tokenizer.json (SentencePiece-style and byte-level BPE) against the ids `tokenizers` gave
// (tools/make_hf_tokenizer_fixtures.py made the fixtures).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/file_util.h"
#include "data/hf_bpe.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kDir = BRAID_SOURCE_DIR "/tests/data/hf_tokenizers";

const json& reference() {
  static const json r = read_json_file(kDir + "/reference.json", "reference");
  return r;
}

class HfStyle : public ::testing::TestWithParam<const char*> {};

TEST_P(HfStyle, IdsAndDecodeMatchTokenizers) {
  const std::string name = GetParam();
  const auto tok = load_tokenizer_path(kDir + "/" + name);
  EXPECT_EQ(tok->kind(), "hf");
  const json& cases = reference()["cases"];
  const json& ref = reference()[name];
  ASSERT_EQ(cases.size(), ref.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i].get<std::string>();
    const std::vector<int32_t> want = ref[i]["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tok->encode(text);
    EXPECT_EQ(got, want) << name << " case " << i << ": " << text.substr(0, 60);
    EXPECT_EQ(tok->decode(want), ref[i]["decoded"].get<std::string>()) << name << " case " << i;
    // What tokenizers adds with add_special_tokens: at most a leading bos.
    const std::vector<int32_t> with = ref[i]["with_specials"].get<std::vector<int32_t>>();
    if (with.size() > want.size()) {
      ASSERT_TRUE(tok->bos_id().has_value()) << name;
      EXPECT_EQ(with.front(), *tok->bos_id()) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Styles, HfStyle,
                         ::testing::Values("llama2", "mistral", "llama3", "qwen2"));

TEST(HfBpe, HeldOutTextRoundTripsWhereTheNormalizerKeepsIt) {
  // The held-out text without the added tokens that strip spaces and without decomposed
  // characters (which NFC composes): decode(encode(text)) is the text.
  const std::string text = "The lazy fox doesn't sleep;  it's 4096 tokens.\n   Привет! 東京 🦙 龘\n";
  for (const char* name : {"llama2", "mistral", "llama3", "qwen2"}) {
    const auto tok = load_tokenizer_path(kDir + "/" + name + "/tokenizer.json");
    EXPECT_EQ(tok->decode(tok->encode(text)), text) << name;
  }
}

TEST(HfBpe, ConfigSetsBosEosAndFingerprintDiffers) {
  const auto l2 = load_tokenizer_path(kDir + "/llama2");
  const auto mi = load_tokenizer_path(kDir + "/mistral");
  const auto l3 = load_tokenizer_path(kDir + "/llama3");
  const auto qw = load_tokenizer_path(kDir + "/qwen2");
  EXPECT_EQ(l2->bos_id(), std::optional<int32_t>(1));
  EXPECT_EQ(l2->eot_id(), std::optional<int32_t>(2));
  EXPECT_FALSE(qw->bos_id().has_value());
  EXPECT_EQ(qw->eot_id(), qw->encode("<|im_end|>").at(0));
  EXPECT_EQ(l3->bos_id(), l3->encode("<|begin_of_text|>")[0]);  // from the post_processor
  // The same BPE model behind another normalizer/pre-tokenizer gives other ids.
  EXPECT_NE(l2->fingerprint(), mi->fingerprint());
  EXPECT_NE(l3->fingerprint(), qw->fingerprint());
  EXPECT_EQ(l2->fingerprint(), load_tokenizer_path(kDir + "/llama2")->fingerprint());
  // A saved copy (what prepare writes) loads back with the same ids and fingerprint.
  const fs::path tmp = fs::temp_directory_path() / "braid_hf_bpe_copy.json";
  l2->save(tmp.string());
  const auto back = Tokenizer::load(tmp.string());
  EXPECT_EQ(back->fingerprint(), l2->fingerprint());
  EXPECT_EQ(back->bos_id(), l2->bos_id());
  const std::string s = reference()["cases"][0].get<std::string>();
  EXPECT_EQ(back->encode(s), l2->encode(s));
  fs::remove(tmp);
}

TEST(HfBpe, RefusesWhatItDoesNotImplementNamingTheField) {
  json j = read_json_file(kDir + "/llama2/tokenizer.json", "t");
  auto refused = [](const json& bad, const std::string& field) {
    try {
      HfBpeTokenizer t(bad, "tok.json");
      ADD_FAILURE() << "accepted " << field;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("tok.json"), std::string::npos) << e.what();
    }
  };
  json b = j;
  b["normalizer"] = {{"type", "Lowercase"}};
  refused(b, "Lowercase");
  b = j;
  b["pre_tokenizer"] = {{"type", "Whitespace"}};
  refused(b, "Whitespace");
  b = j;
  b["model"]["type"] = "WordPiece";
  refused(b, "model.type");
  b = j;
  b["model"]["continuing_subword_prefix"] = "##";
  refused(b, "continuing_subword_prefix");
  b = j;
  b["added_tokens"][0]["single_word"] = true;
  refused(b, "single_word");
  b = j;
  b["model"]["merges"].push_back("nosuch token");
  refused(b, "model.merges");
  b = j;
  b["model"]["vocab"]["zzz"] = 1 << 29;
  refused(b, "densely");
}

TEST(HfBpe, LoadTokenizerPathErrors) {
  EXPECT_THROW(load_tokenizer_path("/nonexistent/tok"), UserError);
  EXPECT_THROW(load_tokenizer_path(BRAID_SOURCE_DIR "/docs"), UserError);
}

}  // namespace
}  // namespace braid
