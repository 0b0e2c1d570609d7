#include "plan/numerals.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plan/lexer.h"

namespace drover::plan {
namespace {

struct Want {
  std::string text;
  double value;
  std::string read;  // the part of text that is the numeral
  bool integral = true;
};

TEST(ChineseNumeralsTest, Integers) {
  for (const Want& w : std::vector<Want>{
           {"零", 0, "零"},
           {"〇", 0, "〇"},
           {"两", 2, "两"},
           {"二", 2, "二"},
           {"十", 10, "十"},
           {"十六", 16, "十六"},
           {"一十六", 16, "一十六"},
           {"二十", 20, "二十"},
           {"九十九", 99, "九十九"},
           {"一百", 100, "一百"},
           {"一百零五", 105, "一百零五"},
           {"一百二十八", 128, "一百二十八"},
           {"两百五十六", 256, "两百五十六"},
           {"一千零二十四", 1024, "一千零二十四"},
           {"两千", 2000, "两千"},
           {"两千零四十八", 2048, "两千零四十八"},
           {"三万二千七百六十八", 32768, "三万二千七百六十八"},
           {"一万零五", 10005, "一万零五"},
           {"九万九千九百九十九", 99999, "九万九千九百九十九"},
           {"十万", 100000, "十万"},
           {"二十万", 200000, "二十万"},
           {"一百万", 1000000, "一百万"},
       }) {
    ChineseNumber n = ChineseNumberAt(w.text, 0);
    EXPECT_EQ(n.value, w.value) << w.text;
    EXPECT_EQ(n.len, w.read.size()) << w.text;
    EXPECT_TRUE(n.integral) << w.text;
  }
}

// A last digit right after 百, 千 or 万 is one unit lower, as people say it; after 零 it is ones.
TEST(ChineseNumeralsTest, AbbreviatedTails) {
  EXPECT_EQ(ChineseNumberAt("一百二", 0).value, 120);
  EXPECT_EQ(ChineseNumberAt("两千五", 0).value, 2500);
  EXPECT_EQ(ChineseNumberAt("三万二", 0).value, 32000);
  EXPECT_EQ(ChineseNumberAt("一百零二", 0).value, 102);
  EXPECT_EQ(ChineseNumberAt("三十二", 0).value, 32);
}

TEST(ChineseNumeralsTest, Decimals) {
  ChineseNumber n = ChineseNumberAt("零点零一", 0);
  EXPECT_DOUBLE_EQ(n.value, 0.01);
  EXPECT_FALSE(n.integral);
  EXPECT_EQ(n.len, std::string("零点零一").size());
  EXPECT_DOUBLE_EQ(ChineseNumberAt("一点五", 0).value, 1.5);
  EXPECT_DOUBLE_EQ(ChineseNumberAt("零点零零三", 0).value, 0.003);
  EXPECT_DOUBLE_EQ(ChineseNumberAt("十二点五", 0).value, 12.5);
  // 点 without a digit after it is not a decimal point: "快一点" (a bit faster).
  n = ChineseNumberAt("一点", 0);
  EXPECT_EQ(n.value, 1);
  EXPECT_TRUE(n.integral);
  EXPECT_EQ(n.len, std::string("一").size());
}

TEST(ChineseNumeralsTest, StopsWhereTheNumeralStops) {
  std::string s = "训练一百二十八轮";
  size_t at = std::string("训练").size();
  ChineseNumber n = ChineseNumberAt(s, at);
  EXPECT_EQ(n.value, 128);
  EXPECT_EQ(s.substr(at + n.len), "轮");
  // Two digits in a row end the number: 三五 is 3, then 5.
  n = ChineseNumberAt("三五", 0);
  EXPECT_EQ(n.value, 3);
  EXPECT_EQ(n.len, std::string("三").size());
  // Units must fall: 十十 is 10 and then another 十.
  EXPECT_EQ(ChineseNumberAt("十十", 0).len, std::string("十").size());
  // 百, 千 and 万 need a digit before them: 千万 (by all means) is no number.
  EXPECT_EQ(ChineseNumberAt("千万", 0).len, 0u);
  EXPECT_EQ(ChineseNumberAt("百", 0).len, 0u);
  EXPECT_EQ(ChineseNumberAt("万", 0).len, 0u);
  // 万 once only.
  EXPECT_EQ(ChineseNumberAt("一万万", 0).value, 10000);
  EXPECT_EQ(ChineseNumberAt("abc", 0).len, 0u);
  EXPECT_EQ(ChineseNumberAt("", 0).len, 0u);
  EXPECT_EQ(ChineseNumberAt("一", 1).len, 0u);  // inside a character: nothing
}

// The lexer reads numerals where no longer word starts ("一下" is filler), and digits with 万/千.
TEST(ChineseNumeralsTest, TheLexerReadsThem) {
  Recipe recipe;
  auto numbers = [&](const std::string& text) {
    std::vector<double> out;
    for (const Token& t : Lex(recipe, Normalize(text))) {
      if (t.kind == Tok::kNumber) out.push_back(t.num);
    }
    return out;
  };
  EXPECT_EQ(numbers("批大小一百二十八和两千"), (std::vector<double>{128, 2000}));
  EXPECT_EQ(numbers("跑一下"), std::vector<double>{});
  EXPECT_EQ(numbers("一起跑"), std::vector<double>{});
  EXPECT_EQ(numbers("训练3万步，批大小2千"), (std::vector<double>{30000, 2000}));
  EXPECT_EQ(numbers("学习率零点零一"), std::vector<double>{0.01});
  EXPECT_EQ(numbers("三档、两组"), (std::vector<double>{3, 2}));
}

}  // namespace
}  // namespace drover::plan
