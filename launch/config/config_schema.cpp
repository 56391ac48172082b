// Field list from the visit protocol, and strict YAML scalar <-> field conversions.
#include "launch/config/config_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <type_traits>

#include "core/error.h"

namespace braid {

namespace {

// Collects pointers to every field; one instance per RunConfig.
struct FieldCollector {
  std::vector<ConfigField>* out;
  std::string section_name;

  template <class S>
  void section(std::string_view name, S& s) {
    section_name = std::string(name);
    s.visit(*this);
  }
  template <class T>
  void operator()(std::string_view key, T& field, std::string_view doc) {
    out->push_back(
        ConfigField{section_name, std::string(key), field_ptr(&field), std::string(doc)});
  }
};

struct SectionNames {
  std::vector<std::string>* out;
  template <class S>
  void section(std::string_view name, S&) {
    out->emplace_back(name);
  }
};

// "a list", "a mapping", "nothing (null)" or the scalar in quotes, for "expected X, got Y".
std::string describe(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (!n.IsDefined() || n.IsNull()) return "nothing (null)";
  return fmt::format("'{}'", n.Scalar());
}

bool is_plain_scalar(const YAML::Node& n) { return n.IsScalar() && !n.IsNull(); }

template <class T>
std::optional<std::string> read_integer(const YAML::Node& n, T& out) {
  using Lim = std::numeric_limits<T>;
  const std::string range = fmt::format("an integer in [{}, {}]", Lim::min(), Lim::max());
  const std::string expected = std::is_unsigned_v<T> ? "a non-negative integer" : "an integer";
  if (!is_plain_scalar(n)) return fmt::format("expected {}, got {}", expected, describe(n));
  std::string_view s = n.Scalar();
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty() || s[0] == '+' || s[0] == '-')
    return fmt::format("expected {}, got {}", expected, describe(n));
  // Parse the magnitude wide, then apply the sign and check the range of T.
  uint64_t mag = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), mag, base);
  if (ec == std::errc::invalid_argument || end != s.data() + s.size())
    return fmt::format("expected {}, got {}", expected, describe(n));
  if (ec == std::errc::result_out_of_range)
    return fmt::format("expected {}, got {}", range, describe(n));
  if (negative && mag != 0) {
    if constexpr (std::is_unsigned_v<T>) {
      return fmt::format("expected a non-negative integer, got {}", describe(n));
    } else {
      if (mag > uint64_t(Lim::max()) + 1)
        return fmt::format("expected {}, got {}", range, describe(n));
      out = mag == uint64_t(Lim::max()) + 1 ? Lim::min() : -T(mag);
      return std::nullopt;
    }
  }
  if (mag > uint64_t(Lim::max())) return fmt::format("expected {}, got {}", range, describe(n));
  out = T(mag);
  return std::nullopt;
}

template <class T>
std::optional<std::string> read_floating(const YAML::Node& n, T& out) {
  constexpr bool is_float = std::is_same_v<T, float>;
  if (!is_plain_scalar(n)) return fmt::format("expected a number, got {}", describe(n));
  std::string_view s = n.Scalar();
  bool negative = false;
  std::string_view mag = s;
  if (!mag.empty() && (mag[0] == '+' || mag[0] == '-')) {
    negative = mag[0] == '-';
    mag.remove_prefix(1);
  }
  // YAML 1.2 spellings of infinity and NaN.
  if (mag == ".inf" || mag == ".Inf" || mag == ".INF") {
    out = negative ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    return std::nullopt;
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") {
    out = std::numeric_limits<T>::quiet_NaN();
    return std::nullopt;
  }
  // from_chars accepts no leading '+', and 'inf'/'nan' spellings are not YAML numbers.
  if (mag.empty() || !(std::isdigit(static_cast<unsigned char>(mag[0])) || mag[0] == '.'))
    return fmt::format("expected a number, got {}", describe(n));
  std::string_view body = negative ? s.substr(s.size() - mag.size() - 1) : mag;
  T v{};
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
  if (ec == std::errc::invalid_argument || end != body.data() + body.size())
    return fmt::format("expected a number, got {}", describe(n));
  if (ec == std::errc::result_out_of_range) {
    // Underflow to a subnormal or zero is representable enough; overflow is not.
    const double wide = std::strtod(std::string(body).c_str(), nullptr);
    if (std::isinf(wide) || std::fabs(wide) > double(std::numeric_limits<T>::max()))
      return fmt::format("expected a number within the range of a {}-bit float, got {}",
                         is_float ? 32 : 64, describe(n));
    v = T(wide);
  }
  out = v;
  return std::nullopt;
}

