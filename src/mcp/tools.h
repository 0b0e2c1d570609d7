#pragma once
// The tools an MCP server offers. Each tool is a name, the JSON Schemas of its arguments and of its
// result, and a handler. Tools are plain values so the server module needs nothing from the engine:
// whoever builds the registry (the daemon, later) closes the handlers over what they need.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/spec.h"  // Json

namespace drover::mcp {

struct Tool {
  std::string name;         // [A-Za-z0-9_.-], 1..128 characters (the 2025-11-25 guidance)
  std::string title;        // for people; sent to clients of 2025-06-18 and later
  std::string description;  // for the model: what the tool does and when to use it
  Json input_schema;        // a JSON Schema of type object; null means "no arguments"
  Json output_schema;       // the schema of the handler's result; null means none is declared
  // Returns the structured result (an object; it becomes `structuredContent` and a text item with
  // its JSON), or an error whose message tells the model what to do next (sent with isError).
  std::function<Result<Json>(const Json& arguments)> handler;
  // Optional hints (readOnlyHint, destructiveHint, idempotentHint, openWorldHint); null = none.
  Json annotations;
};

class ToolRegistry {
 public:
  // Adds a tool; a later tool with the same name replaces the earlier one (Check() reports it).
  void Add(Tool tool);
  const std::vector<Tool>& tools() const { return tools_; }
  const Tool* Find(std::string_view name) const;
  std::vector<std::string> Names() const;

  // For tests of whoever registers tools: names are valid and unique, every input schema is an
  // object schema, and every schema uses only keywords the validator enforces (a `pattern` that
  // is silently ignored would be worse than none).
  Status Check() const;

 private:
  std::vector<Tool> tools_;
  std::vector<std::string> replaced_;  // names added twice, for Check()
};

}  // namespace drover::mcp
