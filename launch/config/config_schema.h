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

// A pointer to one field of a live RunConfig; the alternatives are the protocol's field types.
using FieldPtr = std::variant<bool*, int*, int64_t*, uint64_t*, float*, double*, std::string*,
                              std::vector<std::string>*>;

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
// The field's type for users: "int", "float", "string", "list of strings", ...
std::string field_type_name(const FieldPtr& field);
// True when both pointers hold the same type and equal values (NaN equals NaN).
bool field_values_equal(const FieldPtr& a, const FieldPtr& b);

}  // namespace braid
