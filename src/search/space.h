#pragma once
// A search space: the parameters a sampler proposes values for (docs/search.md). The spec parser
// checks their shape with file:line:column errors; SpaceOf() reads the checked spec.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/spec.h"

namespace drover::search {

enum class Distribution {
  kUniform,     // {uniform: [low, high]}
  kLogUniform,  // {log_uniform: [low, high]}, low > 0
  kInt,         // {int: [low, high]}, both ends included
  kIntLog,      // {int_log: [low, high]}, low >= 1
  kChoice,      // {choice: [a, b, ...]}
};
std::string_view ToString(Distribution d);
// The spec key of a distribution ("log_uniform"), nullopt for any other text.
std::optional<Distribution> ParseDistribution(std::string_view key);

// `when: {model: cnn}` or `when: {model: [cnn, resnet]}`: the parameter exists only where
// `param` has one of `values` (every condition must hold).
struct Condition {
  std::string param;
  std::vector<Json> values;
};

struct Dimension {
  std::string name;
  Distribution dist = Distribution::kUniform;
  double low = 0, high = 1;   // numeric distributions
  std::vector<Json> choices;  // kChoice
  std::vector<Condition> when;

  bool numeric() const { return dist != Distribution::kChoice; }
  bool integer() const { return dist == Distribution::kInt || dist == Distribution::kIntLog; }
  bool log() const { return dist == Distribution::kLogUniform || dist == Distribution::kIntLog; }
  // The sampler's own coordinate of a value: log for log scales, the index of a choice.
  // nullopt when the value is not one this dimension can take.
  std::optional<double> Internal(const Json& value) const;
  // The value of an internal coordinate (rounded and clamped for integers and choices).
  Json External(double x) const;
  // The internal range: [low, high] of the coordinate; integers widened by half a step so each
  // integer has the same share of it.
  double InternalLow() const;
  double InternalHigh() const;
};

struct Space {
  // In the spec's order, except that a dimension comes after those its conditions name.
  std::vector<Dimension> dims;
  bool empty() const { return dims.empty(); }
  bool HasConditions() const;
  bool AllNumeric() const;
  const Dimension* Find(std::string_view name) const;
};

// Whether `dim` exists for a trial whose other parameters (fixed, grid, earlier dimensions) are
// `params`.
bool Active(const Dimension& dim, const Json& params);

// Whether `params` is a complete config of the spec: every parameter the spec has, a fixed one
// with its value, a grid axis with one of its values, a searched one (when active) with a value
// its distribution can take; an inactive conditional one left out; nothing else. The error
// names the parameter and what it may be.
Status CheckConfig(const Spec& spec, const Space& space, const Json& params);

// Is a spec's parameter value a distribution ({uniform: [...]} and the like)?
bool IsDistribution(const Json& value);
// The searched parameters of a spec, in order (params whose value is a distribution). The spec
// parser has checked them; an unchecked spec (from the store) is checked again here.
Result<Space> SpaceOf(const Spec& spec);

}  // namespace drover::search
