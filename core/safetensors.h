// Reading and writing safetensors files (the Hugging Face tensor container).
//
// Layout: u64 little-endian header length N, N bytes of JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data buffer; offsets are relative to the buffer start and tensors tile it
// without holes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace braid {

// Writes `tensors` in the given order (data and header entries both; no sorting) to `path`
// atomically: `path + ".tmp"`, fsync, rename. The header is padded with spaces so the data
// buffer starts at an 8-byte aligned file offset. Tensors may be on any device (device ones are
// copied to the host one at a time); names must be unique and must not be "__metadata__".
// widen_16bit: bf16 and f16 tensors are written as f32 (exact).
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {},
                      bool widen_16bit = false);

// One header entry.
struct SafetensorsInfo {
  std::string dtype_name;      // as in the file: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;  // set when braid has the dtype (F32, BF16, F16, I32)
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte range inside the data buffer
};

// A validated, memory-mapped safetensors file. open() checks the whole header (sizes, offsets,
// dtypes, holes, overlaps, duplicate names) and throws braid::UserError naming the file and
// the problem; afterwards reads cannot fail except for dtypes braid does not have.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& o) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& o) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Tensor names in data-buffer order (the order they were written in).
  const std::vector<std::string>& names() const { return names_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }

  // Header lookups (no copy). Unknown names throw braid::UserError naming the file.
  const SafetensorsInfo& info(const std::string& name) const;
  const Shape& shape(const std::string& name) const { return info(name).shape; }
  // Throws braid::UserError when the file's dtype is not one braid supports.
  DType dtype(const std::string& name) const;

  // A new CPU tensor (MemCategory::Weights) holding a copy of the named tensor's bytes.
  Tensor get(const std::string& name) const;
  // Pointer to the tensor's bytes inside the mapping (valid while this object lives).
  const void* raw(const std::string& name) const;
  // Hands the tensor's pages back to the kernel (they are read from the file again if used),
  // so a reader that streams a large file keeps only the tensor it is copying resident.
  void drop_pages(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  void unmap();

  std::string path_;
  void* map_ = nullptr;  // whole file
  size_t map_bytes_ = 0;
  size_t data_offset_ = 0;  // file offset of the data buffer
  std::map<std::string, SafetensorsInfo> entries_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace braid
