#include "spec/derived_metrics.h"

#include <fmt/format.h>
#include <muParser.h>

#include <algorithm>
#include <cmath>

namespace drover {

namespace {

// Metric names may hold dots (val.acc: nested JSON fields are flattened with dots).
constexpr const char* kNameChars =
    "0123456789_.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

void Configure(mu::Parser& p) { p.DefineNameChars(kNameChars); }

}  // namespace

Result<std::vector<std::string>> ExpressionInputs(const std::string& expression) {
  if (expression.empty()) return InvalidArgument("the expression is empty");
  if (expression.size() > kMaxExpressionBytes) {
    return InvalidArgument(fmt::format("the expression is longer than {} bytes",
                                       kMaxExpressionBytes));
  }
  try {
    mu::Parser p;
    Configure(p);
    p.SetExpr(expression);
    // Names not defined yet are collected, not refused.
    const mu::varmap_type& used = p.GetUsedVar();
    std::vector<std::string> names;
    for (const auto& [name, ptr] : used) names.push_back(name);
    if (names.empty()) {
      return InvalidArgument("the expression reads no metric; use the metrics' names, such as "
                             "1 - val_acc");
    }
    return names;
  } catch (const mu::Parser::exception_type& e) {
    return InvalidArgument(e.GetMsg());
  }
}

struct DerivedMetrics::Formula {
  std::string name;
  std::vector<std::string> inputs;
  std::vector<double> values;  // bound to the parser's variables (stable: sized once)
  mu::Parser parser;
};

DerivedMetrics::DerivedMetrics(const std::vector<DerivedMetricSpec>& specs) {
  for (const auto& s : specs) {
    auto f = std::make_unique<Formula>();
    f->name = s.name;
    f->inputs = s.inputs;
    if (f->inputs.empty()) {
      auto in = ExpressionInputs(s.expression);
      if (!in.ok()) continue;  // checked when the spec was parsed
      f->inputs = *in;
    }
    f->values.assign(f->inputs.size(), 0.0);
    try {
      Configure(f->parser);
      for (size_t i = 0; i < f->inputs.size(); ++i) {
        f->parser.DefineVar(f->inputs[i], &f->values[i]);
      }
      f->parser.SetExpr(s.expression);
    } catch (const mu::Parser::exception_type&) {
      continue;
    }
    formulas_.push_back(std::move(f));
  }
  dirty_.assign(formulas_.size(), false);
}

DerivedMetrics::~DerivedMetrics() = default;

void DerivedMetrics::Seed(const std::map<std::string, double>& latest) {
  for (const auto& [k, v] : latest) latest_[k] = v;
}

std::vector<std::pair<int64_t, std::pair<std::string, double>>> DerivedMetrics::Feed(
    int64_t step, const std::string& name, double value) {
  std::vector<std::pair<int64_t, std::pair<std::string, double>>> out;
  if (formulas_.empty()) return out;
  if (pending_ && step != pending_step_) out = Flush();
  pending_ = true;
  pending_step_ = step;
  latest_[name] = value;
  for (size_t i = 0; i < formulas_.size(); ++i) {
    const auto& in = formulas_[i]->inputs;
    if (std::find(in.begin(), in.end(), name) != in.end()) dirty_[i] = true;
  }
  return out;
}

std::vector<std::pair<int64_t, std::pair<std::string, double>>> DerivedMetrics::Flush() {
  std::vector<std::pair<int64_t, std::pair<std::string, double>>> out;
  if (!pending_) return out;
  pending_ = false;
  for (size_t i = 0; i < formulas_.size(); ++i) {
    Formula& f = *formulas_[i];
    // A derived metric read by a later one makes it dirty in turn.
    if (!dirty_[i]) continue;
    dirty_[i] = false;
    bool ready = true;
    for (size_t k = 0; k < f.inputs.size(); ++k) {
      auto it = latest_.find(f.inputs[k]);
      if (it == latest_.end()) {
        ready = false;
        break;
      }
      f.values[k] = it->second;
    }
    if (!ready) continue;
    double v;
    try {
      v = f.parser.Eval();
    } catch (const mu::Parser::exception_type&) {
      continue;
    }
    latest_[f.name] = v;
    out.push_back({pending_step_, {f.name, v}});
    for (size_t j = i + 1; j < formulas_.size(); ++j) {
      const auto& in = formulas_[j]->inputs;
      if (std::find(in.begin(), in.end(), f.name) != in.end()) dirty_[j] = true;
    }
  }
  return out;
}

}  // namespace drover
