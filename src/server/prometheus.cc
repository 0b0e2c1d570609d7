#include "server/prometheus.h"

#include <fmt/format.h>

#include <cmath>

namespace drover::server {

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatPromValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void PromWriter::Family(const std::string& name, const std::string& type,
                        const std::string& help) {
  std::string h;
  for (char c : help) {
    if (c == '\\') {
      h += "\\\\";
    } else if (c == '\n') {
      h += "\\n";
    } else {
      h += c;
    }
  }
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, h, name, type);
}

void PromWriter::Sample(const std::string& name, const PromLabels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      out_ += fmt::format("{}=\"{}\"", labels[i].first, EscapeLabelValue(labels[i].second));
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatPromValue(value);
  out_ += '\n';
}

}  // namespace drover::server
