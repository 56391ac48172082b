// CheckpointTensors: sharded checkpoints written by several "ranks" read back as whole tensors:
// tensor-parallel parts with fused blocks and vocabulary padding, ZeRO flat pieces, and the
// errors for a missing part, a gap and a contradicting record.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "launch/io/checkpoint.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

Tensor iota(const Shape& s, float base) {
  Tensor t = Tensor::zeros(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = base + static_cast<float>(i);
  return t;
}

class CheckpointTensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = fs::temp_directory_path() / ("braid_ckt_" + std::to_string(::getpid()));
    fs::remove_all(run_);
  }
  void TearDown() override { fs::remove_all(run_); }
  // Writes the files as two writers would (each its own write_files), commits, loads.
  LoadedCheckpoint save_load(const std::vector<std::vector<CheckpointFile>>& writers) {
    CheckpointManager m(run_.string(), 2);
    m.begin_save(1);
    std::vector<nlohmann::json> recs;
    for (const auto& w : writers)
      recs.push_back(CheckpointManager::write_files(m.staging_dir(1), 1, w));
    return CheckpointManager::load(m.commit_save(1, recs, {}));
  }
  fs::path run_;
};

// A fused (3C, C) c_attn-like weight split in 2 parts by block, and a (V=5, 2) table padded to
// 6 rows and split by rows: each part written by another writer; read back whole and unpadded.
TEST_F(CheckpointTensorsTest, TensorParallelPartsWithBlocksAndPadding) {
  const int64_t C = 2;
  Tensor fused = iota({3 * C, C}, 0.0f);
  Tensor table = iota({5, 2}, 100.0f);
  Tensor padded = Tensor::zeros({6, 2});
  for (int64_t i = 0; i < table.numel(); ++i) padded.f32()[i] = table.f32()[i];
  Parameter pf("attn.weight", fused), pt("wte.weight", padded);
  pf.shard = ShardSpec{0, 2, {C, C, C}};
  pt.shard = ShardSpec{0, 2, {}};
  pt.shard.logical = 5;
  std::vector<std::vector<CheckpointFile>> writers;
  for (int part = 0; part < 2; ++part) {
    CheckpointFile f{fmt::format("model-tp{}-pp0.safetensors", part), {}, {}};
    f.tensors = {{pf.name, extract_shard(fused, pf.shard, part)},
                 {pt.name, extract_shard(padded, pt.shard, part)}};
    f.shards[pf.name] = shard_record(pf, part);
    f.shards[pt.name] = shard_record(pt, part);
    if (part == 0) f.tensors.push_back({"ln.weight", iota({2}, 7.0f)});  // replicated
    writers.push_back(
        {f, CheckpointFile{fmt::format("optimizer-tp{}-pp0.safetensors", part), {}, {}}});
  }
  LoadedCheckpoint c = save_load(writers);
  EXPECT_EQ(c.model.shape("wte.weight"), (Shape{5, 2}));
  for (const auto& [name, want] : std::vector<std::pair<std::string, Tensor>>{
           {"attn.weight", fused}, {"wte.weight", table}, {"ln.weight", iota({2}, 7.0f)}}) {
    const Tensor got = c.model.get(name);
    ASSERT_EQ(got.shape(), want.shape()) << name;
    for (int64_t i = 0; i < want.numel(); ++i)
      EXPECT_EQ(got.f32()[i], want.f32()[i]) << name << " " << i;
  }
  // Each rank of another layout takes its part of the whole: tp = 3 pads to 6 and cuts again.
  Parameter p3("wte.weight", Tensor::zeros({2, 2}));
  p3.global_shape = {6, 2};
  p3.shard = ShardSpec{0, 3, {}};
  p3.shard.logical = 5;
  const Tensor part2 = local_part_of(c.model.get("wte.weight"), p3, 2);  // rows 4, 5 (padding)
  EXPECT_EQ(part2.f32()[0], table.f32()[8]);
  EXPECT_EQ(part2.f32()[2], 0.0f);
}

