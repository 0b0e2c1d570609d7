#pragma once
// What the YAML readers share (the spec parser, the watch config): how a node reads in an error
// message, and a mapping's key with its value and dotted path, for errors that point at the spot.
#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace drover::yaml {

// got 'three', got a list, got a mapping, got nothing.
std::string Describe(const YAML::Node& n);

// A key of a mapping with its value. Errors about the value point at the value, except an empty
// one: yaml-cpp marks an empty value at the start of the next line, so point at the key then.
struct Field {
  YAML::Node key;
  YAML::Node value;
  std::string name;
  std::string path;  // dotted, for messages: resources.gpus, detectors.loss_spike.window
  const YAML::Node& at() const { return value.IsNull() ? key : value; }
};

const Field* Find(const std::vector<Field>& fields, std::string_view name);

bool Contains(const std::vector<std::string>& v, std::string_view s);

// Sections of a file and their keys, so a section's key written at the top is pointed home.
using Sections = std::vector<std::pair<std::string, const std::vector<std::string>*>>;

// The error for a key a mapping does not have: the valid key it is closest to; at the top level
// (empty `where`), the section it belongs to; else the valid keys, and `top_hint` at the top.
// `where` is " in detectors" / " under resources" or empty.
std::string UnknownKey(const std::string& name, const std::vector<std::string>& valid,
                       const std::string& where, const Sections& sections = {},
                       std::string_view top_hint = "");

}  // namespace drover::yaml
