// HF weight files: the single file or the sharded index, read by tensor, written by shard.
#include "launch/io/hf_weights.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "data/file_util.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

// A shard name from an index must be a file beside it, not a path that leaves the directory.
bool plain_file_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos &&
         n.find('\\') == std::string::npos;
}

}  // namespace

HfWeights HfWeights::open(const fs::path& dir) {
  HfWeights w;
  std::error_code ec;
  const fs::path single = dir / kHfWeightsFile, index = dir / kHfIndexFile;
  if (fs::exists(single, ec)) {
    w.source_ = single.string();
    File f{single.string(),
           {},
           std::make_unique<SafetensorsFile>(SafetensorsFile::open(single.string()))};
    f.names = f.open->names();
    for (const std::string& n : f.names) w.tensors_.emplace_back(n, f.open->shape(n));
    w.files_.push_back(std::move(f));
  } else if (fs::exists(index, ec)) {
    w.source_ = index.string();
    const nlohmann::json j = read_json_file(index.string(), "safetensors index");
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      user_error(
          "{}: no \"weight_map\" object; expected {{\"metadata\": ..., \"weight_map\": "
          "{{tensor: file}}}}",
          w.source_);
    if (j["weight_map"].empty()) user_error("{}: weight_map names no tensor", w.source_);
    std::map<std::string, size_t> by_file;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string() || !plain_file_name(file.get<std::string>()))
        user_error(
            "{}: weight_map maps tensor '{}' to {}; expected the name of a file beside the "
            "index",
            w.source_, name, file.dump());
      const std::string fname = file.get<std::string>();
      auto [it, added] = by_file.emplace(fname, w.files_.size());
      if (added) {
        const fs::path p = dir / fname;
        if (!fs::is_regular_file(p, ec))
          user_error(
              "{}: tensor '{}' is in shard {}, which does not exist in {}; the download "
              "is incomplete",
              w.source_, name, fname, dir.string());
        w.files_.push_back(File{p.string(), {}, nullptr});
      }
      w.files_[it->second].names.push_back(name);
    }
    // Every shard's header is read now, so a tensor missing from its shard is found before any
    // weight is loaded; the shard is unmapped again until file(i).
    for (File& f : w.files_) {
      const SafetensorsFile s = SafetensorsFile::open(f.path);
      std::vector<std::string> ordered;  // the shard's own order, for sequential reads
      for (const std::string& n : s.names())
        if (std::find(f.names.begin(), f.names.end(), n) != f.names.end()) ordered.push_back(n);
      for (const std::string& n : f.names)
        if (!s.contains(n))
          user_error("{}: maps tensor '{}' to {}, which has no tensor of that name", w.source_, n,
                     f.path);
      f.names = std::move(ordered);
      for (const std::string& n : f.names) w.tensors_.emplace_back(n, s.shape(n));
    }
  } else {
    std::string hint;
    if (fs::exists(dir / "pytorch_model.bin", ec) ||
        fs::exists(dir / "pytorch_model.bin.index.json", ec))
      hint = " (it has PyTorch .bin weights: convert them to safetensors first)";
    user_error("{} holds neither {} nor {}{}", dir.string(), kHfWeightsFile, kHfIndexFile, hint);
  }
  for (size_t i = 0; i < w.files_.size(); ++i)
    for (const std::string& n : w.files_[i].names) w.file_of_.emplace(n, i);
  return w;
}

size_t HfWeights::file_of(const std::string& name) const {
  auto it = file_of_.find(name);
  if (it == file_of_.end()) user_error("{}: has no tensor named '{}'", source_, name);
  return it->second;
}

const SafetensorsFile& HfWeights::file(size_t i) {
  BRAID_CHECK(i < files_.size(), "HfWeights::file({}) of {}", i, files_.size());
  if (!files_[i].open)
    files_[i].open = std::make_unique<SafetensorsFile>(SafetensorsFile::open(files_[i].path));
  return *files_[i].open;
}

void HfWeights::close_file(size_t i) {
  BRAID_CHECK(i < files_.size(), "HfWeights::close_file({}) of {}", i, files_.size());
  files_[i].open.reset();
}

std::vector<std::string> save_hf_weights(const fs::path& dir,
                                         const std::vector<HfTensorOut>& tensors,
                                         uint64_t max_shard_bytes) {
  BRAID_CHECK(max_shard_bytes > 0, "save_hf_weights: max_shard_bytes is 0");
  // Shards as transformers cuts them: in order, a new one when the next tensor would overflow.
  std::vector<std::vector<size_t>> shards;
  uint64_t current = 0, total_bytes = 0, total_params = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes =
        static_cast<uint64_t>(shape_numel(tensors[i].shape)) * dtype_size(tensors[i].dtype);
    if (shards.empty() || (current > 0 && current + bytes > max_shard_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += bytes;
    total_bytes += bytes;
    total_params += static_cast<uint64_t>(shape_numel(tensors[i].shape));
  }
  auto write_shard = [&](const std::vector<size_t>& idx, const std::string& file) {
    std::vector<std::pair<std::string, Tensor>> made;
    for (size_t i : idx) {
      Tensor t = tensors[i].make();
      BRAID_CHECK(t.shape() == tensors[i].shape && t.dtype() == tensors[i].dtype,
                  "{}: made {}, announced {} {}", tensors[i].name, t.str(),
                  shape_str(tensors[i].shape), dtype_name(tensors[i].dtype));
      made.emplace_back(tensors[i].name, std::move(t));
    }
    save_safetensors((dir / file).string(), made, {{"format", "pt"}});
  };
  if (shards.size() <= 1) {
    write_shard(shards.empty() ? std::vector<size_t>{} : shards[0], kHfWeightsFile);
    return {kHfWeightsFile};
  }
  std::vector<std::string> files;
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    write_shard(shards[s], file);
    for (size_t i : shards[s]) map[tensors[i].name] = file;
    files.push_back(file);
  }
  nlohmann::ordered_json index = {
      {"metadata", {{"total_size", total_bytes}, {"total_parameters", total_params}}},
      {"weight_map", map}};
  write_file_atomic((dir / kHfIndexFile).string(), index.dump(2) + "\n");
  files.push_back(kHfIndexFile);
  return files;
}

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<const char*, uint64_t> kUnits[] = {{"", 1},
                                                            {"B", 1},
                                                            {"KB", 1000},
                                                            {"MB", 1000000},
                                                            {"GB", 1000000000},
                                                            {"TB", 1000000000000},
                                                            {"KIB", 1ull << 10},
                                                            {"MIB", 1ull << 20},
                                                            {"GIB", 1ull << 30},
                                                            {"TIB", 1ull << 40}};
  uint64_t mult = 0;
  for (const auto& [u, m] : kUnits)
    if (unit == u) mult = m;
  uint64_t n = 0;
  const bool number_ok =
      digits > 0 && digits <= 15 && (n = std::stoull(text.substr(0, digits))) > 0;
  if (!number_ok || mult == 0 || n > UINT64_MAX / mult)
    user_error("{} is '{}'; expected a positive size such as 5GB, 500MB, 2GiB or a byte count",
               what, text);
  return n * mult;
}

}  // namespace braid
