#include "mcp/stdio.h"

#include <gtest/gtest.h>

#include <sstream>

namespace drover::mcp {
namespace {

ToolRegistry EchoTools() {
  ToolRegistry r;
  r.Add({.name = "echo",
         .description = "Repeats the text.",
         .input_schema = {{"type", "object"},
                          {"properties", {{"text", {{"type", "string"}}}}},
                          {"required", {"text"}}},
         .handler = [](const Json& a) -> Result<Json> { return Json{{"echo", a["text"]}}; }});
  return r;
}

std::vector<Json> Lines(const std::string& out) {
  std::vector<Json> lines;
  std::istringstream s(out);
  std::string line;
  while (std::getline(s, line)) lines.push_back(Json::parse(line));  // every line is JSON
  return lines;
}

TEST(RunStdioTest, AnswersEachRequestOnItsOwnLine) {
  ToolRegistry tools = EchoTools();
  McpServer server({.name = "drover", .version = "0.1.0"}, tools, "");
  std::istringstream in(
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
      "\n"
      "\n"
      "   \r\n"
      R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
      "\r\n"
      R"({"jsonrpc":"2.0","id":"a","method":"tools/list"})"
      "\n"
      "this is not json\n"
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"line\nbreak"}}})"
      "\n"
      R"({"jsonrpc":"2.0","id":3,"method":"ping"})");  // the last line has no newline
  std::ostringstream out;
  ASSERT_TRUE(RunStdio(server, in, out).ok());
  std::vector<Json> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 5u) << out.str();
  EXPECT_EQ(lines[0]["id"], 0);
  EXPECT_EQ(lines[0]["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(lines[1]["id"], "a");
  EXPECT_EQ(lines[1]["result"]["tools"][0]["name"], "echo");
  EXPECT_EQ(lines[2]["id"], nullptr);
  EXPECT_EQ(lines[2]["error"]["code"], kParseError);
  EXPECT_EQ(lines[3]["id"], 2);
  // A newline inside a string is escaped, so the message stays on one line.
  EXPECT_EQ(lines[3]["result"]["structuredContent"]["echo"], "line\nbreak");
  EXPECT_EQ(lines[4]["id"], 3);
}

TEST(RunStdioTest, EmptyInputEndsQuietly) {
  ToolRegistry tools;
  McpServer server({.name = "drover", .version = "0.1.0"}, tools, "");
  std::istringstream in("");
  std::ostringstream out;
  EXPECT_TRUE(RunStdio(server, in, out).ok());
  EXPECT_EQ(out.str(), "");
}

TEST(RunStdioTest, WriteFailureIsAnError) {
  ToolRegistry tools;
  McpServer server({.name = "drover", .version = "0.1.0"}, tools, "");
  std::istringstream in(R"({"jsonrpc":"2.0","id":1,"method":"ping"})" "\n");
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  Status st = RunStdio(server, in, out);
  EXPECT_EQ(st.code(), Code::kIo);
}

}  // namespace
}  // namespace drover::mcp
