#pragma once
// Detectors: pure code that watches one stream (a run's metric, a run's GPU memory, one GPU's
// utilisation) and says when something looks wrong. No clock, no threads, no store: the engine
// feeds them values with their times and turns findings into alerts (which dedups them).
// docs/metrics.md explains each one and its thresholds.
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/spec.h"  // Json

namespace drover::watch {

// Thresholds, with their defaults (config file `detectors:` section, docs/metrics.md).
struct DetectorConfig {
  // Loss spike: a value above median + threshold x (1.4826 x MAD) of the previous `window`
  // values, once at least `min_points` are known.
  int spike_window = 50;
  int spike_min_points = 20;
  double spike_threshold = 6.0;
  // Plateau: `window` points in a row without the best value improving by more than
  // `min_delta` (relative to the best so far).
  int plateau_window = 100;
  double plateau_min_delta = 1e-3;
  // Idle GPU: utilisation under `idle_utilization` percent for `idle_for_ms` while a run holds it.
  double idle_utilization = 30;
  Millis idle_for_ms = 5 * 60 * 1000;
  // Memory leak: over the last `leak_window` samples of a run's GPU memory, growth of at least
  // `leak_min_growth` bytes with at least `leak_monotonic` of the steps non-decreasing, and each
  // quarter of the window higher on average than the one before (not one jump at start-up).
  int leak_window = 20;
  int64_t leak_min_growth = int64_t{256} << 20;
  double leak_monotonic = 0.8;
  // Fragmentation: (reserved - allocated) / reserved above `fragmentation` for
  // `fragmentation_samples` samples in a row, when reserved is at least
  // `fragmentation_min_reserved` bytes (small pools are all slack).
  double fragmentation = 0.25;
  int fragmentation_samples = 3;
  int64_t fragmentation_min_reserved = int64_t{512} << 20;
  // Repeated failure: the same fingerprint failing this many attempts in a row.
  int failure_streak = 3;
  // Stalled input pipeline: over the last `input_window` samples of a GPU a run holds, at least
  // `input_low_share` of them at or under `input_low` percent and at least `input_high_share`
  // at or over `input_high` percent, going from low to high at least `input_bursts` times: the
  // GPU works in bursts and waits for data between them.
  int input_window = 24;
  double input_low = 10;
  double input_high = 60;
  double input_low_share = 0.25;
  double input_high_share = 0.2;
  int input_bursts = 3;
};

// What a detector saw. The engine makes it an alert: kind and key suffix identify it,
// message is the sentence a person reads.
struct Finding {
  std::string kind;  // loss_spike, plateau, memory_leak, idle_gpu, fragmentation
  std::string severity = "warning";
  std::string message;         // e.g. "loss spiked to 9.1 at step 420 (median 0.52 over the
                               // last 50): possible gradient explosion"
  Json data = Json::object();  // the numbers: value, median, mad, step, growth_bytes, ...
};

// Upward spikes of a metric that should go down (a loss), by median/MAD over a sliding window.
class SpikeDetector {
 public:
  SpikeDetector(std::string metric, const DetectorConfig& config);
  std::optional<Finding> Add(int64_t step, double value);  // NaN/Inf are ignored here

 private:
  std::string metric_;
  DetectorConfig config_;
  std::deque<double> window_;   // in arrival order, for dropping the oldest
  std::vector<double> sorted_;  // the same, sorted: O(1) median, O(log n) MAD
};

// No improvement of a metric for `plateau_window` points, while the run is still far from its
// best: a run that made progress and now stays near its best value has converged, which is no
// finding. Far means the last `plateau_window` points average more than kFarFraction of the progress
// (first value to best) away from the best, or the run has barely moved from its first value
// (less than kMinProgress of it): stuck from the start. `maximize` for accuracy-like metrics.
// Fires once per plateau; a later improvement re-arms it.
class PlateauDetector {
 public:
  PlateauDetector(std::string metric, bool maximize, const DetectorConfig& config);
  std::optional<Finding> Add(int64_t step, double value);

 private:
  std::string metric_;
  bool maximize_;
  DetectorConfig config_;
  std::optional<double> first_;
  std::optional<double> best_;
  int64_t best_step_ = 0;
  int since_best_ = 0;
  std::deque<double> recent_;  // the last `plateau_window` points since the best
  double recent_sum_ = 0;
  bool fired_ = false;

 public:
  static constexpr double kFarFraction = 0.1;
  static constexpr double kMinProgress = 0.01;
};

// Steady growth of a run's GPU memory (bytes at time t): from the CUDA allocator's numbers the
// run logs (cuda_allocated_bytes) or from the driver's per-process memory.
class LeakDetector {
 public:
  LeakDetector(std::string source, const DetectorConfig& config);
  std::optional<Finding> Add(Millis t_ms, int64_t bytes);

 private:
  std::string source_;
  DetectorConfig config_;
  std::deque<std::pair<Millis, int64_t>> window_;
};

// The caching allocator holding memory it cannot use: (reserved - allocated) / reserved.
class FragmentationDetector {
 public:
  explicit FragmentationDetector(const DetectorConfig& config);
  // reserved < 0: unknown (only the ratio was logged); the minimum-size rule is then skipped.
  std::optional<Finding> Add(int64_t step, double ratio, int64_t reserved_bytes);

 private:
  DetectorConfig config_;
  int over_ = 0;
};

// A GPU a run holds but barely uses. Fires on every sample once idle for idle_for_ms (the
// alert's silence window turns that into one notification); a busy sample or no holder resets it.
class IdleGpuDetector {
 public:
  IdleGpuDetector(int gpu, const DetectorConfig& config);
  // `held`: some run holds this GPU now. Unknown utilisation (< 0) is ignored.
  std::optional<Finding> Add(Millis t_ms, double utilization, bool held);

 private:
  int gpu_;
  DetectorConfig config_;
  Millis idle_since_ms_ = -1;
};

// A GPU that works in bursts and idles between them while a run holds it: the run waits for its
// input (data loading, augmentation on the CPU), so the GPU is underused. Fires once the last
// input_window samples show the pattern; again only after a sample that breaks it re-arms it.
class InputStallDetector {
 public:
  InputStallDetector(int gpu, const DetectorConfig& config);
  std::optional<Finding> Add(Millis t_ms, double utilization, bool held);

 private:
  int gpu_;
  DetectorConfig config_;
  std::deque<double> window_;
  bool fired_ = false;
};

// What an alert's kind usually means and what researchers try first, in their words: each alert
// carries them (its data's "cause" and "remedies"), so a notification says what to do.
struct Advice {
  std::string cause;
  std::vector<std::string> remedies;
};
// Nothing for kinds without advice (a run's own alerts say what they mean).
std::optional<Advice> AdviceFor(std::string_view kind);

}  // namespace drover::watch
