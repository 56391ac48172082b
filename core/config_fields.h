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
// std::vector<std::string>, std::vector<int>, std::optional<int> and std::optional<bool>
// (written `auto` when empty), and config enums (below).
// launch/config reads YAML, applies --set overrides, writes the resolved config and checks
// docs/config.md from that list; nothing here knows about YAML.
//
// A config enum is an enum class with its spellings declared once, next to it, by an
// overload that argument-dependent lookup finds:
//
//   enum class Precision { FP32, BF16, FP16 };
//   constexpr std::array<EnumName<Precision>, 3> config_enum_names(Precision) {
//     return {{{Precision::FP32, "fp32"}, {Precision::BF16, "bf16"}, {Precision::FP16, "fp16"}}};
//   }
//
// Every value has exactly one spelling: the one YAML takes, the resolved config writes back,
// logs and reports print, and errors list (enum_name, enum_from_name, enum_choices below).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

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

// One value of a config enum and its spelling.
template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

template <class E>
concept ConfigEnum = std::is_enum_v<E> && requires(E e) {
  config_enum_names(e);
};

// The spelling of v ("bf16").
template <ConfigEnum E>
constexpr std::string_view enum_name(E v) {
  for (const auto& n : config_enum_names(E{}))
    if (n.value == v) return n.name;
  return "?";  // not a declared value (a cast from an integer)
}

// The value spelled `s`, or nothing when no value is spelled so (case matters).
template <ConfigEnum E>
constexpr std::optional<E> enum_from_name(std::string_view s) {
  for (const auto& n : config_enum_names(E{}))
    if (n.name == s) return n.value;
  return std::nullopt;
}

// Every spelling for messages and the reference: "fp32, bf16 or fp16".
template <ConfigEnum E>
std::string enum_choices() {
  const auto names = config_enum_names(E{});
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += std::string(i == 0                  ? ""
                     : i + 1 == names.size() ? " or "
                                             : ", ") +
         std::string(names[i].name);
  return s;
}

// The value spelled `text` of the field `key` outside YAML (a command-line option, a JSON
// file); throws ConfigError(key, "<key> is '<text>'; expected <choices>") for any other text.
template <ConfigEnum E>
E parse_enum(std::string_view key, std::string_view text) {
  if (auto v = enum_from_name<E>(text)) return *v;
  config_error(std::string(key), "{} is '{}'; expected {}", key, text, enum_choices<E>());
}

}  // namespace braid
