// Test helpers for the data layer: a self-deleting temp folder and small file utilities.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace braid::testing {

// A fresh folder under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("braid_" + tag + "_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The message of the braid::UserError that f throws (a test failure, and "", when none).
template <class F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UserError thrown";
  return "";
}

inline void write_text(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Deterministic English-like text with repeated words, digits, punctuation and UTF-8.
inline std::string sample_text(int words, uint32_t seed = 7) {
  static const char* vocab[] = {"the", "model", "learns", "tokens", "from", "text", "and",
                                "data", "über", "naïve", "braid", "runs", "fast", "on",
                                "CPUs", "GPUs", "with", "merges", "pairs", "of", "bytes"};
  std::mt19937 rng(seed);
  std::string s;
  for (int i = 0; i < words; ++i) {
    uint32_t r = rng();
    if (i) s += (r % 13 == 0) ? "\n" : (r % 17 == 0 ? "  " : " ");
    if (r % 11 == 0) s += std::to_string(r % 2025);
    else s += vocab[(r >> 8) % (sizeof(vocab) / sizeof(vocab[0]))];
    if (r % 7 == 0) s += (r % 2) ? "," : ".";
  }
  return s;
}

}  // namespace braid::testing
