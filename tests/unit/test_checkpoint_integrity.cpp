// Checkpoint integrity: SHA-256 manifests (and the older braid-mix64-v1 ones), and step
// directories whose files are partly gone never counting as complete.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/checksum.h"
#include "launch/io/checkpoint.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using Named = std::vector<std::pair<std::string, Tensor>>;

Named weights(float v) { return {{"w", Tensor::from_vector({v, v + 1, v + 2}, {3})}}; }
Named optim(float v) { return {{"exp_avg.w", Tensor::from_vector({v, v, v}, {3})}}; }

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

class CheckpointIntegrity : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    run_ = fs::temp_directory_path() /
           ("braid_ckint_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(run_);
  }
  void TearDown() override { fs::remove_all(run_); }
  fs::path run_;
};

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_F(CheckpointIntegrity, ManifestRecordsSha256OfEachFile) {
  CheckpointManager m(run_.string(), 3);
  const fs::path p = m.save(1, weights(1), optim(1), {});
  const nlohmann::json man = nlohmann::json::parse(read_all(p / "manifest.json"));
  ASSERT_EQ(man["checksum_algo"], "sha256");
  for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string bytes = read_all(p / f);
    EXPECT_EQ(man["files"][f]["checksum"], sha256_hex(bytes.data(), bytes.size())) << f;
  }
}

TEST_F(CheckpointIntegrity, OldMix64ManifestStillLoads) {
  CheckpointManager m(run_.string(), 3);
  const fs::path p = m.save(1, weights(1), optim(1), {});
  nlohmann::json man = nlohmann::json::parse(read_all(p / "manifest.json"));
  man["checksum_algo"] = "braid-mix64-v1";
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    man["files"][f]["checksum"] = checksum_hex(checksum_file((p / f).string()).checksum);
  std::ofstream(p / "manifest.json") << man.dump(2);
  EXPECT_EQ(CheckpointManager::load(p.string()).model.get("w").f32()[2], 3.0f);

  man["files"]["model.safetensors"]["checksum"] = "0000000000000000";
  std::ofstream(p / "manifest.json") << man.dump(2);
  try {
    CheckpointManager::load(p.string());
    FAIL() << "a wrong mix64 checksum loaded";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  man["checksum_algo"] = "md5";
  std::ofstream(p / "manifest.json") << man.dump(2);
  EXPECT_THROW(CheckpointManager::load(p.string()), UserError);
}

// What a kill -9 in the middle of the old pruning (files deleted one by one) left behind.
TEST_F(CheckpointIntegrity, StepDirWithMissingFileIsNotComplete) {
  CheckpointManager m(run_.string(), 5);
  const std::string one = m.save(1, weights(1), optim(1), {});
  const std::string two = m.save(2, weights(2), optim(2), {});
  fs::remove(fs::path(two) / "optimizer.safetensors");
  EXPECT_EQ(m.list().size(), 1u);
  EXPECT_EQ(*m.latest(), one);  // `latest` still names step 2, which no longer counts

  // A truncated file counts as missing too.
  const std::string three = m.save(3, weights(3), optim(3), {});
  fs::resize_file(fs::path(three) / "model.safetensors", 10);
  EXPECT_EQ(*m.latest(), one);
}

TEST_F(CheckpointIntegrity, PruningRetiresByRenameAndLeavesNothing) {
  CheckpointManager m(run_.string(), 1);
  const std::string one = m.save(1, weights(1), optim(1), {});
  // A retired directory that a killed prune did not get to delete: complete files, but out of
  // the step-* namespace, so never listed; the next save removes it.
  const fs::path retired = fs::path(m.dir()) / ".tmp-retired-step-00000000";
  fs::copy(one, retired, fs::copy_options::recursive);
  EXPECT_EQ(m.list().size(), 1u);
  m.save(2, weights(2), optim(2), {});
  ASSERT_EQ(m.list().size(), 1u);
  EXPECT_EQ(m.list()[0].first, 2);
  for (const auto& e : fs::directory_iterator(m.dir()))
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
}

TEST_F(CheckpointIntegrity, NonFiniteWeightsAreNeverSaved) {
  CheckpointManager m(run_.string(), 3);
  const std::string good = m.save(1, weights(1), optim(1), {});
  for (float bad : {std::nanf(""), INFINITY}) {
    Named w = weights(2);
    w[0].second.f32()[1] = bad;
    try {
      m.save(2, w, optim(2), {});
      FAIL() << "a checkpoint with " << bad << " was written";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("not writing checkpoint step 2: w holds a NaN"),
                std::string::npos)
          << e.what();
    }
    Named o = optim(2);
    o[0].second.f32()[0] = bad;
    EXPECT_THROW(m.save(2, weights(2), o, {}), UserError);
  }
  EXPECT_EQ(*m.latest(), good);
  EXPECT_EQ(m.list().size(), 1u);
  // The multi-writer path refuses it before writing the file too.
  Named w = weights(3);
  w[0].second.f32()[0] = std::nanf("");
  m.begin_save(3);
  EXPECT_THROW(CheckpointManager::write_files(m.staging_dir(3), 3,
                                              {{"model.safetensors", w, nlohmann::json::object()}}),
               UserError);
  EXPECT_TRUE(fs::is_empty(m.staging_dir(3)));
}

}  // namespace
}  // namespace braid
