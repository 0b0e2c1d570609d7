#pragma once
// The one YAML field reader that the spec parser, the recipe parser and the daemon's config file
// share: how a node reads in an error message, a mapping's keys checked against the valid ones
// (with did-you-mean), scalars typed by the YAML 1.2 core schema, and integers, numbers,
// durations, sizes, choices and text read with errors that point at file:line:column and say
// what to write instead.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

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

// The tag of an explicitly quoted or !!str scalar.
inline constexpr char kStrTag[] = "tag:yaml.org,2002:str";

// A scalar typed by the YAML 1.2 core schema: quoted text is always a string; plain text is a
// bool only when it is true/false (so `no` and `yes` stay strings), an int when it is decimal,
// 0x hex or 0o octal within int64 (a larger one is kept as a float), a float in decimal or
// exponent form or .inf/.nan.
enum class ScalarKind { kNull, kBool, kInt, kFloat, kString };
struct Scalar {
  ScalarKind kind = ScalarKind::kString;
  bool b = false;
  int64_t i = 0;
  double d = 0;
};
Scalar Resolve(const YAML::Node& n);

// Whether `text` is UTF-8; if not, an error at the file:line:column of the first bad byte that
// says to save `what` ("the spec", "the recipe") as UTF-8.
Status CheckUtf8(std::string_view text, const std::string& source, std::string_view what);
// Every scalar of a parsed document is UTF-8 (an escape can make one that is not).
Status CheckScalarsUtf8(const YAML::Node& root, const std::string& source);

// YAML::Load of a file's text, with a syntax error as "<source>:line:col: YAML syntax error: ...;
// fix the YAML at this position" and, where the text indents with a tab (YAML indents with spaces
// only, and yaml-cpp says only "illegal map value" or the like), the line of the first such tab.
Result<YAML::Node> Load(const std::string& text, const std::string& source);

// How a mapping's keys are checked (Reader::ReadMap).
struct MapRules {
  const std::vector<std::string>* valid = nullptr;  // null: any key
  std::string_view in = " in ";                      // "unknown key 'x' in detectors"
  const Sections* sections = nullptr;                // to point a misplaced top-level key home
  std::string_view top_hint;                         // appended to the valid keys at the top
  std::string_view example;                          // "write e.g. ..." when it is no mapping
  std::string_view key_hint = "; write name: value";  // after "a key must be a plain name, got X"
};

// Reads fields of one file (`source` names it in errors). Parsers derive from it; Where() may be
// overridden (the spec parser names --set overrides instead of a position).
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}
  virtual ~Reader() = default;

  virtual std::string Where(const YAML::Node& n) const;
  Status Err(const YAML::Node& at, std::string_view msg) const;

  // The fields of mapping `map` (null: none) at `path`, each key checked by `rules`; `at` is where
  // an error about the mapping itself points.
  Result<std::vector<Field>> ReadMap(const YAML::Node& at, const YAML::Node& map,
                                     const std::string& path, const MapRules& rules) const;
  // An integer in [min, max]; else "<path> must be <kind>, got X; <hint>".
  Result<int64_t> Int(const Field& f, int64_t min, int64_t max, std::string_view kind,
                      std::string_view hint) const;
  // A finite number in the range (open or closed at each end).
  Result<double> Real(const Field& f, double min, double max, bool min_open, bool max_open,
                      std::string_view hint) const;
  // A duration (500ms, 90s, 30m, 2h, 1h30m) of at least `min` ms.
  Result<int64_t> Duration(const Field& f, int64_t min = 0) const;
  // A size (256MiB, 1GiB, 4GB, a number of bytes).
  Result<int64_t> Bytes(const Field& f) const;
  // One of `choices`, with did-you-mean.
  Result<std::string> Choice(const Field& f, const std::vector<std::string>& choices) const;
  // A string.
  Result<std::string> Text(const Field& f, std::string_view hint) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

}  // namespace drover::yaml
