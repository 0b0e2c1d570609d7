#include "mcp/server.h"

#include <gtest/gtest.h>

namespace drover::mcp {
namespace {

ToolRegistry TestTools() {
  ToolRegistry r;
  r.Add({.name = "echo",
         .title = "Echo",
         .description = "Repeats the text.",
         .input_schema = Json::parse(R"({
           "type": "object",
           "properties": {"text": {"type": "string", "minLength": 1},
                          "times": {"type": "integer", "minimum": 1, "maximum": 3}},
           "required": ["text"], "additionalProperties": false})"),
         .output_schema = Json::parse(R"({
           "type": "object", "properties": {"echo": {"type": "string"}},
           "required": ["echo"], "additionalProperties": false})"),
         .handler = [](const Json& a) -> Result<Json> {
           std::string out;
           for (int i = 0; i < a.value("times", 1); ++i) out += a["text"].get<std::string>();
           return Json{{"echo", out}};
         },
         .annotations = {{"readOnlyHint", true}}});
  r.Add({.name = "fail",
         .description = "Always fails.",
         .handler = [](const Json&) -> Result<Json> {
           return FailedPrecondition("run 7 is still queued; call again once it has started");
         }});
  r.Add({.name = "wrong_shape",
         .description = "Returns a result its output schema does not allow.",
         .output_schema = {{"type", "object"}, {"required", {"count"}}},
         .handler = [](const Json&) -> Result<Json> { return Json{{"cnt", 1}}; }});
  r.Add({.name = "throws",
         .description = "Throws a JSON type error.",
         .handler = [](const Json& a) -> Result<Json> {
           return Json{{"n", a.at("missing").get<int>()}};
         }});
  r.Add({.name = "not_object",
         .description = "Returns an array.",
         .handler = [](const Json&) -> Result<Json> { return Json::array({1, 2}); }});
  return r;
}

Json Request(const Json& id, const std::string& method, Json params = Json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

Json Notification(const std::string& method) {
  return {{"jsonrpc", "2.0"}, {"method", method}};
}

Json InitializeRequest(const std::string& version, const Json& id = 1) {
  return Request(id, "initialize",
                 {{"protocolVersion", version},
                  {"capabilities", {{"roots", {{"listChanged", true}}}}},
                  {"clientInfo", {{"name", "test-client"}, {"version", "1.2.3"}}}});
}

class McpServerTest : public ::testing::Test {
 protected:
  // A message that must be answered.
  Json Send(const Json& message) {
    auto r = server_.Handle(message, session_);
    EXPECT_TRUE(r.has_value()) << message.dump();
    return r.value_or(Json());
  }
  Json Init(const std::string& version = "2025-11-25") {
    Json r = Send(InitializeRequest(version));
    EXPECT_FALSE(server_.Handle(Notification("notifications/initialized"), session_));
    return r;
  }
  Json CallTool(const std::string& name, const Json& args, const Json& id = 5) {
    return Send(Request(id, "tools/call", {{"name", name}, {"arguments", args}}));
  }
  static void ExpectError(const Json& r, const Json& id, int code, const std::string& part = "") {
    ASSERT_TRUE(r.contains("error")) << r.dump();
    EXPECT_FALSE(r.contains("result"));
    EXPECT_EQ(r["jsonrpc"], "2.0");
    EXPECT_EQ(r["id"], id) << r.dump();
    EXPECT_EQ(r["error"]["code"], code) << r.dump();
    EXPECT_NE(r["error"]["message"].get<std::string>().find(part), std::string::npos) << r.dump();
  }
  static std::string ToolErrorText(const Json& r) {
    EXPECT_EQ(r["result"].value("isError", false), true) << r.dump();
    EXPECT_FALSE(r["result"].contains("structuredContent"));
    return r["result"]["content"][0]["text"].get<std::string>();
  }

  ToolRegistry tools_ = TestTools();
  McpServer server_{{.name = "drover", .version = "0.1.0", .title = "Drover"},
                    tools_,
                    "Call echo to repeat text."};
  McpSession session_;
};

TEST_F(McpServerTest, TestToolsPassTheRegistryCheck) {
  ToolRegistry r;
  r.Add(TestTools().tools()[0]);
  EXPECT_TRUE(r.Check().ok()) << r.Check().ToString();
  r.Add(TestTools().tools()[0]);
  EXPECT_NE(r.Check().message().find("twice"), std::string::npos);
  EXPECT_EQ(r.tools().size(), 1u);
  ToolRegistry bad;
  Tool t = TestTools().tools()[0];
  t.name = "has space";
  bad.Add(t);
  EXPECT_FALSE(bad.Check().ok());
  ToolRegistry pattern;
  t = TestTools().tools()[0];
  t.input_schema["properties"]["text"]["pattern"] = "^a";
  pattern.Add(t);
  EXPECT_NE(pattern.Check().message().find("pattern"), std::string::npos);
}

TEST_F(McpServerTest, InitializeAnswersEachSupportedVersionWithItself) {
  for (const auto& version : SupportedProtocolVersions()) {
    McpSession session;
    auto r = server_.Handle(InitializeRequest(version, "init"), session);
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)["id"], "init");
    const Json& result = (*r)["result"];
    EXPECT_EQ(result["protocolVersion"], version);
    EXPECT_EQ(result["capabilities"], Json::parse(R"({"tools": {"listChanged": false}})"));
    EXPECT_EQ(result["serverInfo"]["name"], "drover");
    EXPECT_EQ(result["serverInfo"]["version"], "0.1.0");
    EXPECT_EQ(result["serverInfo"].contains("title"), version >= "2025-06-18") << version;
    EXPECT_EQ(result["instructions"], "Call echo to repeat text.");
    EXPECT_TRUE(session.initialized);
    EXPECT_FALSE(session.client_ready);
    EXPECT_EQ(session.protocol_version, version);
    EXPECT_EQ(session.client_info["name"], "test-client");
    EXPECT_TRUE(session.client_capabilities.contains("roots"));
  }
}

