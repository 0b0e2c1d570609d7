// The metric line scanner, differentially: for every line, the fast scanner and the full JSON
// parser must give the same step and the same values in the same order (docs/metrics.md). Alert
// lines are parsed too.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "metrics/metric_lines.h"

namespace {

bool Same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0 || a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace drover;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= all.size()) {
    size_t nl = all.find('\n', start);
    if (nl == std::string_view::npos) nl = all.size();
    std::string_view line = all.substr(start, nl - start);
    std::optional<MetricLine> fast = ParseMetricLine(line, 7);
    std::optional<MetricLine> full = ParseMetricLineWithJson(line, 7);
    bool same = fast.has_value() == full.has_value();
    if (same && fast) {
      same = fast->step == full->step && fast->values.size() == full->values.size();
      for (size_t i = 0; same && i < fast->values.size(); ++i) {
        same = fast->values[i].first == full->values[i].first &&
               Same(fast->values[i].second, full->values[i].second);
      }
    }
    if (!same) {
      std::fprintf(stderr, "the scanner and the JSON parser disagree on: %.*s\n",
                   static_cast<int>(line.size()), line.data());
      std::abort();
    }
    (void)ParseAlertLine(line);
    start = nl + 1;
  }
  return 0;
}
