// --test-fault values -> FaultPoints, and the fail_at_step fault itself.
#include "launch/train/fault_points.h"

#include <charconv>
#include <csignal>
#include <thread>

#include "core/error.h"

namespace braid {

namespace {

constexpr const char* kForms =
    "fail_at_step=RANK:STEP[:throw|kill|hang|kill_at_save] or overflow_at_step=STEP[:DP_RANK]";

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (size_t i; (i = s.find(sep, at)) != std::string::npos; at = i + 1)
    parts.push_back(s.substr(at, i - at));
  parts.push_back(s.substr(at));
  return parts;
}

// A whole decimal number >= lo, or false.
bool whole_number(const std::string& s, int64_t lo, int64_t* out) {
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, *out);
  return !s.empty() && ec == std::errc() && p == end && *out >= lo;
}

}  // namespace

FaultPoints parse_test_faults(const std::vector<std::string>& specs) {
  FaultPoints f;
  f.specs = specs;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    const std::string name = spec.substr(0, eq);
    const std::vector<std::string> v =
        split(eq == std::string::npos ? std::string() : spec.substr(eq + 1), ':');
    int64_t a = 0, b = 0;
    if (name == "fail_at_step") {
      const std::string mode = v.size() == 3 ? v[2] : "throw";
      BRAID_USER_CHECK(
          (v.size() == 2 || v.size() == 3) && whole_number(v[0], 0, &a) &&
              whole_number(v[1], 1, &b) &&
              (mode == "throw" || mode == "kill" || mode == "hang" || mode == "kill_at_save"),
          "--test-fault {}: expected {}", spec, kForms);
      f.fail_rank = static_cast<int>(a);
      f.fail_step = b;
      f.fail_mode = mode;
    } else if (name == "overflow_at_step") {
      BRAID_USER_CHECK((v.size() == 1 || v.size() == 2) && whole_number(v[0], 1, &a) &&
                           (v.size() == 1 || whole_number(v[1], 0, &b)),
                       "--test-fault {}: expected {}", spec, kForms);
      f.overflow_step = a;
      f.overflow_dp_rank = static_cast<int>(b);
    } else {
      user_error("--test-fault {}: unknown fault '{}'; expected {}", spec, name, kForms);
    }
  }
  return f;
}

void maybe_fail(const FaultPoints& f, int rank, int64_t step, bool saving) {
  if (f.fail_rank != rank || f.fail_step != step) return;
  if ((f.fail_mode == "kill_at_save") != saving) return;
  if (saving || f.fail_mode == "kill") std::raise(SIGKILL);
  if (f.fail_mode == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  throw Error(fmt::format("injected failure (--test-fault fail_at_step) at step {}", step));
}

}  // namespace braid