TEST_F(McpServerTest, InitializeWithAnUnknownVersionAnswersTheLatest) {
  Json r = Send(InitializeRequest("2099-01-01"));
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(session_.protocol_version, "2025-11-25");
  McpSession old;
  r = *server_.Handle(InitializeRequest("2024-10-07"), old);
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-11-25");
}

TEST_F(McpServerTest, InitializeNeedsAProtocolVersion) {
  ExpectError(Send(Request(1, "initialize", {{"capabilities", Json::object()}})), 1,
              kInvalidParams, "protocolVersion");
  EXPECT_FALSE(session_.initialized);
  ExpectError(Send(Request(2, "initialize", {{"protocolVersion", "2025-06-18"},
                                             {"capabilities", "all"}})),
              2, kInvalidParams, "capabilities");
}

TEST_F(McpServerTest, InitializedNotificationIsNotAnswered) {
  Send(InitializeRequest("2025-06-18"));
  EXPECT_FALSE(session_.client_ready);
  EXPECT_FALSE(server_.Handle(Notification("notifications/initialized"), session_));
  EXPECT_TRUE(session_.client_ready);
  // Other notifications, known or not, are not answered either.
  EXPECT_FALSE(server_.Handle(Notification("notifications/cancelled"), session_));
  EXPECT_FALSE(server_.Handle(Notification("no/such/thing"), session_));
}

TEST_F(McpServerTest, SecondInitializeIsRefused) {
  Init();
  ExpectError(Send(InitializeRequest("2025-11-25", 2)), 2, kInvalidRequest, "already");
  EXPECT_EQ(session_.protocol_version, "2025-11-25");
}

TEST_F(McpServerTest, PingWorksBeforeAndAfterInitialize) {
  Json r = Send(Request(9, "ping"));
  EXPECT_EQ(r, Json::parse(R"({"jsonrpc": "2.0", "id": 9, "result": {}})"));
  Json no_params = {{"jsonrpc", "2.0"}, {"id", "p"}, {"method", "ping"}};
  EXPECT_EQ(Send(no_params)["result"], Json::object());
  Init();
  EXPECT_EQ(Send(Request(10, "ping"))["result"], Json::object());
}

TEST_F(McpServerTest, RequestsBeforeInitializeAreRefused) {
  ExpectError(Send(Request(1, "tools/list")), 1, kInvalidRequest, "send initialize first");
  ExpectError(Send(Request(2, "tools/call", {{"name", "echo"}})), 2, kInvalidRequest,
              "initialize");
  // A notification before initialize is still not answered.
  EXPECT_FALSE(server_.Handle(Notification("notifications/initialized"), session_));
  EXPECT_FALSE(session_.client_ready);
}

