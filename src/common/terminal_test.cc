#include "common/terminal.h"

#include <gtest/gtest.h>

namespace drover {
namespace {

// No byte a terminal reads as a control may survive: C0 (but newline and tab in TerminalText),
// DEL, and the C1 range whether sent as UTF-8 (C2 80..C2 9F) or as a lone 8-bit byte.
bool HasRawControl(const std::string& s, bool one_line) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\t') {
      if (one_line) return true;
      continue;
    }
    if (c < 0x20 || c == 0x7F) return true;
    if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      return true;
    }
  }
  return false;
}

TEST(Terminal, EscapeSequencesAreShownNotSent) {
  // The red team's probes: clear the screen, set the title, write the clipboard (OSC 52).
  EXPECT_EQ(TerminalLine("loss\x1b[2J"), "loss\\x1b[2J");
  EXPECT_EQ(TerminalLine("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
  EXPECT_EQ(TerminalLine("\x1b]52;c;ZWNobyBvd25lZA==\x1b\\"), "\\x1b]52;c;ZWNobyBvd25lZA==\\x1b\\");
  // A carriage return would write over the line; backspace and DEL erase what came before.
  EXPECT_EQ(TerminalLine("ok\rFAILED"), "ok\\x0dFAILED");
  EXPECT_EQ(TerminalLine("a\bb\x7f"), "a\\x08b\\x7f");
  EXPECT_EQ(TerminalLine(std::string("nul\0byte", 8)), "nul\\x00byte");
}

TEST(Terminal, C1ControlsAndStrayBytesAreEscaped) {
  // U+009B (CSI) as UTF-8, and a lone 0x9b byte (CSI to an 8-bit terminal).
  EXPECT_EQ(TerminalLine("x\xc2\x9b" "2Jy"), "x\\u009b2Jy");
  EXPECT_EQ(TerminalLine("x\x9b" "2Jy"), "x\\x9b2Jy");
  EXPECT_EQ(TerminalLine("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(TerminalLine("cut \xe2\x82"), "cut \\xe2\\x82");  // a sequence cut short
  EXPECT_EQ(TerminalLine("\xc0\xaf"), "\\xc0\\xaf");          // an overlong '/'
  // A right-to-left override would show "exe.txt" for "txt.exe".
  EXPECT_EQ(TerminalLine("a\xe2\x80\xae" "b"), "a\\u202eb");
}

TEST(Terminal, OrdinaryTextIsUnchanged) {
  for (const std::string s : {"val_acc", "lr=0.001 batch_size=64", "résumé 训练 损失 🚀",
                              "C:\\path\\x1b (a backslash is text)", ""}) {
    EXPECT_EQ(TerminalLine(s), s);
    EXPECT_EQ(TerminalText(s), s);
  }
}

TEST(Terminal, NewlinesAndTabsAreKeptOnlyInText) {
  EXPECT_EQ(TerminalText("Traceback:\n\tline 3\n"), "Traceback:\n\tline 3\n");
  EXPECT_EQ(TerminalLine("a\nb\tc"), "a\\x0ab\\x09c");
  EXPECT_EQ(TerminalText("a\r\n"), "a\\x0d\n");
}

TEST(Terminal, EveryByteIsSafeAndEscapingTwiceChangesNothing) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  all += "\xc2\x80\xc2\x9f\xc2\xa0";  // C1 as UTF-8, then NBSP (kept)
  const std::string line = TerminalLine(all);
  const std::string text = TerminalText(all);
  EXPECT_FALSE(HasRawControl(line, true)) << line;
  EXPECT_FALSE(HasRawControl(text, false)) << text;
  EXPECT_NE(line.find("\xc2\xa0"), std::string::npos);
  EXPECT_EQ(TerminalLine(line), line);
  EXPECT_EQ(TerminalText(text), text);
}

}  // namespace
}  // namespace drover
