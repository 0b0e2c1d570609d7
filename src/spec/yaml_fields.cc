#include "spec/yaml_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <regex>

#include "common/strings.h"

namespace drover::yaml {

std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return fmt::format("'{}'", n.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

const Field* Find(const std::vector<Field>& fields, std::string_view name) {
  for (const Field& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string UnknownKey(const std::string& name, const std::vector<std::string>& valid,
                       const std::string& where, const Sections& sections,
                       std::string_view top_hint) {
  if (std::optional<std::string> close = ClosestMatch(name, valid)) {
    return fmt::format("unknown key '{}'{}; did you mean '{}'?", name, where, *close);
  }
  if (where.empty()) {
    for (const auto& [section, keys] : sections) {
      if (Contains(*keys, name)) {
        return fmt::format("unknown key '{}'; did you mean '{}.{}'? (put it under {}:)", name,
                           section, name, section);
      }
    }
  }
  return fmt::format("unknown key '{}'{}; valid keys are {}{}", name, where, Join(valid, ", "),
                     where.empty() ? top_hint : "");
}

Scalar Resolve(const YAML::Node& n) {
  Scalar s;
  if (n.IsNull()) {
    s.kind = ScalarKind::kNull;
    return s;
  }
  if (!n.IsScalar() || n.Tag() == "!" || n.Tag() == kStrTag) return s;
  const std::string& t = n.Scalar();
  if (t == "true" || t == "True" || t == "TRUE") {
    s.kind = ScalarKind::kBool;
    s.b = true;
    return s;
  }
  if (t == "false" || t == "False" || t == "FALSE") {
    s.kind = ScalarKind::kBool;
    return s;
  }
  static const std::regex kDec("[-+]?[0-9]+");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  static const std::regex kInf(R"([-+]?\.(inf|Inf|INF))");
  static const std::regex kNan(R"(\.(nan|NaN|NAN))");
  auto from_chars = [&](std::string_view digits, int base) {
    bool neg = false;
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
      neg = digits[0] == '-';
      digits.remove_prefix(1);
    }
    uint64_t u = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u, base);
    uint64_t limit = neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    if (ec != std::errc() || p != digits.data() + digits.size() || u > limit) {
      // Too large for int64: keep the number, as a float.
      s.kind = ScalarKind::kFloat;
      s.d = std::strtod(t.c_str(), nullptr);
      return;
    }
    s.kind = ScalarKind::kInt;
    s.i = neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
  };
  if (std::regex_match(t, kDec)) {
    from_chars(t, 10);
  } else if (t.size() > 2 && t[0] == '0' && t[1] == 'x' &&
             std::all_of(t.begin() + 2, t.end(), [](char c) { return std::isxdigit(c); })) {
    from_chars(std::string_view(t).substr(2), 16);
  } else if (t.size() > 2 && t[0] == '0' && t[1] == 'o' &&
             std::all_of(t.begin() + 2, t.end(), [](char c) { return c >= '0' && c <= '7'; })) {
    from_chars(std::string_view(t).substr(2), 8);
  } else if (std::regex_match(t, kFloat)) {
    s.kind = ScalarKind::kFloat;
    s.d = std::strtod(t.c_str(), nullptr);
  } else if (std::regex_match(t, kInf)) {
    s.kind = ScalarKind::kFloat;
    s.d = t[0] == '-' ? -std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::infinity();
  } else if (std::regex_match(t, kNan)) {
    s.kind = ScalarKind::kFloat;
    s.d = std::numeric_limits<double>::quiet_NaN();
  }
  return s;
}

Status CheckUtf8(std::string_view text, const std::string& source, std::string_view what) {
  size_t bad = FirstInvalidUtf8(text);
  // Control bytes other than tab and line ends are not YAML text either; yaml-cpp reads a NUL
  // as the start of an escape ("\0N" became a lone byte 0x85).
  for (size_t i = 0; i < text.size() && i < bad; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + i, '\n'));
      const size_t start = i == 0 ? std::string_view::npos : text.rfind('\n', i - 1);
      const size_t column = start == std::string_view::npos ? i + 1 : i - start;
      return InvalidArgument(fmt::format(
          "{}:{}:{}: byte 0x{:02x} is a control character, which YAML text may not hold; remove "
          "it from {} (write it as an escape such as \"\\t\" inside double quotes)",
          source, line, column, c, what));
    }
  }
  if (bad == std::string_view::npos) return Status::Ok();
  const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + bad, '\n'));
  const size_t start = bad == 0 ? std::string_view::npos : text.rfind('\n', bad - 1);
  const size_t column = start == std::string_view::npos ? bad + 1 : bad - start;
  return InvalidArgument(fmt::format("{}:{}:{}: byte 0x{:02x} is not UTF-8 text; save {} as UTF-8",
                                     source, line, column, static_cast<unsigned char>(text[bad]),
                                     what));
}