TEST_F(McpServerTest, UnknownMethod) {
  Init();
  ExpectError(Send(Request(3, "resources/list")), 3, kMethodNotFound, "resources/list");
}

TEST_F(McpServerTest, ToolsListLatestHasTitlesAndOutputSchemas) {
  Init("2025-11-25");
  Json tools = Send(Request(2, "tools/list"))["result"]["tools"];
  ASSERT_EQ(tools.size(), 5u);
  const Json& echo = tools[0];
  EXPECT_EQ(echo["name"], "echo");
  EXPECT_EQ(echo["title"], "Echo");
  EXPECT_EQ(echo["description"], "Repeats the text.");
  EXPECT_EQ(echo["inputSchema"]["required"], Json::array({"text"}));
  EXPECT_EQ(echo["outputSchema"]["required"], Json::array({"echo"}));
  EXPECT_EQ(echo["annotations"], Json::parse(R"({"readOnlyHint": true})"));
  const Json& fail = tools[1];
  EXPECT_EQ(fail["name"], "fail");
  EXPECT_EQ(fail["inputSchema"], Json::parse(R"({"type": "object"})"));  // no arguments
  EXPECT_FALSE(fail.contains("title"));
  EXPECT_FALSE(fail.contains("outputSchema"));
  EXPECT_FALSE(fail.contains("annotations"));
}

TEST_F(McpServerTest, ToolsListFor20250326HasTitleOnlyAmongAnnotations) {
  Init("2025-03-26");
  Json echo = Send(Request(2, "tools/list"))["result"]["tools"][0];
  EXPECT_FALSE(echo.contains("title"));
  EXPECT_FALSE(echo.contains("outputSchema"));
  EXPECT_EQ(echo["annotations"], Json::parse(R"({"readOnlyHint": true, "title": "Echo"})"));
  EXPECT_TRUE(echo.contains("inputSchema"));
}

TEST_F(McpServerTest, ToolsListFor20241105HasNeither) {
  Init("2024-11-05");
  Json echo = Send(Request(2, "tools/list"))["result"]["tools"][0];
  EXPECT_EQ(echo.size(), 3u) << echo.dump();  // name, description, inputSchema
  EXPECT_TRUE(echo.contains("inputSchema"));
}

TEST_F(McpServerTest, ToolsListRefusesACursor) {
  Init();
  ExpectError(Send(Request(2, "tools/list", {{"cursor", "abc"}})), 2, kInvalidParams, "cursor");
  EXPECT_TRUE(Send(Request(3, "tools/list", {{"cursor", nullptr}})).contains("result"));
}

TEST_F(McpServerTest, ToolsCallReturnsStructuredContentAndText) {
  Init();
  Json r = CallTool("echo", {{"text", "hi"}, {"times", 2}});
  EXPECT_EQ(r["id"], 5);
  const Json& result = r["result"];
  EXPECT_EQ(result["structuredContent"], Json::parse(R"({"echo": "hihi"})"));
  ASSERT_EQ(result["content"].size(), 1u);
  EXPECT_EQ(result["content"][0]["type"], "text");
  EXPECT_EQ(Json::parse(result["content"][0]["text"].get<std::string>()),
            result["structuredContent"]);
  EXPECT_FALSE(result.value("isError", false));
}

TEST_F(McpServerTest, ToolsCallForOlderVersionsIsTextOnly) {
  Init("2025-03-26");
  Json result = CallTool("echo", {{"text", "hi"}})["result"];
  EXPECT_FALSE(result.contains("structuredContent"));
  EXPECT_EQ(Json::parse(result["content"][0]["text"].get<std::string>()),
            Json::parse(R"({"echo": "hi"})"));
}