std::optional<std::string> read_one(const YAML::Node& n, bool& out) {
  if (is_plain_scalar(n)) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return out = true, std::nullopt;
    if (s == "false" || s == "False" || s == "FALSE") return out = false, std::nullopt;
  }
  return fmt::format("expected true or false, got {}", describe(n));
}
std::optional<std::string> read_one(const YAML::Node& n, int& out) { return read_integer(n, out); }
std::optional<std::string> read_one(const YAML::Node& n, int64_t& out) {
  return read_integer(n, out);
}
std::optional<std::string> read_one(const YAML::Node& n, uint64_t& out) {
  return read_integer(n, out);
}
std::optional<std::string> read_one(const YAML::Node& n, float& out) {
  return read_floating(n, out);
}
std::optional<std::string> read_one(const YAML::Node& n, double& out) {
  return read_floating(n, out);
}
std::optional<std::string> read_one(const YAML::Node& n, std::string& out) {
  if (!is_plain_scalar(n))
    return fmt::format("expected a string, got {}{}", describe(n),
                       n.IsNull() ? " (write \"\" for an empty string)" : "");
  out = n.Scalar();
  return std::nullopt;
}
std::optional<std::string> read_one(const YAML::Node& n, std::vector<std::string>& out) {
  if (is_plain_scalar(n) && !n.Scalar().empty()) {  // one name stands for a list of one
    out = {n.Scalar()};
    return std::nullopt;
  }
  if (!n.IsSequence())
    return fmt::format("expected a list of strings such as [\"a\", \"b\"], got {}{}", describe(n),
                       n.IsNull() ? " (write [] for an empty list)" : "");
  std::vector<std::string> v;
  for (const auto& item : n) {
    if (!is_plain_scalar(item))
      return fmt::format("expected a list of strings, but item {} is {}", v.size(), describe(item));
    v.push_back(item.Scalar());
  }
  out = std::move(v);
  return std::nullopt;
}

std::optional<std::string> read_one(const YAML::Node& n, std::vector<int>& out) {
  if (!n.IsSequence())
    return fmt::format("expected a list of integers such as [3, 5], got {}{}", describe(n),
                       n.IsNull() ? " (write [] for an empty list)" : "");
  std::vector<int> v;
  for (const auto& item : n) {
    int x = 0;
    if (auto err = read_integer(item, x)) return fmt::format("item {}: {}", v.size(), *err);
    v.push_back(x);
  }
  out = std::move(v);
  return std::nullopt;
}

bool is_auto(const YAML::Node& n) { return is_plain_scalar(n) && n.Scalar() == "auto"; }

std::optional<std::string> read_one(const YAML::Node& n, std::optional<int>& out) {
  if (is_auto(n)) return out = std::nullopt, std::nullopt;
  int v = 0;
  if (read_integer(n, v)) return fmt::format("expected auto or an integer, got {}", describe(n));
  out = v;
  return std::nullopt;
}

std::optional<std::string> read_one(const YAML::Node& n, std::optional<bool>& out) {
  if (is_auto(n)) return out = std::nullopt, std::nullopt;
  // -1, 0 and 1: how configs of earlier braid versions (an int field) said auto, false and true.
  if (is_plain_scalar(n)) {
    const std::string& s = n.Scalar();
    if (s == "-1") return out = std::nullopt, std::nullopt;
    if (s == "0") return out = false, std::nullopt;
    if (s == "1") return out = true, std::nullopt;
  }
  bool v = false;
  if (read_one(n, v)) return fmt::format("expected auto, true or false, got {}", describe(n));
  out = v;
  return std::nullopt;
}

std::optional<std::string> read_one(const YAML::Node& n, const EnumField& e) {
  if (is_plain_scalar(n) && e.set(e.field, n.Scalar())) return std::nullopt;
  return fmt::format("expected {}, got {}", e.choices(), describe(n));
}

