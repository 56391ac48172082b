// Streaming prepare: the same outputs as tokenizing the joined text at once, and a failure
// half-way leaves no shard and no temp file.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data_test_util.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::vector<int32_t> shard_ids(const std::string& path) {
  TokenShard s(path);
  std::vector<int32_t> ids(static_cast<size_t>(s.size()));
  s.read(0, s.size(), ids.data());
  return ids;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(DataPrepareStream, SameOutputsAsTheJoinedText) {
  TempDir dir("prepare_stream");
  fs::create_directories(dir.path() / "in");
  // Indented paragraphs, so whitespace runs get merges of their own, and documents that begin
  // with blanks or newlines: the whitespace at the end of one document's part and at the start
  // of the next form one chunk of the joined text. One document is larger than prepare's
  // 1 MiB feed block.
  auto paragraphs = [](std::string s) {
    for (size_t at = 0; (at = s.find('\n', at)) != std::string::npos; at += 5)
      s.replace(at, 1, "\n\n   ");
    return s;
  };
  const std::vector<std::string> docs = {"  title\n" + paragraphs(testing::sample_text(3000, 1)),
                                         "\n\n  " + paragraphs(testing::sample_text(230000, 2)),
                                         "   " + testing::sample_text(900, 3) + "\n  \n",
                                         "\n\n   \t\tx"};
  ASSERT_GT(docs[1].size(), size_t{1} << 20);
  std::string train_text, val_text;
  for (size_t i = 0; i < docs.size(); ++i) {
    testing::write_text(dir.file(fmt::format("in/d{}.txt", i)), docs[i]);
    const std::string doc = docs[i].back() == '\n' ? docs[i] : docs[i] + "\n";
    auto [train, val] = split_document(doc, 0.2);
    train_text += train;
    val_text += val;
  }
  for (const char* kind : {"bpe", "byte"}) {
    PrepareOptions o;
    o.inputs = {dir.file("in")};
    o.out_dir = dir.file(std::string("out_") + kind);
    o.tokenizer = kind;
    o.vocab_size = std::string(kind) == "bpe" ? 300 : 0;
    o.val_fraction = 0.2;
    o.eot = "none";  // the documents then form one text (the eot case: DataPrepare tests)
    const PrepareSummary s = prepare(o);
    std::unique_ptr<Tokenizer> ref;
    if (std::string(kind) == "bpe")
      ref = std::make_unique<BpeTokenizer>(train_bpe(std::vector<std::string>{train_text}, 300, PreSplit::gpt2()));
    else
      ref = std::make_unique<ByteTokenizer>();
    EXPECT_EQ(testing::read_text(o.out_dir + "/braid_tokenizer.json"), ref->to_json().dump() + "\n")
        << kind;
    const std::vector<int32_t> train_ids = ref->encode(train_text);
    EXPECT_TRUE(shard_ids(o.out_dir + "/train.bin") == train_ids) << kind;
    EXPECT_TRUE(shard_ids(o.out_dir + "/val.bin") == ref->encode(val_text)) << kind;
    EXPECT_EQ(s.documents, 4);
    EXPECT_EQ(s.train_tokens, static_cast<int64_t>(train_ids.size()));
    EXPECT_EQ(s.unigram_entropy_nats, unigram_entropy(train_ids, ref->vocab_size()));
    auto meta = nlohmann::json::parse(testing::read_text(o.out_dir + "/meta.json"));
    EXPECT_EQ(meta["input_bytes"].get<int64_t>(),
              static_cast<int64_t>(train_text.size() + val_text.size()));
    EXPECT_EQ(names_in(o.out_dir),
              (std::vector<std::string>{"braid_tokenizer.json", "meta.json", "train.bin", "val.bin"}));
  }
}

TEST(DataPrepareStream, FailureHalfWayLeavesNoShards) {
  TempDir dir("prepare_fail");
  testing::write_text(dir.file("doc.txt"), testing::sample_text(400, 5));
  PrepareOptions o;
  o.inputs = {dir.file("doc.txt")};
  o.out_dir = dir.file("out");
  o.vocab_size = 280;
  o.force = true;
  // A folder where a file must go makes a step of pass 2 fail: opening val.bin's temp file
  // (train.bin's is already open), then renaming train.bin into place after all ids are
  // written (val.bin's writer is then still unfinished).
  for (const char* blocker : {"val.bin.tmp", "train.bin"}) {
    fs::remove_all(o.out_dir);
    fs::create_directories(dir.path() / "out" / blocker);
    EXPECT_THROW(prepare(o), UserError) << blocker;
    EXPECT_EQ(names_in(o.out_dir), std::vector<std::string>{blocker});
  }
  // No text at all: the folder prepare would have made is not left behind either.
  testing::write_text(dir.file("nl.txt"), "\n");
  o.inputs = {dir.file("nl.txt")};
  o.out_dir = dir.file("new_out");
  for (const char* kind : {"byte", "bpe"}) {
    o.tokenizer = kind;
    o.vocab_size = 0;
    EXPECT_THROW(prepare(o), UserError) << kind;
    EXPECT_FALSE(fs::exists(o.out_dir)) << kind;
  }
}

}  // namespace
}  // namespace braid
