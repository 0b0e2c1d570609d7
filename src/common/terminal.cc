#include "common/terminal.h"

#include <fmt/format.h>

#include "common/strings.h"

namespace drover {
namespace {

// Code points a terminal must not be handed raw: the C1 controls, and the bidirectional marks,
// embeddings, overrides and isolates, which reorder the text around them on screen.
bool IsHidden(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

// The length of the UTF-8 sequence led by `lead`, 0 when it cannot lead one.
size_t SequenceLength(unsigned char lead) {
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

std::string Escape(std::string_view text, bool one_line) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      const bool kept = !one_line && (c == '\n' || c == '\t');
      if ((c < 0x20 && !kept) || c == 0x7F) {
        out += fmt::format("\\x{:02x}", c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const size_t n = SequenceLength(c);
    if (n == 0 || i + n > text.size() ||
        FirstInvalidUtf8(text.substr(i, n)) != std::string_view::npos) {
      // Not UTF-8: a lone byte 0x9b is a CSI to a terminal that reads 8-bit controls.
      out += fmt::format("\\x{:02x}", c);
      ++i;
      continue;
    }
    uint32_t cp = c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    if (IsHidden(cp)) {
      out += fmt::format("\\u{:04x}", cp);
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace

std::string TerminalText(std::string_view text) { return Escape(text, false); }

std::string TerminalLine(std::string_view text) { return Escape(text, true); }

}  // namespace drover