Result<YAML::Node> Load(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    std::string hint;
    // The first line whose indentation holds a tab.
    size_t line = 1;
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const size_t indent_end = text.find_first_not_of(" \t", at);
      const size_t tab = text.find('\t', at);
      if (tab < end && tab < indent_end) {
        hint = fmt::format(" (line {} indents with a tab: YAML indents with spaces only; replace "
                           "the tab with spaces)",
                           line);
        break;
      }
      at = end + 1;
      ++line;
    }
    return InvalidArgument(fmt::format("{}:{}:{}: YAML syntax error: {}{}; fix the YAML at this "
                                       "position",
                                       source, e.mark.line + 1, e.mark.column + 1, e.msg, hint));
  }
}

Status CheckScalarsUtf8(const YAML::Node& root, const std::string& source) {
  // Aliases make a tree of shared nodes: a budget keeps a crafted one from costing more than a
  // big real file would (the parsers refuse alias bombs themselves, with a better message).
  int64_t budget = 4'000'000;
  std::vector<YAML::Node> stack = {root};
  while (!stack.empty()) {
    YAML::Node n = stack.back();
    stack.pop_back();
    if (--budget < 0) return Status::Ok();
    if (n.IsScalar()) {
      // yaml-cpp turns the escape "\N" into the lone byte 0x85 rather than U+0085's UTF-8.
      if (size_t bad = FirstInvalidUtf8(n.Scalar()); bad != std::string::npos) {
        YAML::Mark m = n.Mark();
        return InvalidArgument(fmt::format(
            "{}:{}:{}: this value reads as byte 0x{:02x}, which is not UTF-8 text (the YAML "
            "escape \\N does this); write the character itself, or \\u0085",
            source, m.line + 1, m.column + 1, static_cast<unsigned char>(n.Scalar()[bad])));
      }
    } else if (n.IsMap()) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        stack.push_back(it->first);
        stack.push_back(it->second);
      }
    } else if (n.IsSequence()) {
      for (auto it = n.begin(); it != n.end(); ++it) stack.push_back(*it);
    }
  }
  return Status::Ok();
}

std::string Reader::Where(const YAML::Node& n) const {
  YAML::Mark m = n.Mark();
  if (m.is_null()) return fmt::format("{}:1:1", source_);
  return fmt::format("{}:{}:{}", source_, m.line + 1, m.column + 1);
}

Status Reader::Err(const YAML::Node& at, std::string_view msg) const {
  return InvalidArgument(fmt::format("{}: {}", Where(at), msg));
}

Result<std::vector<Field>> Reader::ReadMap(const YAML::Node& at, const YAML::Node& map,
                                           const std::string& path, const MapRules& rules) const {
  std::vector<Field> fields;
  if (map.IsNull()) return fields;
  if (!map.IsMap()) {
    return Err(at, fmt::format("{} must be a mapping, got {}; write e.g. {}", path, Describe(map),
                               rules.example));
  }
  std::string prefix = path.empty() ? "" : path + ".";
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      return Err(key,
                 fmt::format("a key must be a plain name, got {}{}", Describe(key), rules.key_hint));
    }
    std::string name = key.Scalar();
    if (rules.valid && !Contains(*rules.valid, name)) {
      std::string where = path.empty() ? "" : fmt::format("{}{}", rules.in, path);
      return Err(key, UnknownKey(name, *rules.valid, where,
                                 rules.sections ? *rules.sections : Sections{}, rules.top_hint));
    }
    if (Find(fields, name)) {
      return Err(key, fmt::format("duplicate key '{}{}'; keep only one of them", prefix, name));
    }
    fields.push_back({key, it->second, name, prefix + name});
  }
  return fields;
}

