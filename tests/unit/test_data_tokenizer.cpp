// Tokenizers: pre-split, byte tokenizer, BPE training vs a naive reference, round trips, files.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/pretokenize.h"
#include "data_test_util.h"

namespace braid {
namespace {

using testing::TempDir;

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Reference trainer: recount every pair from scratch each step (slow, obviously right).
std::vector<std::pair<int32_t, int32_t>> naive_train(const std::string& text, int vocab,
                                                    std::vector<int32_t>* final_ids = nullptr) {
  std::vector<std::vector<int32_t>> words;
  for (std::string_view c : pretokenize(text)) {
    std::vector<int32_t> w;
    for (char ch : c) w.push_back(static_cast<unsigned char>(ch));
    words.push_back(w);
  }
  std::vector<std::pair<int32_t, int32_t>> merges;
  while (256 + static_cast<int>(merges.size()) < vocab) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;
    for (auto& w : words)
      for (size_t i = 0; i + 1 < w.size(); ++i) ++counts[{w[i], w[i + 1]}];
    if (counts.empty()) break;
    auto best = counts.begin();  // map order: ties go to the smallest pair
    for (auto it = counts.begin(); it != counts.end(); ++it)
      if (it->second > best->second) best = it;
    const int32_t id = 256 + static_cast<int32_t>(merges.size());
    merges.push_back(best->first);
    for (auto& w : words) {
      std::vector<int32_t> out;
      for (size_t i = 0; i < w.size();) {
        if (i + 1 < w.size() && std::make_pair(w[i], w[i + 1]) == best->first) {
          out.push_back(id);
          i += 2;
        } else {
          out.push_back(w[i++]);
        }
      }
      w = out;
    }
  }
  if (final_ids)
    for (auto& w : words) final_ids->insert(final_ids->end(), w.begin(), w.end());
  return merges;
}

TEST(DataPretokenize, ChunksFollowTheRule) {
  auto c = pretokenize("Hello world  42!! x\n\n y\xc3\xa9");
  std::vector<std::string> got(c.begin(), c.end());
  std::vector<std::string> want{"Hello", " world", " ", " 42", "!!", " x", "\n\n",
                                " y\xc3\xa9"};
  EXPECT_EQ(got, want);
}

TEST(DataPretokenize, ChunksConcatenateToTheInput) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::string s = random_bytes(500, seed) + testing::sample_text(100, seed);
    std::string joined;
    for (auto c : pretokenize(s)) {
      EXPECT_FALSE(c.empty());
      joined += c;
    }
    EXPECT_EQ(joined, s);
  }
}

TEST(DataByteTokenizer, IdentityOnBytes) {
  ByteTokenizer t;
  EXPECT_EQ(t.vocab_size(), 256);
  const std::string s("a\x00\xff\n", 4);
  auto ids = t.encode(s);
  EXPECT_EQ(ids, (std::vector<int32_t>{97, 0, 255, 10}));
  EXPECT_EQ(t.decode(ids), s);
  std::vector<int32_t> bad{1, 256};
  EXPECT_THROW(t.decode(bad), UserError);
}

TEST(DataBpe, MatchesNaiveReferenceTrainer) {
  const std::string text = testing::sample_text(1500) + random_bytes(300, 3);
  for (int vocab : {256, 300, 420}) {
    BpeTokenizer t = train_bpe(std::vector<std::string>{text}, vocab);
    std::vector<int32_t> trained_ids;
    EXPECT_EQ(t.merges(), naive_train(text, vocab, &trained_ids)) << "vocab " << vocab;
    // Encoding the training text lands exactly where training left its words.
    EXPECT_TRUE(t.encode(text) == trained_ids) << "vocab " << vocab;
    EXPECT_EQ(t.vocab_size(), vocab);
  }
}