TEST_F(McpServerTest, InvalidArgumentsAreAToolErrorTheModelCanFix) {
  Init();
  EXPECT_EQ(ToolErrorText(CallTool("echo", {{"text", 5}})),
            "invalid arguments for echo: arguments.text: expected a string, got 5");
  EXPECT_EQ(ToolErrorText(CallTool("echo", Json::object())),
            "invalid arguments for echo: arguments.text: missing (it is required)");
  EXPECT_EQ(ToolErrorText(CallTool("echo", {{"txt", "hi"}})),
            "invalid arguments for echo: arguments.txt: unknown field (did you mean \"text\"?)");
  EXPECT_EQ(ToolErrorText(CallTool("echo", {{"text", "hi"}, {"times", 9}})),
            "invalid arguments for echo: arguments.times: must be at most 3, got 9");
  EXPECT_EQ(ToolErrorText(CallTool("echo", {{"text", ""}})),
            "invalid arguments for echo: arguments.text: must not be empty");
  // No arguments at all is an empty object.
  Json no_args = Request(6, "tools/call", {{"name", "echo"}});
  EXPECT_NE(ToolErrorText(Send(no_args)).find("arguments.text: missing"), std::string::npos);
}

TEST_F(McpServerTest, UnknownToolIsAProtocolError) {
  Init();
  ExpectError(CallTool("ecko", {{"text", "hi"}}, "x"), "x", kInvalidParams,
              "unknown tool \"ecko\" (did you mean echo?)");
  ExpectError(CallTool("zzzzzzzzzz", Json::object()), 5, kInvalidParams, "tools: echo, fail");
}

TEST_F(McpServerTest, MalformedToolsCallParams) {
  Init();
  ExpectError(Send(Request(1, "tools/call", Json::object())), 1, kInvalidParams, "params.name");
  ExpectError(Send(Request(2, "tools/call", {{"name", 3}})), 2, kInvalidParams, "params.name");
  ExpectError(Send(Request(3, "tools/call", {{"name", "echo"}, {"arguments", "hi"}})), 3,
              kInvalidParams, "params.arguments");
  ExpectError(Send({{"jsonrpc", "2.0"}, {"id", 4}, {"method", "tools/call"}, {"params", {1}}}), 4,
              kInvalidParams, "params must be an object");
}

TEST_F(McpServerTest, HandlerErrorIsAToolErrorWithItsMessage) {
  Init();
  EXPECT_EQ(ToolErrorText(CallTool("fail", Json::object())),
            "run 7 is still queued; call again once it has started");
}

TEST_F(McpServerTest, ResultNotMatchingItsOutputSchemaIsADroverBug) {
  Init();
  std::string text = ToolErrorText(CallTool("wrong_shape", Json::object()));
  EXPECT_NE(text.find("drover bug"), std::string::npos) << text;
  EXPECT_NE(text.find("result.count: missing"), std::string::npos) << text;
  text = ToolErrorText(CallTool("not_object", Json::object()));
  EXPECT_NE(text.find("drover bug: tool not_object returned array"), std::string::npos) << text;
}

TEST_F(McpServerTest, ThrowingHandlerIsADroverBug) {
  Init();
  std::string text = ToolErrorText(CallTool("throws", Json::object()));
  EXPECT_NE(text.find("drover bug: tool throws failed unexpectedly"), std::string::npos) << text;
}

TEST_F(McpServerTest, IdsAreEchoedExactly) {
  Init();
  for (const Json& id : {Json(0), Json(-7), Json("abc"), Json(""), Json(9007199254740993LL),
                         Json(1.5)}) {
    Json r = Send(Request(id, "ping"));
    EXPECT_EQ(r["id"], id) << r.dump();
    EXPECT_EQ(r["id"].type(), id.type());
    EXPECT_EQ(r["result"], Json::object());
  }
  Json r = Send(Request("0", "tools/list"));
  EXPECT_EQ(r["id"], "0");
}

TEST_F(McpServerTest, NullOrStructuredIdIsAnInvalidRequest) {
  Init();
  ExpectError(Send(Request(nullptr, "ping")), nullptr, kInvalidRequest, "not null");
  ExpectError(Send(Request(Json::object(), "ping")), nullptr, kInvalidRequest, "id");
  ExpectError(Send(Request(Json::array({1}), "ping")), nullptr, kInvalidRequest, "id");
}

