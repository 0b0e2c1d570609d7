#include "common/strings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace drover {

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string ShellQuote(std::string_view word) {
  if (!word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) ||
               std::string_view("_-./=:,+@%").find(c) != std::string_view::npos;
      })) {
    return std::string(word);
  }
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\"'\"'";
    else
      out += c;
  }
  out += "'";
  return out;
}

Result<std::vector<std::string>> SplitCommandLine(std::string_view line) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '\'') {
      size_t end = line.find('\'', i + 1);
      if (end == std::string_view::npos) {
        return InvalidArgument("unterminated single quote in command; close the quote");
      }
      cur += line.substr(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size() &&
            std::string_view("\"\\$`").find(line[j + 1]) != std::string_view::npos) {
          ++j;
        }
        cur += line[j];
      }
      if (j >= line.size()) {
        return InvalidArgument("unterminated double quote in command; close the quote");
      }
      i = j;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      cur += line[++i];
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(cur));
  if (words.empty()) return InvalidArgument("command is empty; give the program to run");
  return words;
}

namespace {
struct Unit {
  std::string_view name;
  double factor;
};
}  // namespace

Result<int64_t> ParseBytes(std::string_view text) {
  static const Unit kUnits[] = {{"TiB", 1024.0 * 1024 * 1024 * 1024},
                                {"GiB", 1024.0 * 1024 * 1024},
                                {"MiB", 1024.0 * 1024},
                                {"KiB", 1024.0},
                                {"TB", 1e12},
                                {"GB", 1e9},
                                {"MB", 1e6},
                                {"KB", 1e3},
                                {"kB", 1e3},
                                {"B", 1.0},
                                {"", 1.0}};
  std::string_view t = Trim(text);
  for (const auto& u : kUnits) {
    if (t.size() < u.name.size() || t.substr(t.size() - u.name.size()) != u.name) continue;
    std::string num(Trim(t.substr(0, t.size() - u.name.size())));
    if (num.empty()) break;
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size() || !(v >= 0) || std::isinf(v)) break;
    // Checked before it is converted: past int64 the conversion would wrap to a negative size
    // that passes every "fits" check.
    constexpr double kMost = 4611686018427387904.0;  // 4 EiB
    if (v * u.factor > kMost) {
      return InvalidArgument(fmt::format(
          "'{}' is too large a size; the most drover takes is 4EiB (write e.g. 80GiB)", text));
    }
    return static_cast<int64_t>(std::llround(v * u.factor));
  }
  return InvalidArgument(fmt::format(
      "'{}' is not a size; write a number with a unit, such as 6GiB, 512MiB or 8GB", text));
}

std::string Count(int64_t n, std::string_view singular, std::string_view plural) {
  std::string out = std::to_string(n) + " ";
  if (n == 1) return out.append(singular);
  if (!plural.empty()) return out.append(plural);
  return out.append(singular).append("s");
}

std::string FormatBytes(int64_t bytes) {
  static const Unit kUnits[] = {{"TiB", 1024.0 * 1024 * 1024 * 1024},
                                {"GiB", 1024.0 * 1024 * 1024},
                                {"MiB", 1024.0 * 1024},
                                {"KiB", 1024.0}};
  for (const auto& u : kUnits) {
    if (bytes >= u.factor) {
      double v = bytes / u.factor;
      if (std::fabs(v - std::round(v)) < 1e-9) return fmt::format("{}{}", std::llround(v), u.name);
      return fmt::format("{:.1f}{}", v, u.name);
    }
  }
  return fmt::format("{}B", bytes);
}

Result<int64_t> ParseDurationMs(std::string_view text) {
  std::string t(Trim(text));
  if (t.empty()) return InvalidArgument("empty duration; write e.g. 90s, 30m or 2h");
  char* end = nullptr;
  // A year is far beyond any timeout or backoff, and keeps every cast below well defined.
  constexpr double kMaxMs = 365.0 * 86'400'000;
  auto too_long = [&] {
    return InvalidArgument(fmt::format("'{}' is too long a duration; the most is a year", text));
  };
  double plain = std::strtod(t.c_str(), &end);
  if (end == t.c_str() + t.size() && plain >= 0) {
    if (!std::isfinite(plain) || plain * 1000 > kMaxMs) return too_long();
    return static_cast<int64_t>(plain * 1000);
  }
  int64_t total = 0;
  size_t i = 0;
  while (i < t.size()) {
    size_t j = i;
    while (j < t.size() && (std::isdigit(static_cast<unsigned char>(t[j])) || t[j] == '.')) ++j;
    if (j == i) break;
    double v = std::strtod(t.substr(i, j - i).c_str(), nullptr);
    size_t k = j;
    while (k < t.size() && std::isalpha(static_cast<unsigned char>(t[k]))) ++k;
    std::string unit = t.substr(j, k - j);
    double f = 0;
    if (unit == "ms")
      f = 1;
    else if (unit == "s")
      f = 1000;
    else if (unit == "m" || unit == "min")
      f = 60'000;
    else if (unit == "h")
      f = 3'600'000;
    else if (unit == "d")
      f = 86'400'000;
    else
      break;
    if (!std::isfinite(v) || v * f > kMaxMs || total + v * f > kMaxMs) return too_long();
    total += static_cast<int64_t>(v * f);
    i = k;
  }
  if (i != t.size()) {
    return InvalidArgument(
        fmt::format("'{}' is not a duration; write e.g. 500ms, 90s, 30m, 2h or 1h30m", text));
  }
  return total;
}

std::string FormatDuration(int64_t ms) {
  if (ms < 0) ms = 0;
  if (ms < 60'000) return fmt::format("{:.1f}s", ms / 1000.0);
  int64_t s = ms / 1000;
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          // XML 1.0 has no way to write the other C0 controls, not even as references.
          if (c >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A UTF-8 sequence: copied when well-formed (shortest form, no surrogates, <= U+10FFFF).
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    uint32_t cp = len == 4 ? c & 0x07 : len == 3 ? c & 0x0F : c & 0x1F;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(text[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) &&
         cp != 0xFFFE && cp != 0xFFFF;
    if (ok) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      AppendUtf8(out, 0xFFFD);
      ++i;
    }
  }
  return out;
}

size_t FirstInvalidUtf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    uint32_t min = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string LastLines(std::string_view text, int lines, size_t bytes) {
  std::vector<std::string_view> kept;
  auto all = Split(text, '\n');
  for (auto it = all.rbegin(); it != all.rend() && static_cast<int>(kept.size()) < lines; ++it) {
    std::string_view l = *it;
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.remove_suffix(1);
    if (Trim(l).empty()) continue;
    kept.push_back(l);
  }
  std::string out;
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    if (!out.empty()) out += '\n';
    out += *it;
  }
  if (out.size() > bytes) {
    size_t cut = out.size() - bytes;
    // Not in the middle of a UTF-8 character.
    while (cut < out.size() && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) ++cut;
    out = "..." + out.substr(cut);
  }
  return out;
}


bool IsShellName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace drover
