// MCP's JSON-RPC layer: any bytes as a message from a client, before and after initialize, with
// tools whose schemas use every keyword the validator enforces. Every answer must serialise.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "mcp/server.h"

namespace {

using drover::Json;

drover::mcp::ToolRegistry MakeTools() {
  drover::mcp::ToolRegistry tools;
  drover::mcp::Tool show;
  show.name = "show_run";
  show.description = "a run by id";
  show.input_schema = Json::parse(R"({
    "type": "object", "additionalProperties": false, "required": ["run_id"],
    "properties": {
      "run_id": {"type": "integer", "minimum": 1, "maximum": 9007199254740991},
      "fields": {"type": "array", "items": {"type": "string", "enum": ["params", "metrics"]},
                 "maxItems": 8, "uniqueItems": true},
      "tail": {"type": ["integer", "null"], "exclusiveMinimum": 0, "exclusiveMaximum": 100000},
      "note": {"type": "string", "minLength": 1, "maxLength": 64},
      "mode": {"const": "full"}
    }})");
  show.handler = [](const Json& args) -> drover::Result<Json> {
    return Json{{"run_id", args.value("run_id", Json())}};
  };
  tools.Add(show);
  drover::mcp::Tool fail;
  fail.name = "fail";
  fail.description = "always an error";
  fail.handler = [](const Json&) -> drover::Result<Json> {
    return drover::InvalidArgument("no");
  };
  tools.Add(fail);
  return tools;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace drover::mcp;
  static const ToolRegistry kTools = MakeTools();
  static const McpServer kServer({"drover", "0.0", "drover"}, kTools, "fuzz");
  if (size == 0) return 0;
  // The first byte says whether the session has been initialised.
  McpSession session;
  if (data[0] & 1) {
    auto init = kServer.HandleText(
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}})",
        session);
    if (!init || !session.initialized) std::abort();
  }
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::optional<Json> answer = kServer.HandleText(text, session);
  if (answer) (void)answer->dump(-1, ' ', false, Json::error_handler_t::replace);
  return 0;
}
