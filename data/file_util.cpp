// Whole-file reads and temp-file-and-rename writes.
#include "data/file_util.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/input_guard.h"

namespace braid {

std::string read_file_bytes(const std::string& path, std::string_view what) {
  return read_regular_file(path, what);
}

nlohmann::json read_json_file(const std::string& path, std::string_view what) {
  const std::string text = read_regular_file(path, what);
  check_json_depth(text, std::string(what), path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    user_error("{} '{}' is not valid JSON: {}", what, path, e.what());
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  // pid in the name: two processes writing the same target never share a temp file.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) user_error("cannot create '{}': {}", tmp, std::strerror(errno));
    const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() &&
                    std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
    const int err = errno;
    const bool closed = std::fclose(f) == 0;
    if (!ok || !closed) {
      std::remove(tmp.c_str());
      user_error("cannot write '{}': {}", tmp, std::strerror(err));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    user_error("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  }
}

}  // namespace braid
