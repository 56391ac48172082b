// CheckpointManager: round trip, latest pointer, pruning, corruption and interrupted saves.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "launch/io/checkpoint.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using Named = std::vector<std::pair<std::string, Tensor>>;

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    run_ = fs::temp_directory_path() /
           ("braid_ckpt_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(run_);
  }
  void TearDown() override { fs::remove_all(run_); }

  static Named weights(float v) {
    return {{"transformer.wte.weight", Tensor::from_vector({v, v + 1, v + 2, v + 3, v + 4, v + 5}, {3, 2})},
            {"transformer.ln_f.bias", Tensor::from_vector({-v}, {1})}};
  }
  static Named optim(float v) {
    return {{"exp_avg.transformer.wte.weight", Tensor::from_vector({v, v, v, v, v, v}, {3, 2})},
            {"step", Tensor::from_vector_i32({7}, {1})}};
  }
  static std::string message_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const UserError& e) {
      return e.what();
    }
    return "(no UserError)";
  }

  fs::path run_;
};

TEST_F(Checkpoint, SaveLoadRoundTrip) {
  CheckpointManager m(run_.string(), 3);
  EXPECT_FALSE(m.latest().has_value());
  const nlohmann::json state = {{"rng", {1, 2, 3}}, {"cursor", 4567}, {"config", "model:\n  n_layer: 2\n"}};
  const std::string p = m.save(12, weights(1.0f), optim(0.5f), state);
  EXPECT_EQ(fs::path(p).filename(), "step-00000012");
  EXPECT_TRUE(fs::exists(fs::path(p) / "manifest.json"));

  LoadedCheckpoint c = CheckpointManager::load(p);
  EXPECT_EQ(c.step, 12);
  EXPECT_EQ(c.state, state);
  Tensor w = c.model.get("transformer.wte.weight");
  EXPECT_EQ(w.shape(), (Shape{3, 2}));
  EXPECT_EQ(w.f32()[5], 6.0f);
  EXPECT_EQ(c.model.get("transformer.ln_f.bias").f32()[0], -1.0f);
  EXPECT_EQ(c.optimizer.get("exp_avg.transformer.wte.weight").f32()[3], 0.5f);
  EXPECT_EQ(c.optimizer.get("step").i32()[0], 7);

  std::ifstream mf(fs::path(p) / "manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(mf);
  EXPECT_EQ(manifest["checksum_algo"], "sha256");
  EXPECT_EQ(manifest["files"]["model.safetensors"]["bytes"].get<uint64_t>(),
            fs::file_size(fs::path(p) / "model.safetensors"));
}

TEST_F(Checkpoint, LatestPointerAndKeepLast) {
  CheckpointManager m(run_.string(), 2);
  m.save(1, weights(1), optim(1), {});
  m.save(2, weights(2), optim(2), {});
  EXPECT_EQ(fs::path(*m.latest()).filename(), "step-00000002");
  m.save(3, weights(3), optim(3), {});
  EXPECT_EQ(fs::path(*m.latest()).filename(), "step-00000003");
  std::ifstream pointer(fs::path(m.dir()) / "latest");
  std::string name;
  pointer >> name;
  EXPECT_EQ(name, "step-00000003");
  const auto all = m.list();
  ASSERT_EQ(all.size(), 2u);  // step 1 pruned
  EXPECT_EQ(all[0].first, 2);
  EXPECT_EQ(all[1].first, 3);
  EXPECT_FALSE(fs::exists(fs::path(m.dir()) / "step-00000001"));
  EXPECT_FALSE(fs::exists(fs::path(m.dir()) / "latest.tmp"));
  EXPECT_EQ(CheckpointManager::load(*m.latest()).model.get("transformer.ln_f.bias").f32()[0], -3.0f);

  // keep_last = 1 keeps only the one just written.
  CheckpointManager one(run_.string(), 1);
  one.save(4, weights(4), optim(4), {});
  ASSERT_EQ(one.list().size(), 1u);
  EXPECT_EQ(one.list()[0].first, 4);
}

TEST_F(Checkpoint, FlippedByteFailsChecksum) {
  CheckpointManager m(run_.string(), 3);
  m.save(1, weights(1), optim(1), {});
  const std::string p = m.save(2, weights(2), optim(2), {});
  const fs::path model = fs::path(p) / "model.safetensors";
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char b;
    f.get(b);
    f.seekp(-3, std::ios::end);
    f.put(static_cast<char>(b ^ 0x10));
  }
  const std::string msg = message_of([&] { CheckpointManager::load(p); });
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  EXPECT_NE(msg.find(model.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("checkpoint is corrupt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checkpoint.resume="), std::string::npos) << msg;
  EXPECT_NE(msg.find("step-00000001"), std::string::npos) << msg;  // the earlier one is suggested

  // A truncated file is caught by its size.
  fs::resize_file(model, fs::file_size(model) - 1);
  const std::string msg2 = message_of([&] { CheckpointManager::load(p); });
  EXPECT_NE(msg2.find("size"), std::string::npos) << msg2;
}

TEST_F(Checkpoint, InterruptedSaveLeavesEarlierOneIntact) {
  CheckpointManager m(run_.string(), 5);
  m.save(1, weights(1), optim(1), {});
  const std::string good = m.save(2, weights(2), optim(2), {});

  // A save that died before its manifest: tensor files in a .tmp directory, nothing renamed.
  const fs::path tmp = fs::path(m.dir()) / ".tmp-step-00000003";
  fs::create_directories(tmp);
  fs::copy_file(fs::path(good) / "model.safetensors", tmp / "model.safetensors");
  EXPECT_EQ(*m.latest(), good);
  // A step directory without a manifest is not complete either.
  fs::create_directories(fs::path(m.dir()) / "step-00000004");
  fs::copy_file(fs::path(good) / "model.safetensors",
                fs::path(m.dir()) / "step-00000004" / "model.safetensors");
  fs::remove(fs::path(m.dir()) / "latest");
  EXPECT_EQ(*m.latest(), good);  // falls back to the newest complete directory
  const std::string msg = message_of([&] { CheckpointManager::load(m.dir() + "/step-00000004"); });
  EXPECT_NE(msg.find("manifest"), std::string::npos) << msg;

  // A save that throws part-way (duplicate tensor names) changes nothing that existed...
  fs::remove_all(fs::path(m.dir()) / "step-00000004");
  m.save(3, weights(3), optim(3), {});
  Named dup = weights(4);
  dup.push_back(dup[0]);
  EXPECT_ANY_THROW(m.save(4, dup, optim(4), {}));
  EXPECT_EQ(fs::path(*m.latest()).filename(), "step-00000003");
  EXPECT_EQ(m.list().size(), 3u);
  EXPECT_NO_THROW(CheckpointManager::load(*m.latest()));
  // ...and the next save clears every leftover temporary directory.
  fs::create_directories(tmp);
  m.save(5, weights(5), optim(5), {});
  for (const auto& e : fs::directory_iterator(m.dir()))
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
  EXPECT_EQ(fs::path(*m.latest()).filename(), "step-00000005");
}

TEST_F(Checkpoint, ShapeMismatchMessage) {
  CheckpointManager m(run_.string(), 3);
  LoadedCheckpoint c = CheckpointManager::load(m.save(1, weights(1), optim(1), {}));
  EXPECT_NO_THROW(check_tensor_matches(c.model, "transformer.wte.weight", {3, 2}, DType::F32));
  const std::string msg = message_of([&] {
    check_tensor_matches(c.model, "transformer.wte.weight", {4, 2}, DType::F32);
  });
  EXPECT_NE(msg.find("model.safetensors: transformer.wte.weight has shape [3, 2] but the model "
                     "expects [4, 2]; the checkpoint was written for a different model config"),
            std::string::npos)
      << msg;
  const std::string missing = message_of([&] {
    check_tensor_matches(c.model, "transformer.h.0.ln_1.weight", {2}, DType::F32);
  });
  EXPECT_NE(missing.find("has no tensor transformer.h.0.ln_1.weight"), std::string::npos) << missing;
  const std::string dt = message_of([&] {
    check_tensor_matches(c.model, "transformer.wte.weight", {3, 2}, DType::BF16);
  });
  EXPECT_NE(dt.find("dtype F32"), std::string::npos) << dt;
}

}  // namespace
}  // namespace braid
