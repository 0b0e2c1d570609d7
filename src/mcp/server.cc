#include "mcp/server.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "common/strings.h"
#include "mcp/schema.h"

namespace drover::mcp {
namespace {

// Protocol versions are dates, so they compare as strings.
bool AtLeast(const std::string& version, std::string_view since) { return version >= since; }

// 2025-06-18 added tool titles, outputSchema and structuredContent.
bool HasStructuredOutput(const std::string& version) { return AtLeast(version, "2025-06-18"); }
// 2025-03-26 added tool annotations.
bool HasAnnotations(const std::string& version) { return AtLeast(version, "2025-03-26"); }

Json TextContent(std::string text) {
  return Json::array({{{"type", "text"}, {"text", std::move(text)}}});
}

// A failed tool call, told to the model (not a JSON-RPC error, which the model would not see).
Json ToolError(std::string text) {
  return {{"content", TextContent(std::move(text))}, {"isError", true}};
}

// Strips nlohmann's "[json.exception.parse_error.101] " prefix: the rest is the useful part.
std::string ParseErrorText(const std::exception& e) {
  std::string_view what = e.what();
  if (auto pos = what.find("] "); what.substr(0, 1) == "[" && pos != std::string_view::npos) {
    what.remove_prefix(pos + 2);
  }
  return std::string(what);
}

Result<Json> RunHandler(const Tool& tool, const Json& arguments) {
  try {
    return tool.handler(arguments);
  } catch (const std::exception& e) {
    // Handlers report errors as Status; an exception (a JSON type error, bad_alloc) is a bug.
    return Internal(fmt::format("drover bug: tool {} failed unexpectedly ({}); please report it",
                                tool.name, e.what()));
  }
}

}  // namespace

bool IsSupportedProtocolVersion(std::string_view version) {
  const auto& v = SupportedProtocolVersions();
  return std::find(v.begin(), v.end(), version) != v.end();
}

Json RpcResult(const Json& id, Json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json RpcError(const Json& id, int code, std::string_view message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

std::string SerializeMessage(const Json& message) {
  return message.dump(-1, ' ', false, Json::error_handler_t::replace);
}

McpServer::McpServer(Implementation info, const ToolRegistry& tools, std::string instructions)
    : info_(std::move(info)), tools_(tools), instructions_(std::move(instructions)) {}

std::optional<Json> McpServer::HandleText(std::string_view text, McpSession& session) const {
  Json message;
  try {
    message = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return RpcError(nullptr, kParseError, "parse error: " + ParseErrorText(e));
  } catch (const Json::exception& e) {
    // A number past a double ("1e7883034409") is out_of_range, not a parse_error.
    return RpcError(nullptr, kParseError, std::string("parse error: ") + e.what());
  }
  return Handle(message, session);
}

std::optional<Json> McpServer::Handle(const Json& message, McpSession& session) const {
  if (!message.is_array()) return HandleOne(message, session, /*in_batch=*/false);
  // Batches exist only in 2025-03-26 (2025-06-18 removed them), and never carry initialize.
  if (!session.initialized) {
    return RpcError(nullptr, kInvalidRequest,
                    "send initialize first, on its own (it cannot be part of a batch)");
  }
  if (session.protocol_version != "2025-03-26") {
    return RpcError(nullptr, kInvalidRequest,
                    fmt::format("JSON-RPC batches are not part of protocol version {}; send "
                                "one message at a time",
                                session.protocol_version));
  }
  if (message.empty()) return RpcError(nullptr, kInvalidRequest, "empty batch");
  Json responses = Json::array();
  for (const auto& m : message) {
    if (auto r = HandleOne(m, session, /*in_batch=*/true)) responses.push_back(std::move(*r));
  }
  if (responses.empty()) return std::nullopt;  // only notifications: nothing to answer
  return responses;
}

std::optional<Json> McpServer::HandleOne(const Json& message, McpSession& session,
                                         bool in_batch) const {
  if (!message.is_object()) {
    return RpcError(nullptr, kInvalidRequest, "a JSON-RPC message must be an object");
  }
  auto id_it = message.find("id");
  bool has_id = id_it != message.end();
  // Ids are echoed exactly (0, negative, strings); anything else cannot be echoed.
  bool id_ok = has_id && (id_it->is_string() || id_it->is_number());
  Json reply_id = id_ok ? *id_it : Json(nullptr);
  try {
    auto version = message.find("jsonrpc");
    if (version == message.end() || *version != "2.0") {
      return RpcError(reply_id, kInvalidRequest, "jsonrpc must be \"2.0\"");
    }
    auto method = message.find("method");
    if (method == message.end()) {
      // A response from the client: the server sends no requests, so there is nothing to match.
      if (has_id && (message.contains("result") || message.contains("error"))) {
        return std::nullopt;
      }
      return RpcError(reply_id, kInvalidRequest, "not a JSON-RPC request: no method");
    }
    if (!method->is_string()) {
      return RpcError(reply_id, kInvalidRequest, "method must be a string");
    }
    const std::string& name = method->get_ref<const std::string&>();
    if (!has_id) {
      // A notification: never answered, whatever it says.
      if (name == "notifications/initialized" && session.initialized) session.client_ready = true;
      return std::nullopt;
    }
    if (!id_ok) {
      return RpcError(nullptr, kInvalidRequest,
                      fmt::format("a request id must be a string or a number, not {}",
                                  id_it->is_null() ? "null" : id_it->type_name()));
    }
    static const Json kNoParams = Json::object();
    auto params = message.find("params");
    if (params != message.end() && !params->is_object()) {
      return RpcError(reply_id, kInvalidParams, "params must be an object");
    }
    return Dispatch(name, params != message.end() ? *params : kNoParams, reply_id, session,
                    in_batch);
  } catch (const std::exception& e) {
    return RpcError(reply_id, kInternalError, fmt::format("drover bug: {}", e.what()));
  }
}

Json McpServer::Dispatch(const std::string& method, const Json& params, const Json& id,
                         McpSession& session, bool in_batch) const {
  if (method == "initialize") return Initialize(params, id, session, in_batch);
  if (method == "ping") return RpcResult(id, Json::object());  // allowed before initialize too
  if (!session.initialized) return RpcError(id, kInvalidRequest, "send initialize first");
  if (method == "tools/list") return ListTools(params, id, session);
  if (method == "tools/call") return CallTool(params, id, session);
  return RpcError(id, kMethodNotFound,
                  fmt::format("method not found: {} (this server offers initialize, ping, "
                              "tools/list and tools/call)",
                              method));
}

Json McpServer::Initialize(const Json& params, const Json& id, McpSession& session,
                           bool in_batch) const {
  if (in_batch) return RpcError(id, kInvalidRequest, "initialize cannot be part of a batch");
  if (session.initialized) {
    return RpcError(id, kInvalidRequest,
                    "already initialized; start a new session to initialize again");
  }
  auto requested = params.find("protocolVersion");
  if (requested == params.end() || !requested->is_string()) {
    return RpcError(id, kInvalidParams, "params.protocolVersion: expected a string");
  }
  for (const char* field : {"capabilities", "clientInfo"}) {
    auto it = params.find(field);
    if (it != params.end() && !it->is_object()) {
      return RpcError(id, kInvalidParams, fmt::format("params.{}: expected an object", field));
    }
  }
  // The client's version when we speak it; otherwise our latest, and the client decides whether
  // it can go on with that.
  std::string version = requested->get<std::string>();
  if (!IsSupportedProtocolVersion(version)) version = kLatestProtocolVersion;
  session.initialized = true;
  session.protocol_version = version;
  session.client_info = params.value("clientInfo", Json::object());
  session.client_capabilities = params.value("capabilities", Json::object());

  Json server_info = {{"name", info_.name}, {"version", info_.version}};
  if (HasStructuredOutput(version) && !info_.title.empty()) server_info["title"] = info_.title;
  Json result = {{"protocolVersion", version},
                 {"capabilities", {{"tools", {{"listChanged", false}}}}},
                 {"serverInfo", std::move(server_info)}};
  if (!instructions_.empty()) result["instructions"] = instructions_;
  return RpcResult(id, std::move(result));
}

Json McpServer::ListTools(const Json& params, const Json& id, const McpSession& session) const {
  // Every tool fits in one page, so no cursor is ever handed out and none is valid.
  if (auto cursor = params.find("cursor"); cursor != params.end() && !cursor->is_null()) {
    return RpcError(id, kInvalidParams, "invalid cursor: tools/list returns every tool at once");
  }
  const std::string& version = session.protocol_version;
  Json list = Json::array();
  for (const auto& t : tools_.tools()) {
    Json tool = {{"name", t.name}, {"description", t.description}};
    tool["inputSchema"] = t.input_schema.is_null() ? Json{{"type", "object"}} : t.input_schema;
    Json annotations = t.annotations.is_object() ? t.annotations : Json();
    if (HasStructuredOutput(version)) {
      if (!t.title.empty()) tool["title"] = t.title;
      if (!t.output_schema.is_null()) tool["outputSchema"] = t.output_schema;
    } else if (HasAnnotations(version) && !t.title.empty()) {
      // 2025-03-26 had the title only among the annotations.
      if (annotations.is_null()) annotations = Json::object();
      if (!annotations.contains("title")) annotations["title"] = t.title;
    }
    if (HasAnnotations(version) && !annotations.is_null()) tool["annotations"] = annotations;
    list.push_back(std::move(tool));
  }
  return RpcResult(id, {{"tools", std::move(list)}});
}

Json McpServer::CallTool(const Json& params, const Json& id, const McpSession& session) const {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    return RpcError(id, kInvalidParams, "params.name: expected the tool's name (a string)");
  }
  static const Json kNoArguments = Json::object();
  auto args_it = params.find("arguments");
  if (args_it != params.end() && !args_it->is_null() && !args_it->is_object()) {
    return RpcError(id, kInvalidParams, "params.arguments: expected an object");
  }
  const Json& arguments =
      args_it != params.end() && args_it->is_object() ? *args_it : kNoArguments;

  const std::string& tool_name = name->get_ref<const std::string&>();
  const Tool* tool = tools_.Find(tool_name);
  if (!tool) {
    // A protocol error per the spec: the client asked for something that is not there.
    std::string hint;
    if (auto m = ClosestMatch(tool_name, tools_.Names())) {
      hint = fmt::format(" (did you mean {}?)", *m);
    } else {
      hint = fmt::format(" (tools: {})", Join(tools_.Names(), ", "));
    }
    return RpcError(id, kInvalidParams, fmt::format("unknown tool \"{}\"{}", tool_name, hint));
  }
  // Bad arguments are a tool error, not a protocol error, so the model sees what to fix.
  if (!tool->input_schema.is_null()) {
    if (Status st = ValidateJson(arguments, tool->input_schema, "arguments"); !st.ok()) {
      return RpcResult(id, ToolError(fmt::format("invalid arguments for {}: {}", tool->name,
                                                 st.message())));
    }
  }
  if (!tool->handler) {
    return RpcResult(id, ToolError(fmt::format("drover bug: tool {} has no handler", tool->name)));
  }
  Result<Json> result = RunHandler(*tool, arguments);
  if (!result.ok()) return RpcResult(id, ToolError(result.status().message()));
  if (!result->is_object()) {
    return RpcResult(id, ToolError(fmt::format(
                             "drover bug: tool {} returned {} instead of an object; please "
                             "report it",
                             tool->name, result->type_name())));
  }
  // Clients validate structuredContent against outputSchema and reject a mismatch, so a result
  // that does not match is refused here, where the message can say whose bug it is.
  if (!tool->output_schema.is_null()) {
    if (Status st = ValidateJson(*result, tool->output_schema, "result"); !st.ok()) {
      return RpcResult(id, ToolError(fmt::format(
                               "drover bug: the result of {} does not match its output schema "
                               "({}); please report it",
                               tool->name, st.message())));
    }
  }
  // The JSON as text too: older clients (and some newer ones) read only the content.
  Json reply = {{"content", TextContent(SerializeMessage(*result))}};
  if (HasStructuredOutput(session.protocol_version)) reply["structuredContent"] = *result;
  return RpcResult(id, std::move(reply));
}

}  // namespace drover::mcp