TEST(DataBpe, RoundTripsTextAndRandomBytes) {
  const std::string text = testing::sample_text(3000);
  BpeTokenizer t = train_bpe(std::vector<std::string>{text}, 400);
  EXPECT_EQ(t.decode(t.encode(text)), text);
  for (uint32_t seed = 0; seed < 10; ++seed) {
    std::string s = random_bytes(2000, seed);
    EXPECT_EQ(t.decode(t.encode(s)), s);
  }
  // Invalid UTF-8 (a split multi-byte character) survives too.
  const std::string broken = "\xc3 na\xc3\xafve \xef\xbf";
  EXPECT_EQ(t.decode(t.encode(broken)), broken);
  EXPECT_EQ(t.encode(""), std::vector<int32_t>{});
}

TEST(DataBpe, MergesReduceTokenCount) {
  const std::string text = testing::sample_text(3000);
  BpeTokenizer t = train_bpe(std::vector<std::string>{text}, 512);
  auto ids = t.encode(text);
  EXPECT_LT(ids.size(), text.size() * 45 / 100);
  // Every token's bytes are its two parts' bytes.
  for (size_t i = 0; i < t.merges().size(); ++i) {
    auto [a, b] = t.merges()[i];
    EXPECT_EQ(t.token_bytes(256 + static_cast<int32_t>(i)), t.token_bytes(a) + t.token_bytes(b));
  }
}

TEST(DataBpe, StopsWhenNoPairsAreLeft) {
  BpeTokenizer t = train_bpe(std::vector<std::string>{"ab ab"}, 1000);
  EXPECT_EQ(t.vocab_size(), 258);  // "ab", then " ab"
  EXPECT_THROW(train_bpe(std::vector<std::string>{"x"}, 100), UserError);
}

TEST(DataBpe, TrainingIsDeterministic) {
  TempDir dir("tok_det");
  const std::string text = testing::sample_text(2000, 11);
  train_bpe(std::vector<std::string>{text}, 450).save(dir.file("a.json"));
  train_bpe(std::vector<std::string>{text}, 450).save(dir.file("b.json"));
  EXPECT_EQ(testing::read_text(dir.file("a.json")), testing::read_text(dir.file("b.json")));
}

TEST(DataTokenizerFile, SaveLoadRoundTrip) {
  TempDir dir("tok_file");
  const std::string text = testing::sample_text(2000, 5);
  BpeTokenizer t = train_bpe(std::vector<std::string>{text}, 380);
  t.save(dir.file("bpe.json"));
  auto u = Tokenizer::load(dir.file("bpe.json"));
  EXPECT_EQ(u->kind(), "bpe");
  EXPECT_EQ(u->vocab_size(), 380);
  EXPECT_EQ(u->encode(text), t.encode(text));
  ByteTokenizer().save(dir.file("byte.json"));
  auto b = Tokenizer::load(dir.file("byte.json"));
  EXPECT_EQ(b->kind(), "byte");
  EXPECT_EQ(b->vocab_size(), 256);
}

TEST(DataTokenizerFile, MalformedFilesNameTheFileAndTheProblem) {
  TempDir dir("tok_bad");
  struct Case {
    const char* name;
    std::string body;
    const char* expect;
  };
  const std::vector<Case> cases{
      {"notjson.json", "{merges: ", "not valid JSON"},
      {"notype.json", R"({"merges": []})", "\"type\""},
      {"unknown.json", R"({"type": "wordpiece"})", "wordpiece"},
      {"badpair.json", R"({"type": "bpe", "merges": [[1, 2], [300, 1]]})", "merges[1]"},
      {"notpair.json", R"({"type": "bpe", "merges": [[1]]})", "merges[0]"},
      {"vocab.json", R"({"type": "bpe", "vocab_size": 300, "merges": [[1, 2]]})", "vocab_size"},
      {"dup.json", R"({"type": "bpe", "merges": [[1, 2], [1, 2]]})", "duplicate"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file(c.name);
    testing::write_text(path, c.body);
    try {
      Tokenizer::load(path);
      ADD_FAILURE() << c.name << " loaded";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(Tokenizer::load(dir.file("missing.json")), UserError);
}

}  // namespace
}  // namespace braid
