#include "search/space.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace drover::search {
namespace {

constexpr std::pair<Distribution, std::string_view> kNames[] = {
    {Distribution::kUniform, "uniform"}, {Distribution::kLogUniform, "log_uniform"},
    {Distribution::kInt, "int"},         {Distribution::kIntLog, "int_log"},
    {Distribution::kChoice, "choice"},
};

// Equal as parameter values: numbers by value (3 and 3.0 are the same), the rest exactly.
bool SameValue(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

}  // namespace

std::string_view ToString(Distribution d) {
  for (const auto& [dist, name] : kNames) {
    if (dist == d) return name;
  }
  return "?";
}

std::optional<Distribution> ParseDistribution(std::string_view key) {
  for (const auto& [dist, name] : kNames) {
    if (name == key) return dist;
  }
  return std::nullopt;
}

std::optional<double> Dimension::Internal(const Json& value) const {
  if (dist == Distribution::kChoice) {
    for (size_t i = 0; i < choices.size(); ++i) {
      if (SameValue(choices[i], value)) return static_cast<double>(i);
    }
    return std::nullopt;
  }
  if (!value.is_number()) return std::nullopt;
  double v = value.get<double>();
  if (!std::isfinite(v) || v < low || v > high) return std::nullopt;
  if (integer() && v != std::round(v)) return std::nullopt;
  return log() ? std::log(v) : v;
}

double Dimension::InternalLow() const {
  switch (dist) {
    case Distribution::kUniform: return low;
    case Distribution::kLogUniform: return std::log(low);
    case Distribution::kInt: return low - 0.5;
    case Distribution::kIntLog: return std::log(low - 0.5);
    case Distribution::kChoice: return -0.5;
  }
  return low;
}

double Dimension::InternalHigh() const {
  switch (dist) {
    case Distribution::kUniform: return high;
    case Distribution::kLogUniform: return std::log(high);
    case Distribution::kInt: return high + 0.5;
    case Distribution::kIntLog: return std::log(high + 0.5);
    case Distribution::kChoice: return static_cast<double>(choices.size()) - 0.5;
  }
  return high;
}

Json Dimension::External(double x) const {
  switch (dist) {
    case Distribution::kUniform: return std::clamp(x, low, high);
    case Distribution::kLogUniform: return std::clamp(std::exp(x), low, high);
    case Distribution::kInt:
      return static_cast<int64_t>(std::clamp(std::round(x), low, high));
    case Distribution::kIntLog:
      return static_cast<int64_t>(std::clamp(std::round(std::exp(x)), low, high));
    case Distribution::kChoice: {
      if (choices.empty()) return Json();
      double i = std::clamp(std::round(x), 0.0, static_cast<double>(choices.size() - 1));
      return choices[static_cast<size_t>(i)];
    }
  }
  return Json();
}

bool Space::HasConditions() const {
  return std::any_of(dims.begin(), dims.end(), [](const Dimension& d) { return !d.when.empty(); });
}

bool Space::AllNumeric() const {
  return std::all_of(dims.begin(), dims.end(), [](const Dimension& d) { return d.numeric(); });
}

const Dimension* Space::Find(std::string_view name) const {
  for (const Dimension& d : dims) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

bool Active(const Dimension& dim, const Json& params) {
  for (const Condition& c : dim.when) {
    auto it = params.find(c.param);
    if (it == params.end()) return false;
    bool any = std::any_of(c.values.begin(), c.values.end(),
                           [&](const Json& v) { return SameValue(v, *it); });
    if (!any) return false;
  }
  return true;
}

Status CheckConfig(const Spec& spec, const Space& space, const Json& params) {
  if (!params.is_object()) return InvalidArgument("params must be a JSON object of name: value");
  for (const auto& [name, value] : params.items()) {
    if (!spec.params.contains(name)) {
      return InvalidArgument(fmt::format("'{}' is not a parameter of the search", name));
    }
  }
  for (const auto& [name, declared] : spec.params.items()) {
    const Json d = Json::parse(declared.dump());
    if (IsDistribution(d)) continue;
    auto it = params.find(name);
    if (it == params.end()) return InvalidArgument(fmt::format("'{}' is missing", name));
    if (d.is_array()) {
      bool any = std::any_of(d.begin(), d.end(), [&](const Json& v) { return SameValue(v, *it); });
      if (!any) {
        return InvalidArgument(fmt::format("{} is a grid axis: its value must be one of {}",
                                           name, d.dump()));
      }
    } else if (!SameValue(d, *it)) {
      return InvalidArgument(fmt::format("{} is fixed at {}", name, d.dump()));
    }
  }
  for (const Dimension& dim : space.dims) {
    auto it = params.find(dim.name);
    if (!Active(dim, params)) {
      if (it != params.end()) {
        return InvalidArgument(fmt::format("'{}' exists only when its when: holds, and here it "
                                           "does not; leave it out",
                                           dim.name));
      }
      continue;
    }
    if (it == params.end()) return InvalidArgument(fmt::format("'{}' is missing", dim.name));
    if (!dim.Internal(*it)) {
      std::string what = dim.numeric()
                             ? fmt::format("{} from {} to {}", dim.integer() ? "an integer" : "a number",
                                           dim.low, dim.high)
                             : "one of " + Json(dim.choices).dump();
      return InvalidArgument(fmt::format("{} = {} is outside the search: it must be {}", dim.name,
                                         it->dump(), what));
    }
  }
  return Status::Ok();
}

bool IsDistribution(const Json& value) {
  if (!value.is_object()) return false;
  for (const auto& [key, v] : value.items()) {
    if (ParseDistribution(key)) return true;
  }
  return false;
}

Result<Space> SpaceOf(const Spec& spec) {
  Space space;
  for (const auto& [name, value] : spec.params.items()) {
    if (!IsDistribution(value)) continue;
    Dimension d;
    d.name = name;
    for (const auto& [key, v] : value.items()) {
      if (key == "when") {
        if (!v.is_object()) return InvalidArgument(fmt::format("params.{}.when must be a mapping", name));
        for (const auto& [param, allowed] : v.items()) {
          if (!spec.params.contains(param) || param == name) {
            return InvalidArgument(fmt::format(
                "params.{}.when names '{}', which is not another parameter", name, param));
          }
          Condition c{param, {}};
          if (allowed.is_array()) {
            for (const auto& a : allowed) c.values.push_back(Json(a));
          } else {
            c.values.push_back(Json(allowed));
          }
          d.when.push_back(std::move(c));
        }
        continue;
      }
      std::optional<Distribution> dist = ParseDistribution(key);
      if (!dist) {
        return InvalidArgument(fmt::format("params.{}: unknown key '{}'", name, key));
      }
      d.dist = *dist;
      if (!v.is_array() || v.empty()) {
        return InvalidArgument(fmt::format("params.{}.{} must be a non-empty list", name, key));
      }
      if (d.dist == Distribution::kChoice) {
        for (const auto& c : v) d.choices.push_back(Json(c));
        continue;
      }
      if (v.size() != 2 || !v[0].is_number() || !v[1].is_number()) {
        return InvalidArgument(fmt::format("params.{}.{} must be [low, high]", name, key));
      }
      d.low = v[0].get<double>();
      d.high = v[1].get<double>();
      if (!(d.low < d.high) || !std::isfinite(d.low) || !std::isfinite(d.high)) {
        return InvalidArgument(fmt::format("params.{}.{}: low must be below high", name, key));
      }
      if (d.integer() && (d.low != std::round(d.low) || d.high != std::round(d.high))) {
        return InvalidArgument(fmt::format("params.{}.{}: the ends must be integers", name, key));
      }
      if ((d.dist == Distribution::kLogUniform && d.low <= 0) ||
          (d.dist == Distribution::kIntLog && d.low < 1)) {
        return InvalidArgument(fmt::format("params.{}.{}: a log scale needs a positive low end",
                                           name, key));
      }
    }
    space.dims.push_back(std::move(d));
  }
  // A dimension comes after those its conditions name (a stored spec has its keys sorted).
  std::vector<Dimension> ordered;
  std::vector<bool> placed(space.dims.size(), false);
  while (ordered.size() < space.dims.size()) {
    bool progress = false;
    for (size_t i = 0; i < space.dims.size(); ++i) {
      if (placed[i]) continue;
      bool ready = true;
      for (const Condition& c : space.dims[i].when) {
        for (size_t k = 0; k < space.dims.size(); ++k) {
          if (space.dims[k].name == c.param && !placed[k]) ready = false;
        }
      }
      if (!ready) continue;
      placed[i] = true;
      ordered.push_back(space.dims[i]);
      progress = true;
    }
    if (!progress) {
      return InvalidArgument("the when: conditions of params form a cycle; a parameter may only "
                             "depend on parameters that do not depend on it");
    }
  }
  space.dims = std::move(ordered);
  return space;
}

}  // namespace drover::search
