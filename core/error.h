// Error types and the BRAID_CHECK macro used everywhere in braid.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace braid {

// An internal invariant or a library call failed. Carries file:line.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Something the user gave us is wrong (config, CLI, files). The CLI prints only the message
// and exits non-zero; no stack of noise.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] void throw_error(const char* file, int line, const std::string& msg);
}  // namespace detail

// Throw a UserError with a formatted message.
template <typename... Args>
[[noreturn]] void user_error(fmt::format_string<Args...> f, Args&&... args) {
  throw UserError(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace braid

// BRAID_CHECK(cond, "message {}", value): throws braid::Error with file:line when cond is false.
#define BRAID_CHECK(cond, ...)                                                        \
  do {                                                                                \
    if (!(cond)) [[unlikely]]                                                         \
      ::braid::detail::throw_error(__FILE__, __LINE__,                               \
                                   "check failed: " #cond ": " + fmt::format(__VA_ARGS__)); \
  } while (0)

// User-facing check: throws braid::UserError with the formatted message.
#define BRAID_USER_CHECK(cond, ...)             \
  do {                                          \
    if (!(cond)) [[unlikely]]                   \
      ::braid::user_error(__VA_ARGS__);         \
  } while (0)
