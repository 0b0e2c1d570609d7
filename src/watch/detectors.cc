#include "watch/detectors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "common/strings.h"

namespace drover::watch {
namespace {

// A metric value as a person reads it: 9.13, 0.52, 0.000123, 12345.
std::string Num(double v) {
  // Three significant digits, but no exponent for large values ("1234", not "1.23e+03").
  if (std::fabs(v) >= 99.95 && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{:.3g}", v);
}

// The median of a sorted, non-empty window.
double SortedMedian(const std::vector<double>& s) {
  size_t n = s.size();
  return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

// The median absolute deviation from `median` of a sorted, non-empty window, without a copy or
// a sort. The deviations grow outwards from the median on both sides: A[i] = median - s[l - i]
// to the left, B[j] = s[r + j] - median to the right, each sorted. The middle deviation is the
// t-th smallest of the two sorted lists, found by binary search on how many come from A.
double SortedMad(const std::vector<double>& s, double median) {
  const ptrdiff_t n = static_cast<ptrdiff_t>(s.size());
  const ptrdiff_t l = n % 2 == 1 ? n / 2 : n / 2 - 1;  // s[0..l] <= median <= s[r..n)
  const ptrdiff_t r = l + 1;
  const ptrdiff_t la = l + 1, lb = n - r;
  auto a = [&](ptrdiff_t i) { return median - s[static_cast<size_t>(l - i)]; };
  auto b = [&](ptrdiff_t j) { return s[static_cast<size_t>(r + j)] - median; };
  const ptrdiff_t t = n / 2;  // the (upper) middle deviation, 0-based; t + 1 values are taken
  ptrdiff_t lo = std::max<ptrdiff_t>(0, t + 1 - lb), hi = std::min(t + 1, la);
  ptrdiff_t i = lo, j = t + 1 - lo;
  while (lo <= hi) {
    i = (lo + hi) / 2;
    j = t + 1 - i;
    if (i < la && j > 0 && b(j - 1) > a(i)) {
      lo = i + 1;  // too few from A
    } else if (i > 0 && j < lb && a(i - 1) > b(j)) {
      hi = i - 1;  // too many from A
    } else {
      break;
    }
  }
  // The t + 1 smallest deviations are A[0..i) and B[0..j); the largest of them is the t-th.
  double last_a = i > 0 ? a(i - 1) : -HUGE_VAL;
  double last_b = j > 0 ? b(j - 1) : -HUGE_VAL;
  double upper = std::max(last_a, last_b);
  if (n % 2 == 1) return upper;
  // Even n: the median is the mean of the t-th and (t-1)-th, the second largest taken.
  double lower = last_a >= last_b ? std::max(i > 1 ? a(i - 2) : -HUGE_VAL, last_b)
                                  : std::max(j > 1 ? b(j - 2) : -HUGE_VAL, last_a);
  return (lower + upper) / 2;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

SpikeDetector::SpikeDetector(std::string metric, const DetectorConfig& config)
    : metric_(std::move(metric)), config_(config) {
  config_.spike_window = std::max(config_.spike_window, 1);
  sorted_.reserve(static_cast<size_t>(config_.spike_window) + 1);
}

std::optional<Finding> SpikeDetector::Add(int64_t step, double value) {
  if (!std::isfinite(value)) return std::nullopt;
  std::optional<Finding> finding;
  const size_t n = sorted_.size();
  if (n > 0 && static_cast<int64_t>(n) >= config_.spike_min_points) {
    double median = SortedMedian(sorted_);
    // At or below the median nothing is a spike (the threshold is positive): skip the MAD.
    if (value > median) {
      double mad = SortedMad(sorted_, median);
      double scale = std::max({1.4826 * mad, 1e-3 * std::fabs(median), 1e-12});
      double limit = median + config_.spike_threshold * scale;
      if (value > limit) {
        Finding f;
        f.kind = "loss_spike";
        f.severity = "warning";
        f.message = fmt::format(
            "{} spiked to {} at step {} (median {} over the last {} values): possible gradient "
            "explosion",
            metric_, Num(value), step, Num(median), n);
        f.data = Json{{"metric", metric_}, {"step", step}, {"value", value},
                      {"median", median},  {"mad", mad},   {"threshold", config_.spike_threshold},
                      {"limit", limit},    {"window", n}};
        finding = std::move(f);
      }
    }
  }
  window_.push_back(value);
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), value), value);
  if (static_cast<int64_t>(window_.size()) > config_.spike_window) {
    double oldest = window_.front();
    window_.pop_front();
    sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), oldest));
  }
  return finding;
}

