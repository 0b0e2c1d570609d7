#pragma once
// The Prometheus text exposition format (version 0.0.4): one HELP and TYPE line per family, then
// its samples. Families must be written whole, one after another, as the format requires.
#include <string>
#include <utility>
#include <vector>

namespace drover::server {

using PromLabels = std::vector<std::pair<std::string, std::string>>;

class PromWriter {
 public:
  // type: gauge, counter or histogram. Starts a new family.
  void Family(const std::string& name, const std::string& type, const std::string& help);
  // A sample of the current family (or of its _bucket/_sum/_count series for a histogram).
  void Sample(const std::string& name, const PromLabels& labels, double value);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// Label values escape backslash, double quote and newline; HELP text backslash and newline.
std::string EscapeLabelValue(const std::string& v);
// 3, 0.25, 1e+21, NaN, +Inf, -Inf (Go's ParseFloat reads them all).
std::string FormatPromValue(double v);

}  // namespace drover::server
