// safetensors writer and the validating mmap reader.
#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/atomic_file.h"
#include "core/input_guard.h"

namespace braid {

namespace {

using json = nlohmann::json;

// Element sizes of every dtype the format defines with whole-byte elements; braid can read
// only four of them, but a file holding others is still valid and its other tensors usable.
std::optional<size_t> safetensors_elem_size(const std::string& d) {
  static const std::pair<const char*, size_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8}};
  for (const auto& [name, size] : kSizes)
    if (d == name) return size;
  return std::nullopt;
}

template <typename... Args>
[[noreturn]] void file_error(const std::string& path, fmt::format_string<Args...> f,
                             Args&&... args) {
  user_error("{}: {}", path, fmt::format(f, std::forward<Args>(args)...));
}

// Byte offset or dimension: a non-negative JSON integer.
bool as_u64(const json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  *out = v.get<uint64_t>();
  return true;
}

SafetensorsInfo parse_entry(const std::string& path, const std::string& name, const json& e) {
  if (!e.is_object())
    file_error(path, "header entry '{}' is {}; expected an object", name, e.dump());
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!e.contains(key))
      file_error(path, "header entry '{}' has no \"{}\" (expected dtype, shape, data_offsets)",
                 name, key);
  SafetensorsInfo info;
  const json& d = e["dtype"];
  if (!d.is_string())
    file_error(path, "tensor '{}': dtype is {}; expected a string", name, d.dump());
  info.dtype_name = d.get<std::string>();
  const std::optional<size_t> elem = safetensors_elem_size(info.dtype_name);
  if (!elem)
    file_error(path,
               "tensor '{}': unknown dtype \"{}\" (known: F32, BF16, F16, I32, F64, I64, "
               "I16, I8, U8, U16, U32, U64, BOOL, F8_E4M3, F8_E5M2, F8_E8M0)",
               name, info.dtype_name);
  DType t;
  if (parse_dtype(info.dtype_name, &t) && dtype_safetensors(t) == info.dtype_name) info.dtype = t;

  const json& s = e["shape"];
  if (!s.is_array())
    file_error(path, "tensor '{}': shape is {}; expected an array of integers", name, s.dump());
  uint64_t numel = 1;
  for (const json& dim : s) {
    uint64_t v;
    if (!as_u64(dim, &v) || v > static_cast<uint64_t>(INT64_MAX))
      file_error(path, "tensor '{}': shape {} has a dimension that is not a non-negative integer",
                 name, s.dump());
    if (__builtin_mul_overflow(numel, v, &numel))
      file_error(path, "tensor '{}': shape {} is too large", name, s.dump());
    info.shape.push_back(static_cast<int64_t>(v));
  }
  const json& o = e["data_offsets"];
  if (!o.is_array() || o.size() != 2 || !as_u64(o[0], &info.begin) || !as_u64(o[1], &info.end))
    file_error(path, "tensor '{}': data_offsets is {}; expected [begin, end] non-negative integers",
               name, o.dump());
  if (info.end < info.begin)
    file_error(path, "tensor '{}': data_offsets [{}, {}] end before begin", name, info.begin,
               info.end);
  uint64_t bytes;
  if (__builtin_mul_overflow(numel, *elem, &bytes) || bytes != info.end - info.begin)
    file_error(path, "tensor '{}': data_offsets [{}, {}] span {} bytes but {} {} takes {} bytes",
               name, info.begin, info.end, info.end - info.begin, info.dtype_name, s.dump(),
               numel * *elem);
  return info;
}

}  // namespace

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata, bool widen_16bit) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  auto stored = [widen_16bit](const Tensor& t) {
    return widen_16bit && (t.dtype() == DType::BF16 || t.dtype() == DType::F16) ? DType::F32
                                                                                : t.dtype();
  };
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    BRAID_CHECK(name != "__metadata__", "{}: a tensor cannot be named __metadata__", path);
    BRAID_CHECK(!header.contains(name), "{}: tensor name '{}' given twice", path, name);
    BRAID_CHECK(t.defined(), "{}: tensor '{}' is undefined", path, name);
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype_size(stored(t));
    header[name] = {{"dtype", dtype_safetensors(stored(t))},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // The data buffer starts at 8 + N; padding N to a multiple of 8 aligns it.
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t n = text.size();
  unsigned char len_le[8];
  for (int i = 0; i < 8; ++i) len_le[i] = static_cast<unsigned char>(n >> (8 * i));

  AtomicFileWriter w(path);
  w.write(len_le, 8);
  w.write(text.data(), text.size());
  // Device tensors (a GPU run's checkpoint) are staged through host memory one at a time, and
  // widened there when asked.
  for (const auto& [name, t] : tensors) {
    Tensor h = t.to_host();
    if (stored(t) != t.dtype()) h = h.to(DType::F32, MemCategory::Other);
    w.write(h.raw(), h.nbytes());
  }
  w.commit();
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  const int fd = open_regular_file(path, "safetensors file");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    file_error(path, "cannot stat: {}", std::strerror(err));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    file_error(path,
               "file is {} bytes, shorter than the 8-byte safetensors header length; "
               "not a safetensors file or truncated",
               size);
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (m == MAP_FAILED) file_error(path, "cannot mmap: {}", std::strerror(map_err));
  f.map_ = m;
  f.map_bytes_ = size;

  const auto* bytes = static_cast<const unsigned char*>(m);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (n > size - 8)
    file_error(path,
               "header length {} is larger than the {} bytes after it; truncated or not "
               "a safetensors file",
               n, size - 8);
  f.data_offset_ = 8 + n;
  const uint64_t buffer_bytes = size - f.data_offset_;

  // nlohmann keeps the last of duplicate keys silently; the callback sees every key.
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::key && depth == 1 && duplicate.empty()) {
      std::string k = parsed.get<std::string>();
      if (!seen.insert(k).second) duplicate = std::move(k);
    }
    return true;
  };
  check_json_depth(std::string_view(reinterpret_cast<const char*>(bytes + 8), n),
                   "safetensors header of", path);
  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + n, on_event);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    file_error(path, "header is not valid JSON: {}", e.what());
  }
  if (!header.is_object())
    file_error(path, "header is {}; expected a JSON object", header.type_name());
  if (!duplicate.empty()) file_error(path, "header lists tensor '{}' more than once", duplicate);

  std::vector<std::pair<std::string, const SafetensorsInfo*>> by_offset;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (!e.is_object())
        file_error(path, "__metadata__ is {}; expected an object of strings", e.dump());
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string())
          file_error(path, "__metadata__ key '{}' is {}; expected a string", k, v.dump());
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    auto [it, _] = f.entries_.emplace(name, parse_entry(path, name, e));
    by_offset.emplace_back(name, &it->second);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->begin, a.second->end, a.first) <
           std::tie(b.second->begin, b.second->end, b.first);
  });
  uint64_t cursor = 0;
  std::string prev = "the start of the data buffer";
  for (const auto& [name, info] : by_offset) {
    if (info->begin < cursor)
      file_error(path, "tensor '{}' (bytes [{}, {}]) overlaps {}", name, info->begin, info->end,
                 prev);
    if (info->begin > cursor)
      file_error(path, "gap of {} bytes between {} and tensor '{}' (the format allows no holes)",
                 info->begin - cursor, prev, name);
    if (info->end > buffer_bytes)
      file_error(path,
                 "tensor '{}' ends at byte {} but the data buffer has only {} bytes "
                 "(truncated file?)",
                 name, info->end, buffer_bytes);
    cursor = info->end;
    prev = "tensor '" + name + "'";
    f.names_.push_back(name);
  }
  if (cursor != buffer_bytes)
    file_error(path,
               "data buffer has {} bytes but the tensors cover only {} (the format allows "
               "no trailing bytes)",
               buffer_bytes, cursor);
  return f;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    data_offset_ = o.data_offset_;
    entries_ = std::move(o.entries_);
    names_ = std::move(o.names_);
    metadata_ = std::move(o.metadata_);
  }
  return *this;
}

const SafetensorsInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    file_error(path_, "has no tensor named '{}' ({} tensors in the file)", name, entries_.size());
  return it->second;
}

DType SafetensorsFile::dtype(const std::string& name) const {
  const SafetensorsInfo& i = info(name);
  if (!i.dtype)
    file_error(path_,
               "tensor '{}' has dtype {}, which braid cannot load (supported: F32, BF16, "
               "F16, I32); convert the file first",
               name, i.dtype_name);
  return *i.dtype;
}

const void* SafetensorsFile::raw(const std::string& name) const {
  return static_cast<const char*>(map_) + data_offset_ + info(name).begin;
}

void SafetensorsFile::drop_pages(const std::string& name) const {
  const SafetensorsInfo& i = info(name);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t base = reinterpret_cast<uintptr_t>(map_);
  const uintptr_t begin = (base + data_offset_ + i.begin) / page * page;
  const uintptr_t end =
      std::min(base + map_bytes_, (base + data_offset_ + i.end + page - 1) / page * page);
  // Advice only: a failure leaves the pages resident, which is harmless.
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const DType t = dtype(name);
  const SafetensorsInfo& i = info(name);
  Tensor out = Tensor::empty(i.shape, t);  // host, outside any context: the caller copies it
  if (out.nbytes()) std::memcpy(out.raw(), raw(name), out.nbytes());
  return out;
}

}  // namespace braid