// ---------------------------------------------------------------------------------------------

PlateauDetector::PlateauDetector(std::string metric, bool maximize, const DetectorConfig& config)
    : metric_(std::move(metric)), maximize_(maximize), config_(config) {}

std::optional<Finding> PlateauDetector::Add(int64_t step, double value) {
  if (!std::isfinite(value)) return std::nullopt;
  if (!best_) {
    first_ = best_ = value;
    best_step_ = step;
    since_best_ = 0;
    return std::nullopt;
  }
  double margin = config_.plateau_min_delta * std::max(std::fabs(*best_), 1e-12);
  bool improved = maximize_ ? value > *best_ + margin : value < *best_ - margin;
  if (improved) {
    best_ = value;
    best_step_ = step;
    since_best_ = 0;
    recent_.clear();
    recent_sum_ = 0;
    fired_ = false;
    return std::nullopt;
  }
  ++since_best_;
  recent_.push_back(value);
  recent_sum_ += value;
  if (static_cast<int>(recent_.size()) > std::max(1, config_.plateau_window)) {
    recent_sum_ -= recent_.front();
    recent_.pop_front();
  }
  if (fired_ || since_best_ < config_.plateau_window) return std::nullopt;
  // Converged (it made progress and stays near its best): not a plateau worth a word. Looked at
  // again with each later point, so a run that drifts away from its best is still reported.
  const double progress = std::fabs(*first_ - *best_);
  const bool moved = progress > kMinProgress * std::max(std::fabs(*first_), 1e-12);
  const double gap = std::fabs(recent_sum_ / static_cast<double>(recent_.size()) - *best_);
  if (moved && gap <= kFarFraction * progress) return std::nullopt;
  fired_ = true;
  Finding f;
  f.kind = "plateau";
  f.severity = "info";
  f.message = fmt::format("{} has not improved for {} points (best {} at step {})", metric_,
                          since_best_, Num(*best_), best_step_);
  f.data = Json{{"metric", metric_},
                {"step", step},
                {"value", value},
                {"best", *best_},
                {"best_step", best_step_},
                {"points", since_best_},
                {"mode", maximize_ ? "max" : "min"}};
  return f;
}

// ---------------------------------------------------------------------------------------------

LeakDetector::LeakDetector(std::string source, const DetectorConfig& config)
    : source_(std::move(source)), config_(config) {}

std::optional<Finding> LeakDetector::Add(Millis t_ms, int64_t bytes) {
  if (bytes < 0) return std::nullopt;  // unknown
  const size_t size = static_cast<size_t>(std::max(config_.leak_window, 2));
  window_.emplace_back(t_ms, bytes);
  while (window_.size() > size) window_.pop_front();
  if (window_.size() < size) return std::nullopt;

  const auto& [t0, first] = window_.front();
  const auto& [t1, last] = window_.back();
  int64_t growth = last - first;
  if (growth < config_.leak_min_growth || growth <= 0) return std::nullopt;
  size_t nondecreasing = 0;
  for (size_t i = 1; i < window_.size(); ++i) {
    if (window_[i].second >= window_[i - 1].second) ++nondecreasing;
  }
  double fraction = static_cast<double>(nondecreasing) / static_cast<double>(window_.size() - 1);
  if (fraction < config_.leak_monotonic) return std::nullopt;
  // Growth all along, not one jump: a run's start (CUDA context, weights, optimizer state) steps
  // up once and then holds, which the two checks above would take for a leak. Each quarter of the
  // window must average more than the one before.
  double previous = -1;
  for (size_t q = 0; q < 4; ++q) {
    size_t from = q * window_.size() / 4, to = (q + 1) * window_.size() / 4;
    double sum = 0;
    for (size_t i = from; i < to; ++i) sum += static_cast<double>(window_[i].second);
    double mean = sum / static_cast<double>(std::max<size_t>(1, to - from));
    if (q > 0 && mean <= previous) return std::nullopt;
    previous = mean;
  }

  Millis span = t1 - t0;
  double rate = span > 0 ? static_cast<double>(growth) * 60'000.0 / static_cast<double>(span) : 0;
  std::string rate_text =
      span > 0 ? fmt::format(", {}/min", FormatBytes(static_cast<int64_t>(std::llround(rate))))
               : "";
  Finding f;
  f.kind = "memory_leak";
  f.severity = "warning";
  f.message = fmt::format(
      "GPU memory ({}) grew by {} over the last {} samples ({} -> {}{}): possible memory leak",
      source_, FormatBytes(growth), window_.size(), FormatBytes(first), FormatBytes(last),
      rate_text);
  f.data = Json{{"source", source_},
                {"growth_bytes", growth},
                {"from_bytes", first},
                {"to_bytes", last},
                {"rate_bytes_per_min", rate},
                {"samples", window_.size()},
                {"span_ms", span},
                {"nondecreasing_fraction", fraction}};
  return f;
}

