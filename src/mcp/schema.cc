#include "mcp/schema.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "common/strings.h"

namespace drover::mcp {
namespace {

// The offending value as the model wrote it, shortened: it is quoted back in the message.
std::string Describe(const Json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return fmt::format("an array of {}", v.size());
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string Member(const std::string& path, std::string_view key) {
  return fmt::format("{}.{}", path, key);
}

// Whether v is a whole number (3.0 is one in JSON Schema), whatever its size.
bool IsWhole(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

// An "integer" here is one a tool can hold (a 64-bit signed integer: ids, counts, sizes): a
// whole number past that (1e23, 2^64 - 1) would wrap when read, so it does not match.
bool IsIntegral(const Json& v) {
  if (!IsWhole(v)) return false;
  if (v.is_number_unsigned()) {
    return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }
  if (v.is_number_integer()) return true;
  const double d = v.get<double>();
  return d >= -9223372036854775808.0 && d < 9223372036854775808.0;  // -2^63 <= d < 2^63
}

bool MatchesType(const Json& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "integer") return IsIntegral(v);
  if (type == "number") return v.is_number();
  return false;
}

std::string TypeNoun(std::string_view type) {
  if (type == "object") return "an object";
  if (type == "array") return "an array";
  if (type == "string") return "a string";
  if (type == "boolean") return "true or false";
  if (type == "null") return "null";
  if (type == "integer") return "an integer";
  if (type == "number") return "a number";
  return fmt::format("type \"{}\"", type);
}

// Characters, not bytes: JSON Schema lengths count code points.
size_t Utf8Length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string FormatNumber(const Json& n) { return n.dump(); }

// A count keyword (minLength, maxItems, ...): a non-negative integer, however it was written
// (a literal in C++ is signed, one parsed from text unsigned).
std::optional<size_t> Count(const Json& s, const char* key) {
  auto it = s.find(key);
  if (it == s.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
  return it->get<size_t>();
}

Status Fail(const std::string& path, const std::string& what) {
  return InvalidArgument(fmt::format("{}: {}", path, what));
}

Status CheckType(const Json& v, const Json& type, const std::string& path) {
  std::vector<std::string> names;
  if (type.is_string()) {
    names.push_back(type.get<std::string>());
  } else if (type.is_array()) {
    for (const auto& t : type) {
      if (t.is_string()) names.push_back(t.get<std::string>());
    }
  } else {
    return Status::Ok();
  }
  for (const auto& n : names) {
    if (MatchesType(v, n)) return Status::Ok();
  }
  std::vector<std::string> nouns;
  for (const auto& n : names) {
    nouns.push_back(n == "integer" && IsWhole(v)
                        ? "an integer from -2^63 to 2^63-1"  // whole, but too big to hold
                        : TypeNoun(n));
  }
  return Fail(path, fmt::format("expected {}, got {}", Join(nouns, " or "), Describe(v)));
}

Status CheckNumber(const Json& v, const Json& s, const std::string& path) {
  double x = v.get<double>();
  auto bound = [&](const char* key) -> const Json* {
    auto it = s.find(key);
    return it != s.end() && it->is_number() ? &*it : nullptr;
  };
  if (const Json* m = bound("minimum"); m && x < m->get<double>()) {
    return Fail(path, fmt::format("must be at least {}, got {}", FormatNumber(*m), Describe(v)));
  }
  if (const Json* m = bound("maximum"); m && x > m->get<double>()) {
    return Fail(path, fmt::format("must be at most {}, got {}", FormatNumber(*m), Describe(v)));
  }
  if (const Json* m = bound("exclusiveMinimum"); m && x <= m->get<double>()) {
    return Fail(path,
                fmt::format("must be greater than {}, got {}", FormatNumber(*m), Describe(v)));
  }
  if (const Json* m = bound("exclusiveMaximum"); m && x >= m->get<double>()) {
    return Fail(path, fmt::format("must be less than {}, got {}", FormatNumber(*m), Describe(v)));
  }
  return Status::Ok();
}

Status CheckString(const Json& v, const Json& s, const std::string& path) {
  size_t len = Utf8Length(v.get_ref<const std::string&>());
  if (auto n = Count(s, "minLength"); n && len < *n) {
    if (*n == 1) return Fail(path, "must not be empty");
    return Fail(path, fmt::format("must be at least {} characters long, got {}", *n, len));
  }
  if (auto n = Count(s, "maxLength"); n && len > *n) {
    return Fail(path, fmt::format("must be at most {} characters long, got {}", *n, len));
  }
  return Status::Ok();
}

Status CheckArray(const Json& v, const Json& s, const std::string& path) {
  if (auto n = Count(s, "minItems"); n && v.size() < *n) {
    return Fail(path, fmt::format("needs at least {} items, got {}", *n, v.size()));
  }
  if (auto n = Count(s, "maxItems"); n && v.size() > *n) {
    return Fail(path, fmt::format("takes at most {} items, got {}", *n, v.size()));
  }
  auto it = s.find("uniqueItems");
  if (it != s.end() && it->is_boolean() && it->get<bool>()) {
    // Sorted, not pairwise: a long array must not cost n^2 comparisons.
    std::map<Json, size_t> seen;
    for (size_t i = 0; i < v.size(); ++i) {
      auto [it_seen, inserted] = seen.emplace(v[i], i);
      if (!inserted) {
        return Fail(fmt::format("{}[{}]", path, i),
                    fmt::format("repeats item {} ({})", it_seen->second, Describe(v[i])));
      }
    }
  }
  it = s.find("items");
  if (it != s.end() && (it->is_object() || it->is_boolean())) {
    for (size_t i = 0; i < v.size(); ++i) {
      DROVER_RETURN_IF_ERROR(ValidateJson(v[i], *it, fmt::format("{}[{}]", path, i)));
    }
  }
  return Status::Ok();
}

Status CheckObject(const Json& v, const Json& s, const std::string& path) {
  static const Json kNoProperties = Json::object();
  auto pit = s.find("properties");
  const Json& props = pit != s.end() && pit->is_object() ? *pit : kNoProperties;
  auto ait = s.find("additionalProperties");
  // Unknown fields first: a misspelt required field is better explained by "did you mean".
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (props.contains(it.key()) || ait == s.end()) continue;
    if (ait->is_boolean() && !ait->get<bool>()) {
      std::vector<std::string> known;
      for (auto p = props.begin(); p != props.end(); ++p) known.push_back(p.key());
      std::string hint;
      if (auto m = ClosestMatch(it.key(), known)) {
        hint = fmt::format(" (did you mean \"{}\"?)", *m);
      } else if (known.empty()) {
        hint = " (this takes no fields)";
      } else {
        hint = fmt::format(" (known: {})", Join(known, ", "));
      }
      return Fail(Member(path, it.key()), "unknown field" + hint);
    }
    if (ait->is_object()) {
      DROVER_RETURN_IF_ERROR(ValidateJson(it.value(), *ait, Member(path, it.key())));
    }
  }
  auto rit = s.find("required");
  if (rit != s.end() && rit->is_array()) {
    for (const auto& name : *rit) {
      if (name.is_string() && !v.contains(name.get<std::string>())) {
        return Fail(Member(path, name.get<std::string>()), "missing (it is required)");
      }
    }
  }
  for (auto p = props.begin(); p != props.end(); ++p) {
    auto it = v.find(p.key());
    if (it == v.end()) continue;
    DROVER_RETURN_IF_ERROR(ValidateJson(*it, p.value(), Member(path, p.key())));
  }
  return Status::Ok();
}

const std::set<std::string_view>& KnownKeywords() {
  static const std::set<std::string_view> kKnown = {
      "type",       "properties", "required",   "additionalProperties",
      "enum",       "const",      "minimum",    "maximum",
      "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
      "items",      "minItems",   "maxItems",   "uniqueItems",
      // Annotations: meant for readers, not enforced by any validator by default.
      "description", "title", "default", "examples", "format", "$schema", "deprecated",
      "readOnly", "writeOnly"};
  return kKnown;
}

}  // namespace

Status ValidateJson(const Json& value, const Json& schema, const std::string& path) {
  if (schema.is_boolean()) {
    return schema.get<bool>() ? Status::Ok() : Fail(path, "no value is allowed here");
  }
  if (!schema.is_object()) return Status::Ok();
  if (auto it = schema.find("type"); it != schema.end()) {
    DROVER_RETURN_IF_ERROR(CheckType(value, *it, path));
  }
  if (auto it = schema.find("const"); it != schema.end() && value != *it) {
    return Fail(path, fmt::format("must be {}, got {}", Describe(*it), Describe(value)));
  }
  if (auto it = schema.find("enum"); it != schema.end() && it->is_array()) {
    bool found = false;
    std::vector<std::string> options;
    for (const auto& option : *it) {
      found = found || option == value;
      options.push_back(Describe(option));
    }
    if (!found) {
      return Fail(path,
                  fmt::format("expected one of {}, got {}", Join(options, ", "), Describe(value)));
    }
  }
  if (value.is_number()) return CheckNumber(value, schema, path);
  if (value.is_string()) return CheckString(value, schema, path);
  if (value.is_array()) return CheckArray(value, schema, path);
  if (value.is_object()) return CheckObject(value, schema, path);
  return Status::Ok();
}

Status CheckSchemaSupported(const Json& schema, const std::string& path) {
  if (schema.is_boolean()) return Status::Ok();
  if (!schema.is_object()) return Fail(path, "a schema must be an object or true/false");
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    if (!KnownKeywords().count(it.key())) {
      return Fail(path, fmt::format("keyword \"{}\" is not enforced by drover's validator; "
                                    "check it in the handler and leave it out of the schema",
                                    it.key()));
    }
  }
  if (auto it = schema.find("type"); it != schema.end()) {
    std::vector<Json> names = it->is_array() ? it->get<std::vector<Json>>() : std::vector{*it};
    for (const auto& n : names) {
      if (!n.is_string() || TypeNoun(n.get<std::string>()).rfind("type ", 0) == 0) {
        return Fail(path, fmt::format("unknown type {}", Describe(n)));
      }
    }
  }
  auto props = schema.find("properties");
  if (props != schema.end()) {
    if (!props->is_object()) return Fail(path, "properties must be an object");
    for (auto p = props->begin(); p != props->end(); ++p) {
      DROVER_RETURN_IF_ERROR(CheckSchemaSupported(p.value(), Member(path, p.key())));
    }
  }
  if (auto it = schema.find("items"); it != schema.end()) {
    DROVER_RETURN_IF_ERROR(CheckSchemaSupported(*it, path + "[]"));
  }
  auto extra = schema.find("additionalProperties");
  if (extra != schema.end() && extra->is_object()) {
    DROVER_RETURN_IF_ERROR(CheckSchemaSupported(*extra, path + ".*"));
  }
  if (auto req = schema.find("required"); req != schema.end()) {
    if (!req->is_array()) return Fail(path, "required must be an array of names");
    bool closed = extra != schema.end() && extra->is_boolean() && !extra->get<bool>();
    for (const auto& name : *req) {
      if (!name.is_string()) return Fail(path, "required must be an array of names");
      if (closed && (props == schema.end() || !props->contains(name.get<std::string>()))) {
        return Fail(path, fmt::format("\"{}\" is required but additionalProperties:false "
                                      "forbids it (add it to properties)",
                                      name.get<std::string>()));
      }
    }
  }
  return Status::Ok();
}

}  // namespace drover::mcp
