// ShardWriter and AtomicFileWriter::write_at: streamed shards equal one-shot ones, nothing is
// left behind by an unfinished or failing writer.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/shard.h"
#include "data_test_util.h"

namespace braid {
namespace {

using testing::TempDir;

std::vector<int32_t> ramp(size_t n, int vocab) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>((i * 7919 + 13) % vocab);
  return v;
}

int files_in(const TempDir& dir) {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) (void)e, ++n;
  return n;
}

TEST(DataShardWriter, ManyAppendsEqualOneWriteShard) {
  TempDir dir("shard_writer");
  // 2- and 4-byte ids; 700k ids of 2 or 4 bytes cross the writer's 1 MiB buffer.
  for (int vocab : {300, 65536, 70000}) {
    const std::vector<int32_t> ids = ramp(700000, vocab);
    const std::string one = dir.file(fmt::format("one{}.bin", vocab));
    const std::string many = dir.file(fmt::format("many{}.bin", vocab));
    write_shard(one, ids, vocab);
    ShardWriter w(many, vocab);
    size_t at = 0;
    for (size_t n : {0, 1, 17, 4096, 300000, 1}) {
      w.append(std::span<const int32_t>(ids).subspan(at, n));
      at += n;
    }
    w.append(std::span<const int32_t>(ids).subspan(at));
    EXPECT_EQ(w.count(), 700000);
    EXPECT_FALSE(std::filesystem::exists(many)) << "visible before finish()";
    w.finish();
    EXPECT_EQ(testing::read_text(many), testing::read_text(one));
    TokenShard s(many);
    EXPECT_EQ(s.size(), 700000);
    EXPECT_EQ(s.id_bytes(), vocab <= 65536 ? 2 : 4);
    EXPECT_EQ(s[699999], ids[699999]);
    EXPECT_THROW(w.append(ids), Error);
  }
  EXPECT_EQ(files_in(dir), 6);  // no temp files
}

TEST(DataShardWriter, FourByteIdsRoundTrip) {
  TempDir dir("shard_writer_u32");
  const int vocab = 1 << 20;
  const std::vector<int32_t> ids{0, 65535, 65536, 70001, vocab - 1, 123456};
  ShardWriter w(dir.file("s.bin"), vocab);
  w.append(std::span<const int32_t>(ids).first(2));
  w.append(std::span<const int32_t>(ids).subspan(2));
  w.finish();
  TokenShard s(dir.file("s.bin"));
  ASSERT_EQ(s.size(), 6);
  EXPECT_EQ(s.id_bytes(), 4);
  std::vector<int32_t> back(6);
  s.read(0, 6, back.data());
  EXPECT_EQ(back, ids);
}

TEST(DataShardWriter, UnfinishedWriterLeavesNothing) {
  TempDir dir("shard_writer_abort");
  const std::string path = dir.file("s.bin");
  {
    ShardWriter w(path, 1000);
    w.append(ramp(2000000, 1000));  // past the buffer: bytes reached the temp file
  }
  EXPECT_EQ(files_in(dir), 0);
  // An earlier shard at path survives an abandoned rewrite.
  write_shard(path, ramp(10, 1000), 1000);
  const std::string before = testing::read_text(path);
  {
    ShardWriter w(path, 1000);
    w.append(ramp(50, 1000));
  }
  EXPECT_EQ(testing::read_text(path), before);
  EXPECT_EQ(files_in(dir), 1);
}

TEST(DataShardWriter, IdsOutsideTheVocabularyThrow) {
  TempDir dir("shard_writer_bad");
  for (int32_t bad : {-1, 500, 1 << 30}) {
    ShardWriter w(dir.file("s.bin"), 500);
    w.append(ramp(100, 500));
    std::vector<int32_t> ids = ramp(10, 500);
    ids[7] = bad;
    try {
      w.append(ids);
      ADD_FAILURE() << "id " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("at 107"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(write_shard(dir.file("t.bin"), std::vector<int32_t>{1, 2, 256}, 256), Error);
  EXPECT_EQ(files_in(dir), 0);
}

TEST(AtomicFileWriter, WriteAtOverwritesWithoutMovingTheEnd) {
  TempDir dir("atomic_write_at");
  const std::string path = dir.file("f.txt");
  AtomicFileWriter w(path);
  w.write("hello world", 11);
  w.write_at(6, "WORLD", 5);
  w.write_at(0, "J", 1);
  EXPECT_EQ(w.bytes_written(), 11u);
  w.write("!", 1);  // appends after the last write(), not after the last write_at()
  EXPECT_THROW(w.write_at(10, "xyz", 3), Error);  // would extend the file
  EXPECT_THROW(w.write_at(13, "", 0), Error);
  w.write_at(12, "", 0);
  w.commit();
  EXPECT_EQ(testing::read_text(path), "Jello WORLD!");
  EXPECT_THROW(w.write_at(0, "x", 1), Error);  // after commit
  EXPECT_EQ(files_in(dir), 1);
}

}  // namespace
}  // namespace braid
