#include "spec/yaml_fields.h"

#include <fmt/format.h>

#include <algorithm>

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

}  // namespace drover::yaml
