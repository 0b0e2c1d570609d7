#pragma once
// The planner's first half: an instruction -> tokens, against the recipe's words and a fixed
// lexicon of English and Chinese keywords. Internal to src/plan/ (planner.h is the interface).
#include <string>
#include <string_view>
#include <vector>

#include "plan/recipe.h"

namespace drover::plan {

// The instruction with full-width ASCII (U+FF01..U+FF5E) and CJK punctuation (、，：；＝。) made
// ASCII and ASCII letters lower-cased; `orig[i]` is the byte of the original text that byte i of
// `text` came from (one extra entry for the end), so tokens can quote what the user wrote.
struct Normalized {
  std::string text;
  std::vector<size_t> orig;
};
Normalized Normalize(std::string_view in);
// The same normalisation for a recipe word, plus dropping separators (space - _ .), which the
// matcher skips: "batch size", "batch-size" and "batch_size" all read as "batchsize".
std::string Squash(std::string_view word);

enum class Tok {
  kNumber,    // 32, 1e-4, three, 三, 一百二十八, 零点零一 (plan/numerals.h), 3万
  kParam,     // a parameter's name or alias (index = parameter)
  kChoice,    // one of a parameter's choices (index = parameter, choice = which)
  kMetric,    // a metric's name or alias (index = metric)
  kUnknown,   // a word (or CJK character) the lexicon does not know
  kFiller,    // please, run, the, 请, 的, ...: understood, carries nothing
  kSep,       // , and or / vs 和 与 、
  kBreak,     // ; (a list never crosses it)
  kAssign,    // = : is of at in 为 是 取 设为
  kOpen,      // ( [ {
  kClose,     // ) ] }
  kFrom,      // from 从
  kBetween,   // between
  kTo,        // to .. ~ - 到 至
  kValues,    // values points 个值
  kLog,       // log-spaced 对数
  kLinear,    // linear evenly 线性 均匀
  kStep,      // step 步长 increase by 每次加 (or "3 steps": a count)
  kRepeat,    // repeat 重复
  kTimes,     // times 次 遍 (num = 2 for "twice")
  kRuns,      // runs: repeats after a count ("5 runs"), else filler
  kGpu,       // gpu gpus 卡 显卡
  kGpuCount,  // 单卡 双卡 (num = the count)
  kCpu,       // cpu only, on cpu: no GPU
  kMeasure,   // 个 张 块 台: classifiers between a number and its noun
  kLevel,     // levels groups kinds 档 组 种 套: make the number before them a count, never a value
  kAdj,       // different random 不同: between a count and "seeds"
  kEach,      // each per 每个
  kCompare,   // compare 对比 比较
  kUrgent,    // urgent asap 紧急
  kLow,       // low priority 不急
  kPriority,  // priority 优先级
  kExcept,    // except but not other than 除了 除 不要 排除: the choices after it are left out
  kExceptAfter,  // 以外 之外 除外 excluded (num = 1: may follow the choices alone); 外 (num = 0:
                 // only closes 除...外)
  kAll,       // all every everything 所有 全部 其他: with a choice parameter, all its choices
  kAlso,      // 还 也 另外: after 除了X, makes it "besides X" rather than "except X"
  kMul,       // multiply by, double (num = 2), 乘以, 翻倍 (2): a geometric sequence
  kDiv,       // divide by, halve (num = 2), 除以, 减半 (2)
  kFold,      // 倍: "每次2倍" (times 2 each time)
  kStart,     // start at, starting from, 开始, 起: where a sequence starts
  kSearch,    // search tune optimize 搜索 调参 寻优: a search of ranges, not a grid
  kTrials,    // trial(s) 试验: a search's trials ("for 20 trials"); without a search word, repeats
  kPunct,     // other punctuation
};

struct Token {
  Tok kind;
  size_t begin = 0;  // byte range in Normalized::text
  size_t end = 0;
  int index = -1;    // parameter or metric
  int choice = -1;   // for kChoice
  double num = 0;    // for kNumber (and kTimes/kGpuCount)
  bool integral = false;  // kNumber written without a fraction or exponent
  bool plural = false;    // an English word read with a plural ending: "learning rates"
  std::string text;  // the normalised text
  bool used = false;
};

std::vector<Token> Lex(const Recipe& recipe, const Normalized& n);

}  // namespace drover::plan
