#include "mcp/tools.h"

#include <fmt/format.h>

#include <cctype>

#include "mcp/schema.h"

namespace drover::mcp {

void ToolRegistry::Add(Tool tool) {
  for (auto& t : tools_) {
    if (t.name == tool.name) {
      replaced_.push_back(tool.name);
      t = std::move(tool);
      return;
    }
  }
  tools_.push_back(std::move(tool));
}

const Tool* ToolRegistry::Find(std::string_view name) const {
  for (const auto& t : tools_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> ToolRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& t : tools_) names.push_back(t.name);
  return names;
}

Status ToolRegistry::Check() const {
  if (!replaced_.empty()) {
    return InvalidArgument(fmt::format("tool \"{}\" is registered twice", replaced_.front()));
  }
  for (const auto& t : tools_) {
    bool name_ok = !t.name.empty() && t.name.size() <= 128;
    for (char c : t.name) {
      name_ok = name_ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
                            c == '.');
    }
    if (!name_ok) {
      return InvalidArgument(fmt::format(
          "tool name \"{}\": use 1-128 characters from A-Z, a-z, 0-9, _, - and .", t.name));
    }
    if (t.description.empty()) {
      return InvalidArgument(fmt::format("tool {}: the model needs a description", t.name));
    }
    if (!t.handler) return InvalidArgument(fmt::format("tool {}: no handler", t.name));
    if (!t.input_schema.is_null()) {
      if (!t.input_schema.is_object() || t.input_schema.value("type", Json()) != "object") {
        return InvalidArgument(
            fmt::format("tool {}: the input schema must be {{\"type\": \"object\", ...}}", t.name));
      }
      DROVER_RETURN_IF_ERROR(CheckSchemaSupported(t.input_schema, t.name + ".inputSchema"));
    }
    if (!t.output_schema.is_null()) {
      if (!t.output_schema.is_object() || t.output_schema.value("type", Json()) != "object") {
        return InvalidArgument(fmt::format(
            "tool {}: the output schema must be {{\"type\": \"object\", ...}}", t.name));
      }
      DROVER_RETURN_IF_ERROR(CheckSchemaSupported(t.output_schema, t.name + ".outputSchema"));
    }
  }
  return Status::Ok();
}

}  // namespace drover::mcp