Result<int64_t> Reader::Int(const Field& f, int64_t min, int64_t max, std::string_view kind,
                            std::string_view hint) const {
  Scalar s = Resolve(f.value);
  if (s.kind != ScalarKind::kInt || s.i < min || s.i > max) {
    return Err(f.at(),
               fmt::format("{} must be {}, got {}; {}", f.path, kind, Describe(f.value), hint));
  }
  return s.i;
}

Result<double> Reader::Real(const Field& f, double min, double max, bool min_open, bool max_open,
                            std::string_view hint) const {
  std::string range;
  if (max == std::numeric_limits<double>::infinity()) {
    range = fmt::format("a number {} {}", min_open ? ">" : ">=", min);
  } else if (!min_open && !max_open) {
    range = fmt::format("a number from {} to {}", min, max);
  } else {
    range = fmt::format("a number {} {} and {} {}", min_open ? ">" : ">=", min,
                        max_open ? "<" : "<=", max);
  }
  Scalar s = Resolve(f.value);
  double v = s.kind == ScalarKind::kInt ? static_cast<double>(s.i) : s.d;
  if ((s.kind != ScalarKind::kInt && s.kind != ScalarKind::kFloat) || !std::isfinite(v) ||
      v < min || v > max || (min_open && v == min) || (max_open && v == max)) {
    return Err(f.at(),
               fmt::format("{} must be {}, got {}; {}", f.path, range, Describe(f.value), hint));
  }
  return v;
}

Result<int64_t> Reader::Duration(const Field& f, int64_t min) const {
  if (!f.value.IsScalar()) {
    return Err(f.at(), fmt::format("{} must be a duration, got {}; write e.g. 500ms, 90s, 30m, "
                                   "2h or 1h30m",
                                   f.path, Describe(f.value)));
  }
  Result<int64_t> ms = ParseDurationMs(f.value.Scalar());
  if (!ms.ok()) return Err(f.at(), fmt::format("{}: {}", f.path, ms.status().message()));
  if (*ms < min) {
    return Err(
        f.at(),
        fmt::format("{} must be at least {}, got '{}'; write a longer duration", f.path,
                    min < 1000 ? fmt::format("{}ms", min) : FormatDuration(min), f.value.Scalar()));
  }
  return *ms;
}

Result<int64_t> Reader::Bytes(const Field& f) const {
  if (!f.value.IsScalar()) {
    return Err(f.at(), fmt::format("{} must be a size, got {}; write e.g. 256MiB or 1GiB", f.path,
                                   Describe(f.value)));
  }
  Result<int64_t> b = ParseBytes(f.value.Scalar());
  if (!b.ok()) return Err(f.at(), fmt::format("{}: {}", f.path, b.status().message()));
  return *b;
}

Result<std::string> Reader::Choice(const Field& f, const std::vector<std::string>& choices) const {
  std::string got = f.value.IsScalar() ? f.value.Scalar() : "";
  if (f.value.IsScalar() && Contains(choices, got)) return got;
  std::string list = Join(choices, ", ");
  std::optional<std::string> close = f.value.IsScalar() ? ClosestMatch(got, choices) : std::nullopt;
  return Err(f.at(), fmt::format("{} must be one of {}, got {}{}", f.path, list, Describe(f.value),
                                 close ? fmt::format("; did you mean '{}'?", *close) : ""));
}

Result<std::string> Reader::Text(const Field& f, std::string_view hint) const {
  if (!f.value.IsScalar()) {
    return Err(f.at(),
               fmt::format("{} must be a string, got {}; {}", f.path, Describe(f.value), hint));
  }
  return f.value.Scalar();
}

}  // namespace drover::yaml
