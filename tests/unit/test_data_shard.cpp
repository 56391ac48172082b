// Token shards: round trips in both widths, atomic writes, and every rejected file.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "data/shard.h"
#include "data_test_util.h"

namespace braid {
namespace {

using testing::TempDir;

// Expects opening path to fail with a UserError naming the file and containing `what`.
void expect_rejected(const std::string& path, const std::string& what) {
  try {
    TokenShard s(path);
    ADD_FAILURE() << path << " opened";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

std::vector<int32_t> ramp(int n, int vocab) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = (i * 7919) % vocab;
  return v;
}

TEST(DataShard, RoundTripU16AndU32) {
  TempDir dir("shard_rt");
  for (int vocab : {256, 65536, 70000}) {
    const std::string path = dir.file(fmt::format("s{}.bin", vocab));
    auto ids = ramp(1000, vocab);
    ids.back() = vocab - 1;
    write_shard(path, ids, vocab);
    TokenShard s(path);
    EXPECT_EQ(s.size(), 1000);
    EXPECT_EQ(s.vocab_size(), vocab);
    EXPECT_EQ(s.id_bytes(), vocab <= 65536 ? 2 : 4);
    EXPECT_EQ(std::filesystem::file_size(path), 32u + 1000u * s.id_bytes());
    std::vector<int32_t> back(1000);
    s.read(0, 1000, back.data());
    EXPECT_EQ(back, ids);
    EXPECT_EQ(s[999], vocab - 1);
    EXPECT_THROW(s.read(990, 11, back.data()), Error);
  }
  // Only the final files remain: the temp files were renamed away.
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().extension(), ".bin");
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST(DataShard, EmptyShardAndMove) {
  TempDir dir("shard_empty");
  write_shard(dir.file("e.bin"), {}, 10);
  TokenShard a(dir.file("e.bin"));
  EXPECT_EQ(a.size(), 0);
  TokenShard b = std::move(a);
  EXPECT_EQ(b.vocab_size(), 10);
}

TEST(DataShard, RejectsBadFiles) {
  TempDir dir("shard_bad");
  expect_rejected(dir.file("missing.bin"), "cannot be opened");

  const std::string good = dir.file("good.bin");
  write_shard(good, ramp(100, 300), 300);
  const std::string bytes = testing::read_text(good);

  auto patched = [&](const std::string& name, size_t at, const void* v, size_t n) {
    std::string b = bytes;
    std::memcpy(b.data() + at, v, n);
    testing::write_text(dir.file(name), b);
    return dir.file(name);
  };
  expect_rejected(patched("magic.bin", 0, "BRAIDTOX", 8), "magic");
  const uint32_t v9 = 9;
  expect_rejected(patched("version.bin", 8, &v9, 4), "version 9");
  const uint32_t w3 = 3;
  expect_rejected(patched("dtype.bin", 12, &w3, 4), "dtype code 3");
  const uint16_t big = 300;  // == vocab_size: one past the last valid id
  expect_rejected(patched("vocab.bin", 32 + 2 * 41, &big, 2), "id 300 at position 41");

  testing::write_text(dir.file("trunc.bin"), bytes.substr(0, bytes.size() - 2));
  expect_rejected(dir.file("trunc.bin"), "truncated");
  testing::write_text(dir.file("short.bin"), bytes.substr(0, 20));
  expect_rejected(dir.file("short.bin"), "header");
  const uint64_t huge = uint64_t{1} << 62;
  expect_rejected(patched("count.bin", 24, &huge, 8), "truncated");
}

TEST(DataShard, ModelVocabMustCoverShard) {
  TempDir dir("shard_vocab");
  write_shard(dir.file("s.bin"), ramp(10, 512), 512);
  TokenShard s(dir.file("s.bin"));
  EXPECT_NO_THROW(check_shard_vocab(s, 512));
  EXPECT_NO_THROW(check_shard_vocab(s, 50257));
  try {
    check_shard_vocab(s, 256);
    ADD_FAILURE() << "accepted";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(dir.file("s.bin")), std::string::npos) << m;
    EXPECT_NE(m.find("model.vocab_size"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace braid
