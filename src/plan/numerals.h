#pragma once
// Chinese numerals, as people write them in an instruction: 十六, 二十, 一百二十八, 两千,
// 三万二千七百六十八, 一万零五, and decimals such as 零点零一. Internal to src/plan/ (the lexer reads
// numbers with it).
//
// The rules:
//   digits   零 〇 (0), 一, 二 or 两 (2), 三 ... 九
//   units    十 (10), 百 (100), 千 (1000) inside a section, falling from left to right; 万 (10000)
//            once, after a section: 三万二千 = 32000. Up to 99,999,999.
//   十 alone or first is 10: 十六 = 16, 十 = 10 (so is 一十六).
//   a last digit right after 百/千/万 (no 零 between) is one unit lower, as in speech:
//            一百二 = 120, 两千五 = 2500, 三万二 = 32000; after 零 it is ones: 一百零二 = 102.
//   点 followed by digits is a decimal point; digits after it are read one by one: 零点零一 =
//            0.01, 一点五 = 1.5. 点 with no digit after it is not part of the number ("一点").
//   Reading stops where the text stops being a well-formed numeral: 三五 is 3 (then 5), 千万 is
//   no number (百, 千 and 万 need a digit before them; 十 does not).
#include <cstddef>
#include <string_view>

namespace drover::plan {

struct ChineseNumber {
  size_t len = 0;         // bytes of text read; 0 when there is no numeral at the position
  double value = 0;
  bool integral = true;   // no 点
};

// The numeral that starts at text[pos] (UTF-8), read as far as it is well formed.
ChineseNumber ChineseNumberAt(std::string_view text, size_t pos);

}  // namespace drover::plan