TEST_F(McpServerTest, WrongJsonRpcVersionIsAnInvalidRequest) {
  Json r = Request(4, "ping");
  r["jsonrpc"] = "1.0";
  ExpectError(Send(r), 4, kInvalidRequest, "jsonrpc");
  r.erase("jsonrpc");
  ExpectError(Send(r), 4, kInvalidRequest, "jsonrpc");
  ExpectError(Send(Json(5)), nullptr, kInvalidRequest, "object");
  ExpectError(Send(Json{{"jsonrpc", "2.0"}, {"id", 1}}), 1, kInvalidRequest, "no method");
  ExpectError(Send(Json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", 7}}), 1, kInvalidRequest,
              "method");
}

TEST_F(McpServerTest, ResponsesFromTheClientAreNotAnswered) {
  Init();
  EXPECT_FALSE(server_.Handle(Json::parse(R"({"jsonrpc":"2.0","id":1,"result":{}})"), session_));
  EXPECT_FALSE(server_.Handle(
      Json::parse(R"({"jsonrpc":"2.0","id":"s1","error":{"code":-1,"message":"no"}})"),
      session_));
}

TEST_F(McpServerTest, MalformedJsonIsAParseErrorWithIdNull) {
  auto r = server_.HandleText(R"({"jsonrpc": "2.0", "id": 1, "method": "ping")", session_);
  ASSERT_TRUE(r);
  ExpectError(*r, nullptr, kParseError, "parse error");
  EXPECT_EQ((*r)["error"]["message"].get<std::string>().find("[json.exception"),
            std::string::npos);
  r = server_.HandleText("", session_);
  ASSERT_TRUE(r);
  ExpectError(*r, nullptr, kParseError);
  // Found by fuzz_mcp: a number past a double is nlohmann's out_of_range, which escaped the
  // parse_error handler and aborted drover mcp.
  r = server_.HandleText(R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e7883034409}})",
                         session_);
  ASSERT_TRUE(r);
  ExpectError(*r, nullptr, kParseError, "parse error");
  r = server_.HandleText(R"({"jsonrpc":"2.0","id":0,"method":"ping"})", session_);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["id"], 0);
  EXPECT_EQ((*r)["result"], Json::object());
}

TEST_F(McpServerTest, BatchesIn20250326) {
  Init("2025-03-26");
  Json batch = Json::array({Request(1, "ping"), Notification("notifications/cancelled"),
                            Request("two", "tools/call", {{"name", "echo"},
                                                           {"arguments", {{"text", "x"}}}}),
                            Request(3, "nope")});
  Json r = Send(batch);
  ASSERT_TRUE(r.is_array()) << r.dump();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]["id"], 1);
  EXPECT_EQ(r[1]["id"], "two");
  EXPECT_EQ(r[1]["result"]["content"][0]["text"], R"({"echo":"x"})");
  EXPECT_EQ(r[2]["error"]["code"], kMethodNotFound);
  // Only notifications: nothing to answer.
  EXPECT_FALSE(server_.Handle(Json::array({Notification("notifications/initialized"),
                                            Notification("notifications/cancelled")}),
                              session_));
  ExpectError(Send(Json::array()), nullptr, kInvalidRequest, "empty batch");
  // initialize must not be batched; the rest of the batch is still answered.
  r = Send(Json::array({InitializeRequest("2025-03-26", 7), 42, Request(8, "ping")}));
  ASSERT_EQ(r.size(), 3u);
  ExpectError(r[0], 7, kInvalidRequest, "batch");
  ExpectError(r[1], nullptr, kInvalidRequest);
  EXPECT_EQ(r[2]["result"], Json::object());
}

TEST_F(McpServerTest, BatchesOutside20250326AreRefused) {
  for (const char* version : {"2025-11-25", "2025-06-18", "2024-11-05"}) {
    McpSession session;
    server_.Handle(InitializeRequest(version), session);
    auto r = server_.Handle(Json::array({Request(1, "ping")}), session);
    ASSERT_TRUE(r);
    ExpectError(*r, nullptr, kInvalidRequest, "batches");
  }
  // Before initialize too (initialize cannot be batched).
  ExpectError(Send(Json::array({InitializeRequest("2025-03-26")})), nullptr, kInvalidRequest,
              "initialize");
  EXPECT_FALSE(session_.initialized);
}

TEST(SerializeMessageTest, InvalidUtf8IsReplacedNotThrown) {
  Json m = {{"text", std::string("ok \xff\xfe")}};
  std::string s;
  EXPECT_NO_THROW(s = SerializeMessage(m));
  EXPECT_EQ(s.find('\n'), std::string::npos);
  EXPECT_NO_THROW(Json::parse(s));
}

}  // namespace
}  // namespace drover::mcp