// A YAML double-quoted scalar: every string round-trips, whatever it looks like.
std::string quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        q += "\\\"";
        break;
      case '\\':
        q += "\\\\";
        break;
      case '\n':
        q += "\\n";
        break;
      case '\t':
        q += "\\t";
        break;
      case '\r':
        q += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f)
          q += fmt::format("\\x{:02x}", c);
        else
          q += char(c);
    }
  }
  return q + "\"";
}

template <class T>
std::string format_floating(T v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  return fmt::format("{}", v);  // shortest text that parses back to exactly v
}

std::string format_one(bool v) { return v ? "true" : "false"; }
std::string format_one(int v) { return fmt::format("{}", v); }
std::string format_one(int64_t v) { return fmt::format("{}", v); }
std::string format_one(uint64_t v) { return fmt::format("{}", v); }
std::string format_one(float v) { return format_floating(v); }
std::string format_one(double v) { return format_floating(v); }
std::string format_one(const std::string& v) { return quote(v); }
std::string format_one(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + quote(v[i]);
  return s + "]";
}

std::string format_one(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", v[i]);
  return s + "]";
}
std::string format_one(const std::optional<int>& v) { return v ? format_one(*v) : "auto"; }
std::string format_one(const std::optional<bool>& v) { return v ? format_one(*v) : "auto"; }
std::string format_one(const EnumField& e) { return std::string(e.name(e.field)); }

std::string type_name(bool*) { return "bool"; }
std::string type_name(int*) { return "int"; }
std::string type_name(int64_t*) { return "int64"; }
std::string type_name(uint64_t*) { return "uint64"; }
std::string type_name(float*) { return "float"; }
std::string type_name(double*) { return "double"; }
std::string type_name(std::string*) { return "string"; }
std::string type_name(std::vector<std::string>*) { return "list of strings"; }
std::string type_name(std::vector<int>*) { return "list of ints"; }
std::string type_name(std::optional<int>*) { return "int or auto"; }
std::string type_name(std::optional<bool>*) { return "bool or auto"; }
std::string type_name(const EnumField& e) { return e.choices(); }

template <class T>
bool same_value(const T& a, const T& b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) && std::isnan(b)) return true;
    return a == b && std::signbit(a) == std::signbit(b);
  } else {
    return a == b;
  }
}

// The visitors below take each alternative of FieldPtr: a pointer, or an EnumField.
template <class T>
const T& value_of(T* p) {
  return *p;
}
const EnumField& value_of(const EnumField& e) { return e; }

bool same_field_value(const EnumField& a, const EnumField& b) {
  return a.choices() == b.choices() && a.name(a.field) == b.name(b.field);
}
template <class T>
bool same_field_value(T* a, T* b) {
  return same_value(*a, *b);
}

}  // namespace

std::vector<ConfigField> list_config_fields(RunConfig& cfg) {
  std::vector<ConfigField> out;
  FieldCollector c{&out, ""};
  cfg.visit_sections(c);
  std::set<std::string> seen;
  for (const auto& f : out)
    BRAID_CHECK(seen.insert(f.full_key()).second, "config key {} is visited twice", f.full_key());
  return out;
}

std::vector<std::string> list_config_sections() {
  std::vector<std::string> out;
  SectionNames s{&out};
  RunConfig cfg;
  cfg.visit_sections(s);
  return out;
}

std::optional<std::string> read_field(const YAML::Node& node, const FieldPtr& field) {
  return std::visit(
      [&](const auto& p) -> std::optional<std::string> {
        if constexpr (std::is_same_v<std::decay_t<decltype(p)>, EnumField>)
          return read_one(node, p);
        else
          return read_one(node, *p);
      },
      field);
}

std::string format_field(const FieldPtr& field) {
  return std::visit([](const auto& p) { return format_one(value_of(p)); }, field);
}

std::string field_type_name(const FieldPtr& field) {
  return std::visit([](const auto& p) { return type_name(p); }, field);
}

bool field_values_equal(const FieldPtr& a, const FieldPtr& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& pa) {
        using P = std::decay_t<decltype(pa)>;
        return same_field_value(pa, std::get<P>(b));
      },
      a);
}

}  // namespace braid
