// The metric sources a run's attempts are read from, in the order each look reads them. A new
// source is a file of its own (a MetricSource and its Make function, declared in
// metric_source.h) and one line here.
#include "metrics/metric_source.h"

namespace drover {

std::span<const MetricSourceRegistration> MetricSources() {
  static const MetricSourceRegistration kSources[] = {
      {"stdout", MakeStdoutSource},
      {"tensorboard", MakeTensorBoardSource},
  };
  return kSources;
}

}  // namespace drover