// ZeRO: a (2, 3) moment as pieces [0, 4) and [4, 6) from two ranks; a missing piece is refused.
TEST_F(CheckpointTensorsTest, ZeroFlatPiecesAndTheirErrors) {
  Tensor m = iota({2, 3}, 1.0f);
  auto piece = [&](int rank, int64_t b, int64_t e) {
    CheckpointFile f{fmt::format("optimizer-dp{}.safetensors", rank), {}, {}};
    f.tensors = {{"w.exp_avg", m.view({6}).slice0(b, e).clone()}};
    f.shards["w.exp_avg"] = {{"flat_begin", b}, {"global_shape", m.shape()}};
    return f;
  };
  CheckpointFile model{"model.safetensors", {{"w", iota({2, 3}, 0.0f)}}, {}};
  LoadedCheckpoint c = save_load({{model, piece(0, 0, 4)}, {piece(1, 4, 6)}});
  const Tensor got = c.optimizer.get("w.exp_avg");
  ASSERT_EQ(got.shape(), m.shape());
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(got.f32()[i], m.f32()[i]);
  EXPECT_EQ(c.model.get("w").f32()[5], 5.0f);

  fs::remove_all(run_);
  try {
    save_load({{model, piece(0, 0, 4)}});
    FAIL() << "a missing piece was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cover 4 of its 6 elements"), std::string::npos)
        << e.what();
  }
  fs::remove_all(run_);
  try {
    save_load({{model, piece(0, 0, 3)}, {piece(1, 4, 6)}});
    FAIL() << "a gap was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("gap or overlap at element 3"), std::string::npos)
        << e.what();
  }
}

// ZeRO under tensor parallelism: a (3, 2) table padded to (4, 2) and split in 2 parts by rows,
// each part's moment as flat pieces [0, 3) and [3, 4) from two DP ranks; read back whole and
// unpadded; a missing piece of one part is refused naming the part.
TEST_F(CheckpointTensorsTest, ZeroPiecesOfTensorParallelParts) {
  Tensor table = iota({3, 2}, 10.0f), padded = Tensor::zeros({4, 2});
  for (int64_t i = 0; i < table.numel(); ++i) padded.f32()[i] = table.f32()[i];
  Parameter p("wte.weight", padded);
  p.shard = ShardSpec{0, 2, {}};
  p.shard.logical = 3;
  auto piece = [&](int tp, int dp, int64_t b, int64_t e) {
    CheckpointFile f{fmt::format("optimizer-tp{}-pp0-dp{}.safetensors", tp, dp), {}, {}};
    const Tensor part = extract_shard(padded, p.shard, tp);
    f.tensors = {{"wte.weight.exp_avg", part.view({4}).slice0(b, e).clone()}};
    f.shards["wte.weight.exp_avg"] = {
        {"flat_begin", b}, {"global_shape", part.shape()}, {"tp", shard_record(p, tp)}};
    return f;
  };
  auto model = [&](int tp) {
    CheckpointFile f{fmt::format("model-tp{}-pp0.safetensors", tp), {}, {}};
    f.tensors = {{p.name, extract_shard(padded, p.shard, tp)}};
    f.shards[p.name] = shard_record(p, tp);
    return f;
  };
  LoadedCheckpoint c = save_load({{model(0), piece(0, 0, 0, 3)},
                                  {piece(0, 1, 3, 4)},
                                  {model(1), piece(1, 0, 0, 3)},
                                  {piece(1, 1, 3, 4)}});
  EXPECT_EQ(c.optimizer.shape("wte.weight.exp_avg"), (Shape{3, 2}));
  const Tensor got = c.optimizer.get("wte.weight.exp_avg");
  ASSERT_EQ(got.shape(), table.shape());
  for (int64_t i = 0; i < table.numel(); ++i) EXPECT_EQ(got.f32()[i], table.f32()[i]) << i;

  fs::remove_all(run_);
  try {
    save_load({{model(0), piece(0, 0, 0, 3)}, {piece(0, 1, 3, 4)}, {model(1), piece(1, 0, 0, 3)}});
    FAIL() << "a missing piece was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("(part 1 of 2) cover 3 of its 4 elements"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointTensorsTest, AMissingTensorParallelPartIsRefused) {
  Tensor w = iota({4, 2}, 0.0f);
  Parameter p("w", w);
  p.shard = ShardSpec{0, 2, {}};
  CheckpointFile f{"model-tp0-pp0.safetensors", {{"w", extract_shard(w, p.shard, 0)}}, {}};
  f.shards["w"] = shard_record(p, 0);
  try {
    save_load({{f, CheckpointFile{"optimizer-tp0-pp0.safetensors", {}, {}}}});
    FAIL() << "half a tensor was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("0 copies of part 1 of 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braid
