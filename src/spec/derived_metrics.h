#pragma once
// Derived metrics (the spec's metrics: section, docs/metrics.md): expressions over logged
// metrics, such as `err: 1 - val_acc` or `samples_per_s: samples / time_s`, evaluated by
// muparser at each step where one of their inputs was reported. Their points are stored like
// logged ones, so they serve as an objective, in compare, plots and alerts.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "model/spec.h"

namespace drover {

// The metric names `expression` reads (letters, digits, '_' and '.'; muparser's functions and
// constants such as sqrt, ln, min, max, _pi are not names), or why it is not an expression.
Result<std::vector<std::string>> ExpressionInputs(const std::string& expression);

// Evaluates a spec's derived metrics for one run. Feed it the run's points in order; each time a
// step ends (a point of another step arrives, or Flush) every derived metric with an input
// reported at that step is computed from the latest value of each input, once all its inputs
// have a value. Derived metrics may read those written above them.
class DerivedMetrics {
 public:
  explicit DerivedMetrics(const std::vector<DerivedMetricSpec>& specs);
  ~DerivedMetrics();
  DerivedMetrics(const DerivedMetrics&) = delete;
  DerivedMetrics& operator=(const DerivedMetrics&) = delete;

  bool empty() const { return formulas_.empty(); }
  // What a restarted engine knew: the run's last value of each metric.
  void Seed(const std::map<std::string, double>& latest);
  // A logged point; returns the derived points of the step that ended before it, if any.
  std::vector<std::pair<int64_t, std::pair<std::string, double>>> Feed(int64_t step,
                                                                       const std::string& name,
                                                                       double value);
  // Ends the current step (the end of a batch of points).
  std::vector<std::pair<int64_t, std::pair<std::string, double>>> Flush();

 private:
  struct Formula;
  std::vector<std::unique_ptr<Formula>> formulas_;
  std::map<std::string, double> latest_;
  std::vector<bool> dirty_;  // by formula: an input was reported in the pending step
  bool pending_ = false;
  int64_t pending_step_ = 0;
};

}  // namespace drover
