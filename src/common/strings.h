#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace drover {

std::vector<std::string> Split(std::string_view s, char sep);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
std::string_view Trim(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(std::string_view a, std::string_view b);
// The closest candidate within a small distance, or nothing.
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates);

// Quotes a word for /bin/sh: 'it'"'"'s'.
std::string ShellQuote(std::string_view word);
// Text for HTML or XML content and attribute values: & < > " ' escaped, the C0 controls XML
// cannot carry dropped (tab and newlines kept), malformed UTF-8 replaced by U+FFFD.
std::string HtmlEscape(std::string_view text);
// The UTF-8 bytes of one code point.
void AppendUtf8(std::string& out, uint32_t cp);

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF included), or npos when all of it is.
size_t FirstInvalidUtf8(std::string_view text);
// Splits a command line into words the way sh does for quotes and backslashes (no expansion).
Result<std::vector<std::string>> SplitCommandLine(std::string_view line);

// "6GiB", "512MiB", "1.5GB", "1024" (bytes). Binary (KiB..TiB) and decimal (KB..TB) units.
Result<int64_t> ParseBytes(std::string_view text);
std::string FormatBytes(int64_t bytes);  // "6GiB", "1.5GiB", "512MiB"
// "90s", "30m", "2h", "1h30m", "500ms", or a bare number of seconds.
Result<int64_t> ParseDurationMs(std::string_view text);
std::string FormatDuration(int64_t ms);  // "1h02m", "3m05s", "4.2s"
// A shell variable name: letters, digits and '_', not starting with a digit.
bool IsShellName(std::string_view name);
// "1 run", "2 runs", "0 runs"; `plural` when adding an s is wrong ("1 retry", "2 retries").
std::string Count(int64_t n, std::string_view singular, std::string_view plural = "");

// The last `lines` non-empty lines of `text` (trailing blanks and CRs dropped), at most `bytes`:
// cut at the front, never inside a UTF-8 character, marked with "...". What a failed run said
// last (its exception) kept with its attempt.
std::string LastLines(std::string_view text, int lines, size_t bytes);

}  // namespace drover
