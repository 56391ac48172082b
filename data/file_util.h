// Small file helpers for the data layer: whole-file reads and atomic writes.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace braid {

// Reads a whole file; a missing, unreadable or non-regular file (directory, named pipe,
// device) is a braid::UserError naming it.
std::string read_file_bytes(const std::string& path, std::string_view what);

// Reads and parses a JSON file, its nesting bounded first (core/input_guard.h). Every failure
// is a braid::UserError naming `what` and the path.
nlohmann::json read_json_file(const std::string& path, std::string_view what);

// Writes bytes to path via a temp file in the same folder and a rename, so readers never
// see a half-written file. Failures are braid::UserError naming the path.
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace braid
