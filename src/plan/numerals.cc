#include "plan/numerals.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace drover::plan {
namespace {

// Every character below is three bytes of UTF-8.
constexpr size_t kCharLen = 3;

int DigitOf(std::string_view ch) {
  static constexpr std::string_view kDigits[][2] = {
      {"零", "〇"}, {"一", ""}, {"二", "两"}, {"三", ""}, {"四", ""},
      {"五", ""},   {"六", ""}, {"七", ""},   {"八", ""}, {"九", ""}};
  for (int d = 0; d < 10; ++d) {
    if (ch == kDigits[d][0] || (!kDigits[d][1].empty() && ch == kDigits[d][1])) return d;
  }
  return -1;
}

int64_t UnitOf(std::string_view ch) {
  if (ch == "十") return 10;
  if (ch == "百") return 100;
  if (ch == "千") return 1000;
  if (ch == "万") return 10000;
  return 0;
}

std::string_view CharAt(std::string_view s, size_t i) {
  return i + kCharLen <= s.size() ? s.substr(i, kCharLen) : std::string_view();
}

}  // namespace

ChineseNumber ChineseNumberAt(std::string_view s, size_t pos) {
  size_t i = pos;
  size_t end = pos;             // past the last character read into the number
  int64_t total = 0;            // what came before 万, times 10000
  int64_t section = 0;          // the part after the last 万 (or all of it), below 10000
  int pending = -1;             // a digit not yet given a unit
  int64_t last_unit = 0;        // the unit read last (for 两千五 = 2500)
  int64_t section_top = 10000;  // units in a section must fall: 千, 百, 十
  bool zero_gap = false;        // a 零 since the last unit: 一百零五
  bool wan = false;
  while (true) {
    std::string_view ch = CharAt(s, i);
    if (ch.empty()) break;
    int d = DigitOf(ch);
    int64_t u = UnitOf(ch);
    if (d >= 0) {
      if (pending > 0) break;  // 三五: two digits in a row end the number
      if (d == 0) zero_gap = true;
      pending = d;
    } else if (u >= 10 && u <= 1000) {
      if (u >= section_top) break;
      int m = pending;
      if (m < 0 && u == 10) m = 1;  // 十六
      if (m <= 0) break;            // 百 with no digit, or 零百
      section += m * u;
      section_top = last_unit = u;
      pending = -1;
      zero_gap = false;
    } else if (u == 10000) {
      if (wan || (pending <= 0 && section == 0)) break;
      total = (section + std::max(pending, 0)) * 10000;
      section = 0;
      section_top = last_unit = 10000;
      pending = -1;
      zero_gap = false;
      wan = true;
    } else {
      break;
    }
    i += kCharLen;
    end = i;
  }
  if (end == pos) return {};
  int64_t whole = total + section;
  if (pending > 0) whole += (!zero_gap && last_unit >= 100) ? pending * (last_unit / 10) : pending;

  ChineseNumber out{end - pos, static_cast<double>(whole), true};
  // A decimal point: 点 and at least one digit.
  if (CharAt(s, end) == "点" && DigitOf(CharAt(s, end + kCharLen)) >= 0) {
    std::string text = std::to_string(whole) + ".";
    size_t k = end + kCharLen;
    for (int d; (d = DigitOf(CharAt(s, k))) >= 0; k += kCharLen) text.push_back(char('0' + d));
    out.len = k - pos;
    out.value = std::strtod(text.c_str(), nullptr);
    out.integral = false;
  }
  return out;
}

}  // namespace drover::plan
