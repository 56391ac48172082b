// Any visit()-protocol config struct to and from JSON (checkpoint manifests, HF configs).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/config_fields.h"
#include "core/error.h"

namespace braid {

namespace detail {

// A field as JSON: its value, an enum by its spelling, and an optional bool (model.
// tie_embeddings) as the -1 (auto) / 0 / 1 checkpoint manifests have always held, so manifests
// read the same in every braid version.
template <class T>
nlohmann::json json_of(const T& v) {
  if constexpr (ConfigEnum<T>)
    return std::string(enum_name(v));
  else
    return v;
}
inline nlohmann::json json_of(const std::optional<bool>& v) { return v ? (*v ? 1 : 0) : -1; }

// The inverse of json_of (an optional bool also as true/false, or null for auto).
template <class T>
void read_json(const nlohmann::json& j, T& out) {
  if constexpr (ConfigEnum<T>) {
    const std::string s = j.get<std::string>();
    const std::optional<T> v = enum_from_name<T>(s);
    if (!v) throw std::invalid_argument(fmt::format("'{}'; expected {}", s, enum_choices<T>()));
    out = *v;
  } else {
    out = j.get<T>();
  }
}
inline void read_json(const nlohmann::json& j, std::optional<bool>& out) {
  if (j.is_null()) {
    out = std::nullopt;
  } else if (j.is_boolean()) {
    out = j.get<bool>();
  } else {
    const int v = j.get<int>();
    if (v < -1 || v > 1) throw std::invalid_argument(fmt::format("{}; expected -1, 0 or 1", v));
    out = v < 0 ? std::nullopt : std::optional<bool>(v == 1);
  }
}

struct ToJson {
  nlohmann::json& j;
  template <class T>
  void operator()(const char* key, T& field, const char*) {
    j[key] = json_of(field);
  }
};
struct FromJson {
  const nlohmann::json& j;
  const std::string& where;
  template <class T>
  void operator()(const char* key, T& field, const char*) {
    if (!j.contains(key)) return;  // keep the default
    try {
      read_json(j.at(key), field);
    } catch (const nlohmann::json::exception& e) {
      user_error("{}: key '{}' has the wrong type ({})", where, key, e.what());
    } catch (const std::invalid_argument& e) {
      user_error("{}: key '{}' is {}", where, key, e.what());
    }
  }
};
}  // namespace detail

template <class S>
nlohmann::json fields_to_json(S s) {
  nlohmann::json j = nlohmann::json::object();
  detail::ToJson v{j};
  s.visit(v);
  return j;
}

// Fills s from j (missing keys keep their defaults); `where` names the source in errors.
template <class S>
void fields_from_json(S& s, const nlohmann::json& j, const std::string& where) {
  BRAID_USER_CHECK(j.is_object(), "{}: expected a JSON object", where);
  detail::FromJson v{j, where};
  s.visit(v);
}

}  // namespace braid
