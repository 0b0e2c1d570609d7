#include "spec/yaml_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

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

}  // namespace drover::yaml
