// The flat list of every RunConfig field (section, key, typed pointer, doc) built from the
// visit protocol, and the text <-> value conversions of each field type.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "launch/config/train_config.h"

namespace braid {

// A config enum field (core/config_fields.h) with its type erased: its spelling now, setting it
// by a spelling (false for one the enum does not have), and every spelling (as a list, and as
// "a, b or c").
struct EnumField {
  void* field = nullptr;
  std::string_view (*name)(const void* field) = nullptr;
  bool (*set)(void* field, std::string_view name) = nullptr;
  std::vector<std::string_view> (*names)() = nullptr;
  std::string (*choices)() = nullptr;
};

// A pointer to one field of a live RunConfig; the alternatives are the protocol's field types.
using FieldPtr = std::variant<bool*, int*, int64_t*, uint64_t*, float*, double*, std::string*,
                              std::vector<std::string>*, std::vector<int>*, std::optional<int>*,
                              std::optional<bool>*, EnumField>;

// The FieldPtr of any field type of the protocol.
template <class T>
FieldPtr field_ptr(T* field) {
  if constexpr (ConfigEnum<T>) {
    return EnumField{field, [](const void* f) { return enum_name(*static_cast<const T*>(f)); },
                     [](void* f, std::string_view n) {
                       const std::optional<T> v = enum_from_name<T>(n);
                       if (v) *static_cast<T*>(f) = *v;
                       return v.has_value();
                     },
                     [] {
                       std::vector<std::string_view> v;
                       for (const auto& n : config_enum_names(T{})) v.push_back(n.name);
                       return v;
                     },
                     [] { return enum_choices<T>(); }};
  } else {
    return FieldPtr(field);
  }
}

struct ConfigField {
  std::string section;  // "optim"
  std::string key;      // "lr"
  FieldPtr ptr;         // points into the RunConfig the list was built from
  std::string doc;
  std::string full_key() const { return section + "." + key; }
};

// Every field of `cfg`, in section order then visit order. The pointers alias `cfg`.
std::vector<ConfigField> list_config_fields(RunConfig& cfg);
// The section names, in file order.
std::vector<std::string> list_config_sections();

// Reads a YAML node into the field. Returns what was wrong ("expected a number, got 'fast'"),
// or nothing when the node fits the field's type and range.
std::optional<std::string> read_field(const YAML::Node& node, const FieldPtr& field);
// The field's value as YAML text that read_field turns back into exactly the same value.
std::string format_field(const FieldPtr& field);
// The field's type for users: "int", "float", "string", "list of strings", "int or auto", and
// for an enum its spellings ("fp32, bf16 or fp16").
std::string field_type_name(const FieldPtr& field);
// True when both pointers hold the same type and equal values (NaN equals NaN).
bool field_values_equal(const FieldPtr& a, const FieldPtr& b);

}  // namespace braid