// ---------------------------------------------------------------------------------------------

FragmentationDetector::FragmentationDetector(const DetectorConfig& config) : config_(config) {}

std::optional<Finding> FragmentationDetector::Add(int64_t step, double ratio,
                                                  int64_t reserved_bytes) {
  if (!std::isfinite(ratio)) return std::nullopt;
  bool big_enough = reserved_bytes < 0 || reserved_bytes >= config_.fragmentation_min_reserved;
  if (!(ratio > config_.fragmentation) || !big_enough) {
    over_ = 0;
    return std::nullopt;
  }
  ++over_;
  if (over_ < config_.fragmentation_samples) return std::nullopt;
  std::string held;
  if (reserved_bytes >= 0) {
    held = fmt::format(" ({} of {} reserved is not allocated)",
                       FormatBytes(static_cast<int64_t>(std::llround(ratio * reserved_bytes))),
                       FormatBytes(reserved_bytes));
  }
  Finding f;
  f.kind = "fragmentation";
  f.severity = "warning";
  f.message = fmt::format(
      "CUDA allocator fragmentation {:.0f}% (reserved - allocated over reserved) for {} samples{}: "
      "the caching allocator holds memory it cannot reuse; set "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
      ratio * 100, over_, held);
  f.data = Json{{"step", step},
                {"ratio", ratio},
                {"reserved_bytes", reserved_bytes},
                {"samples", over_},
                {"threshold", config_.fragmentation}};
  return f;
}

// ---------------------------------------------------------------------------------------------

IdleGpuDetector::IdleGpuDetector(int gpu, const DetectorConfig& config)
    : gpu_(gpu), config_(config) {}

std::optional<Finding> IdleGpuDetector::Add(Millis t_ms, double utilization, bool held) {
  if (!held) {
    idle_since_ms_ = -1;
    return std::nullopt;
  }
  if (!(utilization >= 0)) return std::nullopt;  // unknown (negative or NaN): no change
  if (utilization >= config_.idle_utilization) {
    idle_since_ms_ = -1;
    return std::nullopt;
  }
  if (idle_since_ms_ < 0) idle_since_ms_ = t_ms;
  Millis idle = t_ms - idle_since_ms_;
  if (idle < config_.idle_for_ms) return std::nullopt;
  Finding f;
  f.kind = "idle_gpu";
  f.severity = "warning";
  f.message = fmt::format("GPU {} is held by a run but {:.0f}% utilised for {}", gpu_, utilization,
                          FormatDuration(idle));
  f.data = Json{{"gpu", gpu_},
                {"utilization", utilization},
                {"idle_ms", idle},
                {"since_ms", idle_since_ms_},
                {"threshold", config_.idle_utilization}};
  return f;
}

InputStallDetector::InputStallDetector(int gpu, const DetectorConfig& config)
    : gpu_(gpu), config_(config) {}

std::optional<Finding> InputStallDetector::Add(Millis t_ms, double utilization, bool held) {
  if (!held) {
    window_.clear();
    fired_ = false;
    return std::nullopt;
  }
  if (!(utilization >= 0)) return std::nullopt;
  window_.push_back(utilization);
  const size_t n = static_cast<size_t>(std::max(4, config_.input_window));
  while (window_.size() > n) window_.pop_front();
  if (window_.size() < n) return std::nullopt;
  int low = 0, high = 0, bursts = 0;
  bool was_low = false;
  for (double u : window_) {
    if (u <= config_.input_low) {
      ++low;
      was_low = true;
    } else if (u >= config_.input_high) {
      ++high;
      if (was_low) ++bursts;
      was_low = false;
    }
  }
  const bool pattern = low >= config_.input_low_share * static_cast<double>(n) &&
                       high >= config_.input_high_share * static_cast<double>(n) &&
                       bursts >= config_.input_bursts;
  if (!pattern) {
    fired_ = false;
    return std::nullopt;
  }
  if (fired_) return std::nullopt;
  fired_ = true;
  double mean = 0;
  for (double u : window_) mean += u;
  mean /= static_cast<double>(n);
  Finding f;
  f.kind = "input_stall";
  f.severity = "warning";
  f.message = fmt::format(
      "GPU {} works in bursts: {} of its last {} samples near idle (<= {:.0f}%) between {} bursts "
      "(mean {:.0f}%): the run waits for its input data",
      gpu_, low, n, config_.input_low, bursts, mean);
  f.data = Json{{"gpu", gpu_}, {"low_samples", low}, {"high_samples", high}, {"bursts", bursts},
                {"samples", n}, {"mean_utilization", mean}, {"t_ms", t_ms}};
  return f;
}

