#include "mcp/stdio.h"

#include <string>

#include "common/strings.h"

namespace drover::mcp {

Status RunStdio(const McpServer& server, std::istream& in, std::ostream& out) {
  McpSession session;  // one client per process
  std::string line;
  while (std::getline(in, line)) {
    std::string_view text = Trim(line);  // also drops the \r of a CRLF client
    if (text.empty()) continue;
    std::optional<Json> response = server.HandleText(text, session);
    if (!response) continue;
    out << SerializeMessage(*response) << '\n';
    out.flush();
    if (!out) return Status(Code::kIo, "writing an MCP response to stdout failed");
  }
  if (in.bad()) return Status(Code::kIo, "reading MCP messages from stdin failed");
  return Status::Ok();
}

}  // namespace drover::mcp
