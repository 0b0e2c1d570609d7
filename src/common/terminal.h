#pragma once
// Text that came from a run or a request (a metric name, a logged hyper-parameter, the last line
// of a failure, a request path in the audit log) made safe to print on a terminal. A terminal
// obeys escape sequences in what it prints: ESC [2J clears another user's screen, ESC ] 0 sets its
// title, ESC ] 52 writes its clipboard, a carriage return writes over an audit line. Every CLI
// view prints stored text through these (docs/security.md, "Terminal output").
#include <string>
#include <string_view>

namespace drover {

// `text` with every control character shown visibly instead of sent raw: C0 controls (newline and
// tab kept), DEL and bytes that are not UTF-8 as \xNN (ESC is \x1b); the C1 controls (U+0080 to
// U+009F: U+009B is a CSI on its own) and the bidirectional overrides, which can reorder what is
// shown, as \uNNNN. Anything else, UTF-8 included, stays as it is. A backslash is not escaped, so
// escaping twice changes nothing.
std::string TerminalText(std::string_view text);
// The same for one line (a table cell, a name): newline and tab escaped too (\x0a, \x09).
std::string TerminalLine(std::string_view text);

}  // namespace drover