std::optional<Advice> AdviceFor(std::string_view kind) {
  if (kind == "diverged") {
    return Advice{
        "the loss became NaN or infinite: the optimisation diverged (too large a step, an "
        "exploding gradient, or a log/division of zero in the loss)",
        {"lower the learning rate (try 3-10x lower) or add warm-up",
         "clip gradients (torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))",
         "check the loss for log(0) or division by zero (add an epsilon, use log_softmax / "
         "BCEWithLogitsLoss)",
         "with fp16 mixed precision, use a GradScaler or switch to bf16"}};
  }
  if (kind == "loss_spike") {
    return Advice{"a sudden jump of the loss: often a gradient explosion or a bad batch",
                  {"clip gradients (clip_grad_norm_ at 1.0)", "lower the learning rate or "
                   "lengthen warm-up", "look for corrupt or mislabelled samples in that batch"}};
  }
  if (kind == "plateau") {
    return Advice{"the metric stopped improving while still far from its best",
                  {"lower the learning rate (or use a schedule: cosine, ReduceLROnPlateau)",
                   "check that the data is shuffled and the labels line up",
                   "try a larger model or less regularisation if training loss is stuck too"}};
  }
  if (kind == "idle_gpu") {
    return Advice{"the run holds a GPU it barely uses: it may be computing on the CPU, stuck, "
                  "or waiting for data",
                  {"check the model and tensors are on the GPU (.to('cuda'))",
                   "raise DataLoader num_workers and set pin_memory=True",
                   "look at its log for a hang (drover logs RUN) and cancel it if stuck"}};
  }
  if (kind == "input_stall") {
    return Advice{"the input pipeline is the bottleneck: the GPU finishes each batch and waits "
                  "for the next one",
                  {"raise DataLoader num_workers (about the CPU cores you have)",
                   "set pin_memory=True and persistent_workers=True",
                   "prefetch (prefetch_factor) and move augmentation to the GPU",
                   "store the data set in a faster format or on local disk"}};
  }
  if (kind == "memory_leak") {
    return Advice{"GPU memory grows step after step: tensors are kept across steps",
                  {"log loss.item() instead of keeping the loss tensor (it holds the graph)",
                   "evaluate inside torch.no_grad()",
                   "do not append outputs or losses with their graph to a list; .detach() them"}};
  }
  if (kind == "fragmentation") {
    return Advice{"the CUDA caching allocator holds memory it cannot use for new blocks",
                  {"set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the spec's env",
                   "keep batch shapes fixed (pad variable-length inputs to a few sizes)",
                   "call torch.cuda.empty_cache() only between phases, not every step"}};
  }
  if (kind == "stalled") {
    return Advice{"the run printed nothing for its stall time: it may hang (a deadlock in data "
                  "loading or collective communication)",
                  {"look at its last output (drover logs RUN)", "with DataLoader workers, try "
                   "num_workers=0 to rule out a worker deadlock", "for NCCL hangs, set "
                   "NCCL_DEBUG=INFO and check every rank reaches the same collective"}};
  }
  if (kind == "repeated_failure") {
    return Advice{"the same config keeps failing the same way: retrying will not help",
                  {"read the error (drover show RUN, drover logs RUN)", "fix the code or config "
                   "and submit again; drover retry re-runs the failed runs"}};
  }
  if (kind == "oom") {
    return Advice{"CUDA ran out of memory",
                  {"halve the batch size (oom: {param: batch_size} in the spec does it)",
                   "use mixed precision (bf16/fp16) and gradient checkpointing",
                   "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation"}};
  }
  return std::nullopt;
}

}  // namespace drover::watch
