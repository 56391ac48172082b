// The precompiled header of braid's C++ targets (braid_precompile in CMakeLists.txt): the
// standard library and fmt headers that most translation units include. Only third-party and
// standard headers: a change to a braid header rebuilds the files that include it, not every
// file. Each source still includes what it uses (BRAID_PCH=OFF builds without). Not
// nlohmann/json.hpp: with GCC, every file would then pay for instantiating its inline
// templates, and the files without JSON (most of core/) compile slower than with no PCH.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
