// The GPT-2 (PCRE2) pre-split, tokenizer format versions 1 and 2, end-of-text tokens, and the
// Hugging Face tokenizer.json round trip.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/chunk_stream.h"
#include "data/hf_tokenizer.h"
#include "data/pretokenize.h"
#include "data_test_util.h"

namespace braid {
namespace {

std::vector<std::string> split(const PreSplit& p, std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view c : p.split(text)) out.emplace_back(c);
  return out;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(DataPreSplit, Gpt2PatternOnAsciiText) {
  EXPECT_EQ(split(PreSplit::gpt2(), "Hello world's  test 123\n\n x!?"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " test", " 123", "\n\n", " x",
                                      "!?"}));
}

TEST(DataPreSplit, Gpt2PatternUsesUnicodeClasses) {
  // Letters stay words, CJK punctuation and curly quotes are symbols, digits are numbers.
  EXPECT_EQ(split(PreSplit::gpt2(), "naïve café 日本語。“quote” ٣٤"),
            (std::vector<std::string>{"naïve", " café", " 日本語", "。“", "quote", "”", " ٣٤"}));
  // The legacy rule counts every byte >= 0x80 as a letter: one chunk.
  EXPECT_EQ(split(PreSplit::legacy(), "日本語。“quote”").size(), 1u);
}

TEST(DataPreSplit, InvalidUtf8BytesFormTheirOwnChunks) {
  const std::string text = "ab\xff\xfe cd \xc3";
  std::string joined;
  for (const std::string& c : split(PreSplit::gpt2(), text)) joined += c;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(split(PreSplit::gpt2(), text)[1], "\xff\xfe");
}

TEST(DataPreSplit, ChunkStreamWithTheRegexCutsLikeTheWholeText) {
  static const char* pieces[] = {" ", "  ",  "\n", "a",  "é", "'",
                                 "s", "'re", "1",  "。", "x", "\xff"};
  std::mt19937 rng(5);
  const PreSplit p = PreSplit::gpt2();
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    while (text.size() < 150) text += pieces[rng() % 12];
    std::vector<std::string> chunks;
    ChunkStream stream(
        [&](std::string_view span) {
          for (std::string& c : split(p, span)) chunks.push_back(std::move(c));
        },
        p);
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min<size_t>(text.size() - at, rng() % 9);
      stream.push(std::string_view(text).substr(at, n));
      at += n;
    }
    stream.finish();
    const std::vector<std::string> want = split(p, text);
    size_t d = 0;
    while (d < chunks.size() && d < want.size() && chunks[d] == want[d]) ++d;
    std::string ctx;
    for (size_t i = d >= 2 ? d - 2 : 0; i < d + 3; ++i)
      ctx.append("[")
          .append(i < chunks.size() ? chunks[i] : "")
          .append("|")
          .append(i < want.size() ? want[i] : "")
          .append("]");
    ASSERT_EQ(chunks, want) << "first difference at chunk " << d << ": " << ctx;
  }
}

TEST(DataTokenizerFormat, Version1FilesKeepTheLegacyPreSplit) {
  testing::TempDir dir("presplit");
  // One merge: 'a' + the first byte of "。" (E3 80 82). Only the legacy rule puts them in one
  // chunk.
  write(dir.file("v1.json"), R"({"type": "bpe", "merges": [[97, 227]]})");
  write(dir.file("v2.json"),
        std::string(R"({"type": "bpe", "format_version": 2, "pretokenize": "regex", "pattern": )") +
            nlohmann::json(kGpt2SplitPattern).dump() + R"(, "merges": [[97, 227]]})");
  const auto v1 = Tokenizer::load(dir.file("v1.json"));
  const auto v2 = Tokenizer::load(dir.file("v2.json"));
  EXPECT_EQ(v1->encode("a。"), (std::vector<int32_t>{256, 0x80, 0x82}));
  EXPECT_EQ(v2->encode("a。"), (std::vector<int32_t>{97, 0xE3, 0x80, 0x82}));
  write(dir.file("v9.json"), R"({"type": "bpe", "format_version": 9, "merges": []})");
  EXPECT_THROW(Tokenizer::load(dir.file("v9.json")), UserError);
}

