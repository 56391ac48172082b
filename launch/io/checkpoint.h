// CheckpointManager: crash-safe checkpoint directories under run_dir/checkpoints/.
//
// Layout:  checkpoints/step-00000100/{model.safetensors, optimizer.safetensors, manifest.json}
//          checkpoints/latest   (text: the name of the newest complete directory)
// A tensor- or pipeline-parallel run writes one model and one optimizer file per (tp rank,
// stage) instead, and the manifest's "shards" says how they fit (launch/io/checkpoint_tensors.h).
// A checkpoint is complete when its manifest.json parses and every file it lists is present with
// the recorded size: the manifest is written last, inside a .tmp-step-* directory that is
// renamed into place only after everything is on disk, and pruning renames a directory out to
// .tmp-retired-* before deleting anything in it. Manifests record SHA-256 checksums
// ("checksum_algo": "sha256", verifiable with sha256sum); older braid-mix64-v1 ones still load.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"
#include "launch/io/checkpoint_tensors.h"

namespace braid {

inline constexpr int kCheckpointFormatVersion = 1;

struct LoadedCheckpoint {
  std::string path;  // the checkpoint directory
  int64_t step = 0;
  nlohmann::json state;     // what save() was given as `state`
  CheckpointTensors model;  // whole tensors, whatever layout wrote them
  CheckpointTensors optimizer;
};

// The tensors of one checkpoint file: its name in the directory, the tensors, and the
// manifest's shard records for its split tensors (name -> shard_record; empty when none).
struct CheckpointFile {
  std::string name;
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json shards = nlohmann::json::object();
  // bf16/f16 tensors are written as f32 (the model files, whose weights are f32: a 16-bit run's
  // frozen weights come as they are and are widened one at a time on the host, exactly).
  bool widen_16bit = false;
};

class CheckpointManager {
 public:
  // keep_last >= 1: how many complete checkpoints survive a save.
  CheckpointManager(std::string run_dir, int keep_last);

  const std::string& dir() const { return dir_; }  // run_dir/checkpoints

  // Writes checkpoint `step` and points `latest` at it; then deletes the oldest checkpoints
  // beyond keep_last (by step number; never the one just written, never newer ones). If it
  // throws, earlier checkpoints and `latest` are untouched. Returns the new directory's path.
  std::string save(int64_t step, const std::vector<std::pair<std::string, Tensor>>& weights,
                   const std::vector<std::pair<std::string, Tensor>>& optimizer_state,
                   const nlohmann::json& state);

  // The same in three parts, for saves written by several processes (every (tp, pp) shard
  // writes its own files): one process calls begin_save, then every writer write_files into
  // staging_dir(step), then the first process commit_save with every writer's records (after
  // all have finished). Until commit_save the step is invisible; a writer failing part-way
  // leaves earlier checkpoints and `latest` untouched.
  void begin_save(int64_t step);  // removes leftovers, creates the staging directory
  std::string staging_dir(int64_t step) const;
  // Writes each file (refusing non-finite values) and returns {name: {bytes, checksum}} plus,
  // under "shards", each file's shard records.
  static nlohmann::json write_files(const std::string& staging, int64_t step,
                                    const std::vector<CheckpointFile>& files);
  // records: the write_files results of every writer. Writes the manifest, renames the
  // staging directory into place, moves `latest`, prunes. Returns the directory's path.
  std::string commit_save(int64_t step, const std::vector<nlohmann::json>& records,
                          const nlohmann::json& state);

  // Path of the newest complete checkpoint: the one `latest` names, or, when `latest` is
  // missing or names an incomplete directory, the highest-step directory with a manifest.
  std::optional<std::string> latest() const;

  // Complete checkpoint directories, oldest step first.
  std::vector<std::pair<int64_t, std::string>> list() const;

  // Verifies the manifest and every file's size and checksum, then opens the tensor files.
  // Any problem throws braid::UserError naming the file.
  static LoadedCheckpoint load(const std::string& path);

  static std::string dir_name(int64_t step);  // "step-00000100"

 private:
  std::string dir_;
  int keep_last_;
};

// Throws braid::UserError when `file` lacks `name` or holds it with another shape or dtype,
// e.g. "model.safetensors: transformer.h.0.attn.c_attn.weight has shape [..] but the model
// expects [..]; the checkpoint was written for a different model config".
// `file_description` names the file in the message ("model.safetensors" or a full path).
void check_tensor_matches(const SafetensorsFile& file, const std::string& name,
                          const Shape& expected_shape, DType expected_dtype,
                          const std::string& file_description);

}  // namespace braid
