// Any visit()-protocol config struct to and from JSON (checkpoint manifests, HF configs).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace braid {

namespace detail {
struct ToJson {
  nlohmann::json& j;
  template <class T>
  void operator()(const char* key, T& field, const char*) {
    j[key] = field;
  }
};
struct FromJson {
  const nlohmann::json& j;
  const std::string& where;
  template <class T>
  void operator()(const char* key, T& field, const char*) {
    if (!j.contains(key)) return;  // keep the default
    try {
      field = j.at(key).get<T>();
    } catch (const nlohmann::json::exception& e) {
      user_error("{}: key '{}' has the wrong type ({})", where, key, e.what());
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
