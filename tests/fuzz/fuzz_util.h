// Shared by the libFuzzer targets: the input as a file (the parsers read paths), and the rule
// that a braid::UserError is the correct answer to bad bytes while anything else is a bug.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace braid::fuzz {

// A per-process scratch file holding the input; overwritten on every call.
inline std::string write_input(const uint8_t* data, size_t size, const char* name) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/braid-fuzz-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace braid::fuzz