TEST(DataTokenizerFormat, DuplicateMergeIsAUserErrorWithoutInternals) {
  testing::TempDir dir("dup");
  write(dir.file("dup.json"), R"({"type": "bpe", "merges": [[97, 98], [99, 100], [97, 98]]})");
  try {
    Tokenizer::load(dir.file("dup.json"));
    FAIL() << "a duplicate merge loaded";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("merges[2] [97, 98] duplicates merges[0]"), std::string::npos) << m;
    EXPECT_EQ(m.find("check failed"), std::string::npos) << m;
    EXPECT_EQ(m.find(".cpp"), std::string::npos) << m;
  }
}

TEST(DataTokenizerFormat, EndOfTextTokenIsSpecial) {
  const BpeTokenizer plain =
      train_bpe(std::vector<std::string>{"the cat the hat the bat"}, 270, PreSplit::gpt2());
  const BpeTokenizer t = plain.with_eot("<|endoftext|>");
  const int32_t eot = plain.vocab_size();  // the next free id
  ASSERT_TRUE(t.eot_id().has_value());
  EXPECT_EQ(*t.eot_id(), eot);
  EXPECT_EQ(t.vocab_size(), eot + 1);
  const std::string text = "the cat<|endoftext|>the hat";
  const std::vector<int32_t> ids = t.encode(text);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), eot), 1);
  EXPECT_EQ(t.decode(ids), text);
  testing::TempDir dir("eot");
  t.save(dir.file("t.json"));
  const auto back = Tokenizer::load(dir.file("t.json"));
  EXPECT_EQ(back->eot_id(), t.eot_id());
  EXPECT_EQ(back->encode(text), ids);
}

TEST(DataHfTokenizer, ExportThenImportEncodesTheSame) {
  const std::string corpus = testing::sample_text(3000, 1) + " naïve café 日本語。 it's";
  const BpeTokenizer t =
      train_bpe(std::vector<std::string>{corpus}, 400, PreSplit::gpt2()).with_eot("<|endoftext|>");
  std::string warning;
  const nlohmann::json hf = hf_tokenizer_json(t, &warning);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(hf["model"]["vocab"].size(), 401u);
  EXPECT_EQ(hf["model"]["vocab"]["Ġ"], 32);  // GPT-2's character for the space byte
  const auto back = tokenizer_from_hf(hf, "test");
  const std::string text = corpus.substr(0, 500) + "<|endoftext|> x\xff";
  EXPECT_EQ(back->encode(text), t.encode(text));
  EXPECT_EQ(back->eot_id(), t.eot_id());
  EXPECT_EQ(back->decode(back->encode(text)), text);
  // A vocabulary numbered another way (as real HF files are) maps through token_ids.
  nlohmann::json shuffled = hf;
  for (auto& [s, id] : shuffled["model"]["vocab"].items()) id = 400 - id.get<int>();
  shuffled["added_tokens"][0]["id"] = 401;
  const auto perm = tokenizer_from_hf(shuffled, "test");
  const std::vector<int32_t> a = t.encode("the licence"), b = perm->encode("the licence");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i], 400 - a[i]);
  EXPECT_EQ(perm->decode(b), "the licence");
}

TEST(DataHfTokenizer, RefusesWhatItCannotRun) {
  nlohmann::json hf = hf_tokenizer_json(BpeTokenizer({}, PreSplit::gpt2()), nullptr);
  nlohmann::json wp = hf;
  wp["model"]["type"] = "WordPiece";
  EXPECT_THROW(tokenizer_from_hf(wp, "t"), UserError);
  nlohmann::json fb = hf;
  fb["model"]["byte_fallback"] = true;
  EXPECT_THROW(tokenizer_from_hf(fb, "t"), UserError);
  nlohmann::json norm = hf;
  norm["normalizer"] = {{"type", "NFC"}};
  EXPECT_THROW(tokenizer_from_hf(norm, "t"), UserError);
  EXPECT_NO_THROW(tokenizer_from_hf(hf, "t"));
}

}  // namespace
}  // namespace braid
