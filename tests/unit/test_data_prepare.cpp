// braid prepare as a library call: split rule, outputs, determinism, refusals, entropy.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

namespace braid {
namespace {

using testing::TempDir;

std::string decode_shard(const Tokenizer& tok, const std::string& path) {
  TokenShard s(path);
  std::vector<int32_t> ids(static_cast<size_t>(s.size()));
  s.read(0, s.size(), ids.data());
  return tok.decode(ids);
}

TEST(DataPrepare, SplitCutsAtALineStart) {
  auto [t, v] = split_document("aaaa\nbbbb\ncccc\ndddd\n", 0.3);
  EXPECT_EQ(t, "aaaa\nbbbb\ncccc\n");
  EXPECT_EQ(v, "dddd\n");
  auto [t0, v0] = split_document("abc\n", 0.0);
  EXPECT_EQ(t0, "abc\n");
  EXPECT_TRUE(v0.empty());
}

TEST(DataPrepare, UnigramEntropy) {
  std::vector<int32_t> uniform{0, 1, 2, 3, 0, 1, 2, 3};
  EXPECT_NEAR(unigram_entropy(uniform, 10), std::log(4.0), 1e-12);
  std::vector<int32_t> one{5, 5, 5};
  EXPECT_NEAR(unigram_entropy(one, 10), 0.0, 1e-12);
}

TEST(DataPrepare, WritesShardsThatDecodeToTheSplitText) {
  TempDir dir("prepare");
  std::filesystem::create_directories(dir.path() / "in" / "sub");
  const std::string a = testing::sample_text(800, 1), b = testing::sample_text(600, 2) + "\n";
  testing::write_text(dir.file("in/sub/b.txt"), b);
  testing::write_text(dir.file("in/a.txt"), a);
  std::filesystem::create_symlink(dir.file("in/a.txt"), dir.file("in/z_link.txt"));
  for (const char* kind : {"byte", "bpe"}) {
    PrepareOptions o;
    o.inputs = {dir.file("in")};
    o.out_dir = dir.file(std::string("out_") + kind);
    o.tokenizer = kind;
    o.vocab_size = std::string(kind) == "bpe" ? 300 : 0;
    o.val_fraction = 0.1;
    PrepareSummary s = prepare(o);
    EXPECT_EQ(s.documents, 2);  // the symlink is not a second copy of a.txt
    auto tok = Tokenizer::load(o.out_dir + "/braid_tokenizer.json");
    EXPECT_EQ(tok->kind(), kind);
    // Documents in sorted path order ("in/a.txt" < "in/sub/b.txt"), each ending in '\n'.
    const std::string a_doc = a + "\n";  // outlives the views below
    auto [at, av] = split_document(a_doc, 0.1);
    auto [bt, bv] = split_document(b, 0.1);
    // bpe: each document's part ends with the end-of-text token (the last id); byte: none.
    const std::string eot = std::string(kind) == "bpe" ? "<|endoftext|>" : "";
    if (!eot.empty()) {
      EXPECT_EQ(tok->eot_id(), tok->vocab_size() - 1);
    }
    EXPECT_TRUE(decode_shard(*tok, o.out_dir + "/train.bin") ==
                std::string(at) + eot + std::string(bt) + eot);
    EXPECT_TRUE(decode_shard(*tok, o.out_dir + "/val.bin") ==
                std::string(av) + eot + std::string(bv) + eot);
    EXPECT_FALSE(av.empty());
    auto meta = nlohmann::json::parse(testing::read_text(o.out_dir + "/meta.json"));
    EXPECT_EQ(meta["train_tokens"].get<int64_t>(), TokenShard(o.out_dir + "/train.bin").size());
    EXPECT_EQ(meta["val_tokens"].get<int64_t>(), s.val_tokens);
    EXPECT_EQ(meta["vocab_size"].get<int>(), tok->vocab_size());
    EXPECT_GT(meta["unigram_entropy_nats"].get<double>(), 1.0);
    EXPECT_FALSE(format_prepare_summary(s, o.out_dir).empty());
  }
}

TEST(DataPrepare, DeterministicAndRefusesNonEmptyOutWithoutForce) {
  TempDir dir("prepare_force");
  testing::write_text(dir.file("doc.txt"), testing::sample_text(500, 3));
  PrepareOptions o;
  o.inputs = {dir.file("doc.txt")};
  o.out_dir = dir.file("out");
  o.vocab_size = 320;
  prepare(o);
  const std::string tok1 = testing::read_text(dir.file("out/braid_tokenizer.json"));
  const std::string train1 = testing::read_text(dir.file("out/train.bin"));
  try {
    prepare(o);
    ADD_FAILURE() << "overwrote a non-empty folder";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  o.force = true;
  prepare(o);
  EXPECT_EQ(testing::read_text(dir.file("out/braid_tokenizer.json")), tok1);
  EXPECT_EQ(testing::read_text(dir.file("out/train.bin")), train1);
}

TEST(DataPrepare, RejectsBadOptions) {
  TempDir dir("prepare_bad");
  testing::write_text(dir.file("doc.txt"), "hello\n");
  auto run = [&](auto edit) {
    PrepareOptions o;
    o.inputs = {dir.file("doc.txt")};
    o.out_dir = dir.file("out");
    edit(o);
    EXPECT_THROW(prepare(o), UserError);
  };
  run([&](PrepareOptions& o) { o.inputs = {dir.file("nope.txt")}; });
  run([](PrepareOptions& o) { o.inputs.clear(); });
  run([](PrepareOptions& o) { o.tokenizer = "wordpiece"; });
  run([](PrepareOptions& o) { o.tokenizer = "byte", o.vocab_size = 512; });
  run([](PrepareOptions& o) { o.val_fraction = 0.9; });
  testing::write_text(dir.file("empty.txt"), "");
  run([&](PrepareOptions& o) { o.inputs = {dir.file("empty.txt")}; });
}

}  // namespace
}  // namespace braid
