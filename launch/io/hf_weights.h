// The weight files of a Hugging Face model directory: one model.safetensors, or
// model.safetensors.index.json naming shards model-0000N-of-0000M.safetensors. Read tensor by
// tensor and written shard by shard, so neither side holds more than a tensor (reading) or a
// shard (writing) beyond the model itself.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"
#include "core/tensor.h"

namespace braid {

constexpr const char* kHfWeightsFile = "model.safetensors";
constexpr const char* kHfIndexFile = "model.safetensors.index.json";

// The weight files of one HF directory, their headers read and checked (no tensor data yet).
class HfWeights {
 public:
  // model.safetensors when it exists (as transformers prefers), else the index and every
  // shard it names. UserError naming the file when there is neither, when the index is
  // malformed or names a shard that does not exist, or a tensor its shard does not hold.
  static HfWeights open(const std::filesystem::path& dir);

  // Every tensor (name, shape) of every file, in file order.
  const std::vector<std::pair<std::string, Shape>>& tensors() const { return tensors_; }
  // The files, in the order they are read.
  size_t num_files() const { return files_.size(); }
  const std::string& file_path(size_t i) const { return files_[i].path; }
  // The tensors that file i holds (by the index: those it maps there).
  const std::vector<std::string>& file_tensors(size_t i) const { return files_[i].names; }
  // The file holding `name` (UserError when none does).
  size_t file_of(const std::string& name) const;
  // File i, mapped; close_file(i) unmaps it again.
  const SafetensorsFile& file(size_t i);
  void close_file(size_t i);
  // Where the tensor list came from (the index or the single file), for messages.
  const std::string& source() const { return source_; }

 private:
  struct File {
    std::string path;
    std::vector<std::string> names;
    std::unique_ptr<SafetensorsFile> open;
  };
  std::vector<File> files_;
  std::map<std::string, size_t> file_of_;
  std::vector<std::pair<std::string, Shape>> tensors_;
  std::string source_;
};

// One tensor to write: its name, shape and dtype, and how to make it (called once, right
// before its shard is written, so converted copies live one shard at a time).
struct HfTensorOut {
  std::string name;
  Shape shape;
  DType dtype;
  std::function<Tensor()> make;
};

// Writes `tensors` into dir: model.safetensors when they fit in max_shard_bytes, else
// model-0000N-of-0000M.safetensors of at most max_shard_bytes each (a larger tensor gets a
// file of its own), in order, with model.safetensors.index.json (metadata total_size and
// total_parameters, weight_map). Returns the file names written.
std::vector<std::string> save_hf_weights(const std::filesystem::path& dir,
                                         const std::vector<HfTensorOut>& tensors,
                                         uint64_t max_shard_bytes);

// "5GB" (10^9), "500MB", "64KB", "2GiB" (2^30), "512MiB", "16KiB" or a plain byte count, as
// transformers' max_shard_size reads them; UserError naming `what` otherwise.
uint64_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace braid
