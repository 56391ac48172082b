// Peak-memory windows.
#include "launch/train/memory_report.h"

#include <algorithm>

namespace braid {

namespace {
void take_max(MemoryStats& into, const MemoryStats& s) {
  for (size_t i = 0; i < into.peak_bytes.size(); ++i)
    into.peak_bytes[i] = std::max(into.peak_bytes[i], s.peak_bytes[i]);
  into.peak_total = std::max(into.peak_total, s.peak_total);
}
}  // namespace

MemoryStats MemoryWindows::end_window() {
  const MemoryStats s = alloc_.stats();
  take_max(run_, s);
  alloc_.reset_peaks();
  return s;
}

MemoryStats MemoryWindows::run_peaks() const {
  MemoryStats r = run_;
  take_max(r, alloc_.stats());
  return r;
}

nlohmann::json peaks_mib_json(const MemoryStats& s) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < s.peak_bytes.size(); ++i)
    if (s.peak_bytes[i] > 0)
      j[mem_category_name(static_cast<MemCategory>(i))] =
          static_cast<double>(s.peak_bytes[i]) / 1048576.0;
  return j;
}

}  // namespace braid
