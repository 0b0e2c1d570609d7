#include "plan/lexer.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <utility>

#include "plan/numerals.h"

namespace drover::plan {
namespace {

// ---------------------------------------------------------------------------------------------
// UTF-8

// The code point at s[i] and its length; a broken sequence reads as one byte (U+FFFD).
std::pair<char32_t, size_t> Decode(std::string_view s, size_t i) {
  unsigned char c = s[i];
  auto cont = [&](size_t k) {
    return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
  };
  auto bits = [&](size_t k) { return static_cast<char32_t>(s[i + k] & 0x3F); };
  if (c < 0x80) return {c, 1};
  if ((c & 0xE0) == 0xC0 && cont(1)) return {((c & 0x1F) << 6) | bits(1), 2};
  if ((c & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    return {((c & 0x0F) << 12) | (bits(1) << 6) | bits(2), 3};
  }
  if ((c & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    return {((c & 0x07) << 18) | (bits(1) << 12) | (bits(2) << 6) | bits(3), 4};
  }
  return {0xFFFD, 1};
}

// The ASCII stand-in for a code point, or 0 to keep it as it is.
char AsciiFor(char32_t cp) {
  if (cp >= 0xFF01 && cp <= 0xFF5E) return static_cast<char>(cp - 0xFEE0);  // full-width ASCII
  switch (cp) {
    case 0x3000: return ' ';   // ideographic space
    case 0x3001: return ',';   // 、
    case 0x3002: return ';';   // 。 ends a sentence: lists never cross it
    case 0x201C: case 0x201D: case 0x300A: case 0x300B: case 0x300C: case 0x300D:
      return '"';              // “ ” 《 》 「 」
    case 0x2018: case 0x2019: return '\'';
    case 0x2013: case 0x2014: case 0x2212: return '-';
    case 0x00D7: return 'x';
    case 0x00A0: return ' ';
    case 0x2208: return ':';   // ∈: "lr ∈ {0.1, 0.01}"
    default: return 0;
  }
}

bool IsAsciiAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLetter(char c) { return c >= 'a' && c <= 'z'; }
// What the matcher skips inside a phrase, so "efficient-net" is "efficientnet".
bool IsSep(char c) { return c == ' ' || c == '-' || c == '_' || c == '.'; }

// ---------------------------------------------------------------------------------------------
// The lexicon

struct Entry {
  std::string sq;  // squashed
  Tok kind;
  int index = -1;
  int choice = -1;
  double num = 0;
  int rank = 0;  // breaks ties between equally long matches: recipe words win over keywords
};

struct Word {
  const char* text;
  Tok kind;
  double num = 0;
};

// Keywords in both languages. Kept in one table so the planner's vocabulary is reviewable at a
// glance; anything not here (nor in the recipe) is reported back as ignored.
const Word kWords[] = {
    // English filler: carries no setting.
    {"please", Tok::kFiller}, {"pls", Tok::kFiller}, {"can", Tok::kFiller},
    {"could", Tok::kFiller}, {"you", Tok::kFiller}, {"i", Tok::kFiller}, {"we", Tok::kFiller},
    {"want", Tok::kFiller}, {"would", Tok::kFiller}, {"like", Tok::kFiller},
    {"let's", Tok::kFiller}, {"lets", Tok::kFiller}, {"let", Tok::kFiller}, {"us", Tok::kFiller},
    {"me", Tok::kFiller}, {"run", Tok::kFiller}, {"running", Tok::kFiller},
    {"train", Tok::kFiller}, {"training", Tok::kFiller}, {"trained", Tok::kFiller},
    {"launch", Tok::kFiller}, {"start", Tok::kFiller}, {"try", Tok::kFiller},
    {"do", Tok::kFiller}, {"sweep", Tok::kFiller}, {"test", Tok::kFiller},
    {"experiment", Tok::kFiller}, {"job", Tok::kFiller}, {"a", Tok::kFiller},
    {"an", Tok::kFiller}, {"the", Tok::kFiller}, {"with", Tok::kFiller}, {"for", Tok::kFiller},
    {"on", Tok::kFiller}, {"using", Tok::kFiller}, {"use", Tok::kFiller},
    {"both", Tok::kFiller},
    {"it", Tok::kFiller}, {"them", Tok::kFiller}, {"this", Tok::kFiller},
    {"these", Tok::kFiller}, {"my", Tok::kFiller}, {"our", Tok::kFiller}, {"by", Tok::kFiller},
    {"then", Tok::kFiller}, {"also", Tok::kFiller},
    {"config", Tok::kFiller}, {"configuration", Tok::kFiller}, {"grid", Tok::kFiller},
    {"grid search", Tok::kFiller}, {"search", Tok::kSearch}, {"tune", Tok::kSearch}, {"tuning", Tok::kSearch},
    {"optimize", Tok::kSearch}, {"optimise", Tok::kSearch}, {"hyperparameter search", Tok::kSearch},
    {"see", Tok::kFiller}, {"which", Tok::kFiller},
    {"better", Tok::kFiller}, {"best", Tok::kFiller}, {"spaced", Tok::kFiller},
    {"take", Tok::kFiller}, {"give", Tok::kFiller}, {"get", Tok::kFiller},
    {"go", Tok::kFiller}, {"now", Tok::kFiller}, {"just", Tok::kFiller}, {"ok", Tok::kFiller},
    {"okay", Tok::kFiller}, {"hi", Tok::kFiller}, {"hey", Tok::kFiller},
    {"thanks", Tok::kFiller}, {"thank you", Tok::kFiller}, {"size", Tok::kFiller},
    {"maximize", Tok::kFiller}, {"minimize", Tok::kFiller}, {"measure", Tok::kFiller},
    {"evaluate", Tok::kFiller},
    {"against", Tok::kSep}, {"and", Tok::kSep}, {"or", Tok::kSep}, {"vs", Tok::kSep},
    {"v.s.", Tok::kSep}, {"versus", Tok::kSep}, {"plus", Tok::kSep},
    {"is", Tok::kAssign}, {"are", Tok::kAssign}, {"of", Tok::kAssign}, {"at", Tok::kAssign},
    {"in", Tok::kAssign}, {"equal to", Tok::kAssign}, {"equals", Tok::kAssign},
    {"set to", Tok::kAssign}, {"as", Tok::kAssign},
    {"over", Tok::kAssign}, {"across", Tok::kAssign}, {"within", Tok::kAssign},
    {"from", Tok::kFrom}, {"between", Tok::kBetween},
    {"to", Tok::kTo}, {"through", Tok::kTo}, {"till", Tok::kTo}, {"until", Tok::kTo},
    {"value", Tok::kValues}, {"point", Tok::kValues}, {"setting", Tok::kValues},
    {"log", Tok::kLog}, {"log spaced", Tok::kLog}, {"logspace", Tok::kLog},
    {"log scale", Tok::kLog}, {"logarithmic", Tok::kLog}, {"logarithmically", Tok::kLog},
    {"geometric", Tok::kLog}, {"linear", Tok::kLinear}, {"linearly", Tok::kLinear},
    {"evenly", Tok::kLinear}, {"evenly spaced", Tok::kLinear}, {"uniform", Tok::kLinear},
    {"uniformly", Tok::kLinear}, {"step", Tok::kStep}, {"step size", Tok::kStep},
    {"stride", Tok::kStep}, {"increment", Tok::kStep},
    {"increase by", Tok::kStep}, {"increasing by", Tok::kStep}, {"increment by", Tok::kStep},
    {"repeat", Tok::kRepeat}, {"repeated", Tok::kRepeat}, {"repeating", Tok::kRepeat},
    {"repetition", Tok::kTimes}, {"replicate", Tok::kTimes}, {"trial", Tok::kTrials},
    {"times", Tok::kTimes}, {"x", Tok::kTimes}, {"runs", Tok::kRuns},
    {"twice", Tok::kTimes, 2}, {"thrice", Tok::kTimes, 3},
    {"gpu", Tok::kGpu}, {"card", Tok::kGpu}, {"cpu", Tok::kCpu}, {"cpu only", Tok::kCpu},
    {"no gpu", Tok::kCpu}, {"without gpu", Tok::kCpu}, {"single gpu", Tok::kGpuCount, 1},
    {"different", Tok::kAdj}, {"random", Tok::kAdj}, {"various", Tok::kAdj},
    {"independent", Tok::kAdj}, {"separate", Tok::kAdj}, {"distinct", Tok::kAdj},
    {"level", Tok::kLevel}, {"group", Tok::kLevel}, {"kind", Tok::kLevel},
    {"option", Tok::kLevel}, {"variant", Tok::kLevel}, {"candidate", Tok::kLevel},
    {"each", Tok::kEach}, {"per", Tok::kEach}, {"apiece", Tok::kEach},
    {"compare", Tok::kCompare}, {"comparing", Tok::kCompare}, {"comparison", Tok::kCompare},
    {"urgent", Tok::kUrgent}, {"urgently", Tok::kUrgent}, {"asap", Tok::kUrgent},
    {"a.s.a.p.", Tok::kUrgent}, {"high priority", Tok::kUrgent}, {"top priority", Tok::kUrgent},
    {"important", Tok::kUrgent}, {"immediately", Tok::kUrgent}, {"rush", Tok::kUrgent},
    {"low priority", Tok::kLow}, {"not urgent", Tok::kLow}, {"whenever", Tok::kLow},
    {"no rush", Tok::kLow}, {"no hurry", Tok::kLow}, {"not important", Tok::kLow},
    {"priority", Tok::kPriority},
    // Leaving choices out: "every model except mlp", "all but mlp and cnn".
    {"except", Tok::kExcept}, {"except for", Tok::kExcept}, {"but", Tok::kExcept},
    {"but not", Tok::kExcept}, {"not", Tok::kExcept}, {"don't", Tok::kExcept},
    {"other than", Tok::kExcept}, {"apart from", Tok::kExcept}, {"aside from", Tok::kExcept},
    {"excluding", Tok::kExcept}, {"exclude", Tok::kExcept}, {"without", Tok::kExcept},
    {"skip", Tok::kExcept}, {"skipping", Tok::kExcept}, {"leave out", Tok::kExcept},
    {"leaving out", Tok::kExcept}, {"minus", Tok::kExcept}, {"excluded", Tok::kExceptAfter, 1},
    {"all", Tok::kAll}, {"every", Tok::kAll}, {"everything", Tok::kAll},
    {"all other", Tok::kAll, 1}, {"the other", Tok::kAll, 1}, {"the rest of the", Tok::kAll, 1},
    // Sequences: "start at 0.1 and divide by 10", "double from 32 to 256".
    {"multiply", Tok::kMul}, {"multiply by", Tok::kMul}, {"multiplied by", Tok::kMul},
    {"multiplying by", Tok::kMul}, {"double", Tok::kMul, 2}, {"doubling", Tok::kMul, 2},
    {"doubled", Tok::kMul, 2}, {"increase by a factor of", Tok::kMul},
    {"increasing by a factor of", Tok::kMul}, {"grow by a factor of", Tok::kMul},
    {"divide", Tok::kDiv}, {"divide by", Tok::kDiv}, {"divided by", Tok::kDiv},
    {"dividing by", Tok::kDiv}, {"halve", Tok::kDiv, 2}, {"halving", Tok::kDiv, 2},
    {"halved", Tok::kDiv, 2}, {"decrease by a factor of", Tok::kDiv},
    {"decreasing by a factor of", Tok::kDiv}, {"reduce by a factor of", Tok::kDiv},
    {"reducing by a factor of", Tok::kDiv}, {"shrink by a factor of", Tok::kDiv},
    {"a factor of", Tok::kFiller}, {"factor of", Tok::kFiller},
    {"start at", Tok::kStart}, {"starting at", Tok::kStart}, {"start from", Tok::kStart},
    {"starting from", Tok::kStart}, {"start with", Tok::kStart}, {"starting with", Tok::kStart},
    {"begin at", Tok::kStart}, {"beginning at", Tok::kStart}, {"begin with", Tok::kStart},
    {"up to", Tok::kTo}, {"down to", Tok::kTo}, {"stop at", Tok::kTo},
    {"stopping at", Tok::kTo}, {"end at", Tok::kTo},
    {"ending at", Tok::kTo}, {"each time", Tok::kEach}, {"every time", Tok::kEach},
    {"one", Tok::kNumber, 1}, {"two", Tok::kNumber, 2}, {"three", Tok::kNumber, 3},
    {"four", Tok::kNumber, 4}, {"five", Tok::kNumber, 5}, {"six", Tok::kNumber, 6},
    {"seven", Tok::kNumber, 7}, {"eight", Tok::kNumber, 8}, {"nine", Tok::kNumber, 9},
    {"ten", Tok::kNumber, 10}, {"single", Tok::kNumber, 1},
    // Chinese.
    {"请", Tok::kFiller}, {"帮我", Tok::kFiller}, {"帮忙", Tok::kFiller}, {"我", Tok::kFiller},
    {"我们", Tok::kFiller}, {"想", Tok::kFiller}, {"要", Tok::kFiller}, {"需要", Tok::kFiller},
    {"的", Tok::kFiller}, {"在", Tok::kFiller}, {"时", Tok::kFiller}, {"时候", Tok::kFiller},
    {"下", Tok::kFiller}, {"用", Tok::kFiller}, {"使用", Tok::kFiller}, {"跑", Tok::kFiller},
    {"运行", Tok::kFiller}, {"训练", Tok::kFiller}, {"一下", Tok::kFiller},
    {"实验", Tok::kFiller}, {"分别", Tok::kFiller}, {"把", Tok::kFiller}, {"给", Tok::kFiller},
    {"看看", Tok::kFiller}, {"看", Tok::kFiller}, {"然后", Tok::kFiller},
    {"同时", Tok::kFiller}, {"一起", Tok::kFiller}, {"之间", Tok::kBetween},
    {"并", Tok::kFiller}, {"并且", Tok::kFiller}, {"吧", Tok::kFiller},
    {"了", Tok::kFiller}, {"哪个", Tok::kFiller}, {"更好", Tok::kFiller}, {"好", Tok::kFiller},
    {"谢谢", Tok::kFiller}, {"上", Tok::kFiller}, {"做", Tok::kFiller}, {"测试", Tok::kFiller},
    {"扫", Tok::kFiller}, {"搜索", Tok::kFiller}, {"网格", Tok::kFiller}, {"评估", Tok::kFiller},
    {"按", Tok::kFiller}, {"按照", Tok::kFiller}, {"看谁", Tok::kFiller}, {"都", Tok::kFiller},
    {"共", Tok::kFiller}, {"一共", Tok::kFiller}, {"总共", Tok::kFiller}, {"为止", Tok::kFiller},
    {"范围", Tok::kFiller},
    {"一些", Tok::kFiller}, {"但", Tok::kFiller}, {"但是", Tok::kFiller},
    {"和", Tok::kSep}, {"与", Tok::kSep}, {"及", Tok::kSep}, {"以及", Tok::kSep},
    {"或", Tok::kSep}, {"或者", Tok::kSep}, {"跟", Tok::kSep}, {"对", Tok::kSep},
    {"为", Tok::kAssign}, {"是", Tok::kAssign}, {"取", Tok::kAssign}, {"取值", Tok::kAssign},
    {"设为", Tok::kAssign}, {"设置为", Tok::kAssign}, {"设成", Tok::kAssign},
    {"等于", Tok::kAssign}, {"分别为", Tok::kAssign}, {"分别是", Tok::kAssign},
    {"从", Tok::kFrom}, {"到", Tok::kTo}, {"至", Tok::kTo}, {"直到", Tok::kTo},
    {"一直到", Tok::kTo}, {"开始", Tok::kStart}, {"起", Tok::kStart}, {"起始", Tok::kStart},
    {"起始值", Tok::kStart}, {"初始值", Tok::kStart},
    {"个值", Tok::kValues}, {"值", Tok::kValues}, {"个点", Tok::kValues}, {"个取值", Tok::kValues},
    {"对数", Tok::kLog}, {"对数均匀", Tok::kLog}, {"对数间隔", Tok::kLog},
    {"对数分布", Tok::kLog}, {"线性", Tok::kLinear}, {"均匀", Tok::kLinear},
    {"等间距", Tok::kLinear}, {"步长", Tok::kStep}, {"间隔", Tok::kStep},
    {"增加", Tok::kStep}, {"递增", Tok::kStep}, {"每次加", Tok::kStep},
    {"重复", Tok::kRepeat}, {"次", Tok::kTimes}, {"遍", Tok::kTimes},
    {"搜索", Tok::kSearch}, {"调参", Tok::kSearch}, {"寻优", Tok::kSearch},
    {"超参搜索", Tok::kSearch}, {"超参数搜索", Tok::kSearch}, {"试验", Tok::kTrials},
    {"次试验", Tok::kTrials}, {"组试验", Tok::kTrials},
    {"卡", Tok::kGpu}, {"显卡", Tok::kGpu}, {"单卡", Tok::kGpuCount, 1},
    {"双卡", Tok::kGpuCount, 2}, {"不用gpu", Tok::kCpu}, {"不用显卡", Tok::kCpu},
    {"个", Tok::kMeasure}, {"张", Tok::kMeasure}, {"块", Tok::kMeasure}, {"台", Tok::kMeasure},
    {"组", Tok::kLevel}, {"种", Tok::kLevel}, {"档", Tok::kLevel}, {"档位", Tok::kLevel},
    {"套", Tok::kLevel}, {"类", Tok::kLevel}, {"不同", Tok::kAdj}, {"随机", Tok::kAdj},
    {"独立", Tok::kAdj},
    {"每个", Tok::kEach}, {"每", Tok::kEach}, {"每次", Tok::kEach}, {"每组", Tok::kEach},
    {"各", Tok::kEach}, {"各自", Tok::kEach}, {"各个", Tok::kEach}, {"依次", Tok::kEach},
    {"每一次", Tok::kEach},
    {"对比", Tok::kCompare}, {"比较", Tok::kCompare}, {"比一比", Tok::kCompare},
    {"紧急", Tok::kUrgent}, {"加急", Tok::kUrgent}, {"尽快", Tok::kUrgent},
    {"马上", Tok::kUrgent}, {"高优先级", Tok::kUrgent}, {"优先", Tok::kUrgent},
    {"低优先级", Tok::kLow}, {"不急", Tok::kLow}, {"不紧急", Tok::kLow}, {"不着急", Tok::kLow},
    {"不加急", Tok::kLow}, {"不用急", Tok::kLow}, {"不用着急", Tok::kLow}, {"不要急", Tok::kLow},
    {"优先级", Tok::kPriority},
    // 除了 (num = 1) is "except", but "besides" when 还/也 follows: "除了cnn，还要跑mlp".
    {"除了", Tok::kExcept, 1}, {"除", Tok::kExcept, 1}, {"除去", Tok::kExcept, 1},
    {"除开", Tok::kExcept, 1}, {"还", Tok::kAlso}, {"也", Tok::kAlso}, {"还要", Tok::kAlso},
    {"也要", Tok::kAlso}, {"另外", Tok::kAlso}, {"还是", Tok::kSep},
    {"不要", Tok::kExcept}, {"不包括", Tok::kExcept}, {"不包含", Tok::kExcept},
    {"不含", Tok::kExcept}, {"排除", Tok::kExcept}, {"排除掉", Tok::kExcept},
    {"去掉", Tok::kExcept}, {"去除", Tok::kExcept}, {"跳过", Tok::kExcept},
    {"不跑", Tok::kExcept}, {"不用", Tok::kExcept}, {"不考虑", Tok::kExcept},
    {"以外", Tok::kExceptAfter, 1}, {"之外", Tok::kExceptAfter, 1},
    {"除外", Tok::kExceptAfter, 1}, {"外", Tok::kExceptAfter, 0},
    // num = 1: "the others", so with choices named it is still every choice ("cnn和其他模型").
    {"所有", Tok::kAll}, {"全部", Tok::kAll}, {"其他", Tok::kAll, 1}, {"其它", Tok::kAll, 1},
    {"其余", Tok::kAll, 1}, {"剩下", Tok::kAll, 1}, {"剩下的", Tok::kAll, 1},
    {"别的", Tok::kAll, 1}, {"各种", Tok::kAll}, {"每种", Tok::kAll},
    {"乘以", Tok::kMul}, {"乘", Tok::kMul}, {"翻倍", Tok::kMul, 2}, {"翻一倍", Tok::kMul, 2},
    {"加倍", Tok::kMul, 2}, {"扩大", Tok::kMul}, {"除以", Tok::kDiv}, {"减半", Tok::kDiv, 2},
    {"折半", Tok::kDiv, 2}, {"缩小", Tok::kDiv}, {"倍", Tok::kFold},
    {"俩", Tok::kNumber, 2},  // other numerals: ChineseNumberAt
};

std::vector<Entry> BuildLexicon(const Recipe& recipe) {
  std::vector<Entry> out;
  for (const Word& w : kWords) out.push_back({Squash(w.text), w.kind, -1, -1, w.num, 0});
  for (size_t p = 0; p < recipe.params.size(); ++p) {
    const RecipeParam& param = recipe.params[p];
    out.push_back({Squash(param.name), Tok::kParam, static_cast<int>(p), -1, 0, 2});
    for (const std::string& a : param.aliases) {
      out.push_back({Squash(a), Tok::kParam, static_cast<int>(p), -1, 0, 2});
    }
    for (size_t c = 0; c < param.choices.size(); ++c) {
      const Json& v = param.choices[c];
      std::string text = v.is_string() ? v.get<std::string>() : v.dump();
      out.push_back({Squash(text), Tok::kChoice, static_cast<int>(p), static_cast<int>(c), 0, 3});
    }
  }
  for (size_t m = 0; m < recipe.metrics.size(); ++m) {
    out.push_back({Squash(recipe.metrics[m].name), Tok::kMetric, static_cast<int>(m), -1, 0, 1});
    for (const std::string& a : recipe.metrics[m].aliases) {
      out.push_back({Squash(a), Tok::kMetric, static_cast<int>(m), -1, 0, 1});
    }
  }
  std::erase_if(out, [](const Entry& e) { return e.sq.empty(); });
  return out;
}

// Two ASCII characters that may touch without a space between words: a letter and a digit
// ("bs32", "10epochs").
bool CanTouch(char a, char b) { return IsDigit(a) != IsDigit(b); }

// Where `sq` matches the text at `pos` (skipping separators inside it, and an English plural
// after it, which sets *plural), or npos. ASCII words must start and end at word boundaries; CJK
// has none.
size_t MatchAt(const std::string& t, size_t pos, const std::string& sq, bool* plural) {
  *plural = false;
  if (t[pos] != sq[0]) return std::string::npos;
  if (pos > 0 && IsAsciiAlnum(t[pos - 1]) && IsAsciiAlnum(t[pos]) && !CanTouch(t[pos - 1], t[pos])) {
    return std::string::npos;
  }
  size_t i = pos, k = 0;
  while (k < sq.size()) {
    if (i >= t.size()) return std::string::npos;
    if (k > 0 && IsSep(t[i]) && !IsSep(sq[k])) {
      ++i;
      continue;
    }
    if (t[i] != sq[k]) return std::string::npos;
    ++i;
    ++k;
  }
  char last = t[i - 1];
  if (IsLetter(last)) {  // plurals: seeds, epochs, batch sizes, gpus
    if (i < t.size() && t[i] == 's' &&
        (i + 1 == t.size() || !IsAsciiAlnum(t[i + 1]))) {
      ++i;
      *plural = true;
    } else if (i + 1 < t.size() && t[i] == 'e' && t[i + 1] == 's' &&
               (i + 2 == t.size() || !IsAsciiAlnum(t[i + 2]))) {
      i += 2;
      *plural = true;
    }
  }
  if (i < t.size() && IsAsciiAlnum(t[i]) && IsAsciiAlnum(t[i - 1]) && !CanTouch(t[i - 1], t[i])) {
    return std::string::npos;
  }
  return i;
}

// A number in digits at `pos`: 32, -1, 0.5, .5, 1e-4, 3e5. Returns its end, or npos.
size_t NumberAt(const std::string& t, size_t pos, bool sign_ok, double* value, bool* integral) {
  size_t i = pos;
  if (sign_ok && (t[i] == '-' || t[i] == '+')) ++i;
  size_t digits = i;
  while (i < t.size() && IsDigit(t[i])) ++i;
  bool whole = true;
  if (i + 1 < t.size() && t[i] == '.' && IsDigit(t[i + 1])) {
    whole = false;
    ++i;
    while (i < t.size() && IsDigit(t[i])) ++i;
  }
  if (i == digits) return std::string::npos;
  if (i < t.size() && t[i] == 'e') {
    size_t j = i + 1;
    if (j < t.size() && (t[j] == '-' || t[j] == '+')) ++j;
    if (j < t.size() && IsDigit(t[j])) {
      while (j < t.size() && IsDigit(t[j])) ++j;
      i = j;
      whole = false;
    }
  }
  // A number glued to letters that are not a unit we know ("3090") stays a number; the word
  // after it is lexed on its own.
  *value = std::strtod(t.substr(pos, i - pos).c_str(), nullptr);
  *integral = whole;
  return i;
}

Tok PunctKind(char c) {
  switch (c) {
    case ',': case '/': case '&': case '+': return Tok::kSep;
    case ';': return Tok::kBreak;
    case '=': case ':': return Tok::kAssign;
    case '(': case '[': case '{': case '<': return Tok::kOpen;
    case ')': case ']': case '}': case '>': return Tok::kClose;
    case '~': case '-': return Tok::kTo;
    default: return Tok::kPunct;
  }
}

}  // namespace

Normalized Normalize(std::string_view in) {
  Normalized n;
  for (size_t i = 0; i < in.size();) {
    auto [cp, len] = Decode(in, i);
    char a = cp < 0x80 ? static_cast<char>(cp) : AsciiFor(cp);
    if (a != 0) {
      if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
      if (a == '\t' || a == '\n' || a == '\r') a = ' ';
      n.text.push_back(a);
      n.orig.push_back(i);
    } else {
      for (size_t k = 0; k < len; ++k) {
        n.text.push_back(in[i + k]);
        n.orig.push_back(i);
      }
    }
    i += len;
  }
  n.orig.push_back(in.size());
  return n;
}

std::string Squash(std::string_view word) {
  std::string out;
  for (char c : Normalize(word).text) {
    if (!IsSep(c)) out.push_back(c);
  }
  return out;
}

std::vector<Token> Lex(const Recipe& recipe, const Normalized& n) {
  const std::vector<Entry> lexicon = BuildLexicon(recipe);
  const std::string& t = n.text;
  std::vector<Token> out;
  auto push = [&](Tok kind, size_t b, size_t e) -> Token& {
    Token tok{kind, b, e};
    tok.text = t.substr(b, e - b);
    out.push_back(std::move(tok));
    return out.back();
  };
  size_t i = 0;
  while (i < t.size()) {
    char c = t[i];
    if (c == ' ') {
      ++i;
      continue;
    }
    // Digits first: "1e-4" is a number even though "e" could start a word.
    bool prev_is_number = !out.empty() && out.back().kind == Tok::kNumber && out.back().end == i;
    double v = 0;
    bool integral = false;
    if (IsDigit(c) || c == '.' || ((c == '-' || c == '+') && !prev_is_number)) {
      size_t e = NumberAt(t, i, !prev_is_number, &v, &integral);
      if (e != std::string::npos) {
        // "3万", "2千": digits with a Chinese unit after them.
        for (auto [unit, times] : {std::pair<std::string_view, double>{"万", 1e4}, {"千", 1e3}}) {
          if (std::string_view(t).substr(e, unit.size()) == unit) {
            v *= times;
            integral = v == std::floor(v);
            e += unit.size();
            break;
          }
        }
        Token& tok = push(Tok::kNumber, i, e);
        tok.num = v;
        tok.integral = integral;
        i = e;
        continue;
      }
    }
    if (c == 'x' && i + 1 < t.size() && IsDigit(t[i + 1]) && (i == 0 || !IsAsciiAlnum(t[i - 1]))) {
      size_t e = i + 1;  // "x3": three times
      while (e < t.size() && IsDigit(t[e])) ++e;
      if (e == t.size() || !IsAsciiAlnum(t[e])) {
        Token& tok = push(Tok::kTimes, i, e);
        tok.num = std::strtod(t.substr(i + 1, e - i - 1).c_str(), nullptr);
        i = e;
        continue;
      }
    }
    // The longest lexicon match; on a tie the recipe's own words win, then the word that is
    // longer without a plural ending ("runs" over "run" + s).
    const Entry* best = nullptr;
    size_t best_end = 0;
    bool best_plural = false;
    for (const Entry& e : lexicon) {
      bool plural = false;
      size_t end = MatchAt(t, i, e.sq, &plural);
      if (end == std::string::npos) continue;
      if (!best || end > best_end ||
          (end == best_end && (e.rank > best->rank ||
                               (e.rank == best->rank && e.sq.size() > best->sq.size())))) {
        best = &e;
        best_end = end;
        best_plural = plural;
      }
    }
    // A Chinese numeral, unless a longer word starts here ("一下", "一起").
    if (ChineseNumber cn = ChineseNumberAt(t, i); cn.len > 0 && (!best || i + cn.len >= best_end)) {
      Token& tok = push(Tok::kNumber, i, i + cn.len);
      tok.num = cn.value;
      tok.integral = cn.integral;
      i += cn.len;
      continue;
    }
    if (best) {
      Token& tok = push(best->kind, i, best_end);
      tok.index = best->index;
      tok.choice = best->choice;
      tok.num = best->num;
      tok.integral = true;
      tok.plural = best_plural;
      i = best_end;
      continue;
    }
    if (c == '.' && i + 1 < t.size() && t[i + 1] == '.') {
      push(Tok::kTo, i, i + 2);
      i += 2;
      continue;
    }
    if (IsAsciiAlnum(c)) {  // an unknown word: letters and digits (and ' inside: "don't")
      size_t e = i;
      while (e < t.size() && (IsAsciiAlnum(t[e]) || t[e] == '_' || t[e] == '\'')) ++e;
      push(Tok::kUnknown, i, e);
      i = e;
      continue;
    }
    if (static_cast<unsigned char>(c) >= 0x80) {  // one unknown character (CJK, emoji, ...)
      size_t len = Decode(t, i).second;
      push(Tok::kUnknown, i, i + len);
      i += len;
      continue;
    }
    push(PunctKind(c), i, i + 1);
    ++i;
  }
  return out;
}

}  // namespace drover::plan
