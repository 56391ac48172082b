// Peak memory by category per log window and over the whole run, from the context's
// allocator (core/memory.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/memory.h"

namespace braid {

class MemoryWindows {
 public:
  explicit MemoryWindows(Allocator& a) : alloc_(a) { run_ = a.stats(); }
  // The peaks since the last call (or construction); starts the next window.
  MemoryStats end_window();
  // Peaks over the whole run (the maximum over the windows).
  MemoryStats run_peaks() const;

 private:
  Allocator& alloc_;
  MemoryStats run_;
};

// {"weights": MiB, ...}: peak bytes per category, non-zero ones only.
nlohmann::json peaks_mib_json(const MemoryStats& s);

}  // namespace braid
