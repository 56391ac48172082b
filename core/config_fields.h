// The one protocol every config struct follows, so launch/ can map YAML onto it.
//
// A config struct lists each field once, with its key and a one-line doc:
//
//   template <class V> void visit(V& v) {
//     v("lr", lr, "Peak learning rate reached after warmup.");
//   }
//   void validate() const;  // throws ConfigError(key, what would be right)
//
// Field types: bool, int, int64_t, uint64_t, float, double, std::string,
// std::vector<std::string>.
// launch/config reads YAML, applies --set overrides, writes the resolved config and checks
// docs/config.md from that list; nothing here knows about YAML.
#pragma once

#include <string>

#include "core/error.h"

namespace braid {

// A config value is invalid. `key` is the field's key inside its section ("lr"); the loader
// adds the section, file and line.
class ConfigError : public UserError {
 public:
  ConfigError(std::string key, const std::string& message)
      : UserError(message), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

template <typename... Args>
[[noreturn]] void config_error(std::string key, fmt::format_string<Args...> f, Args&&... args) {
  throw ConfigError(std::move(key), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace braid
