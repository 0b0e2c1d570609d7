#include "report/series.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace drover::report {

MinMaxDownsampler::MinMaxDownsampler(size_t count, size_t max_points)
    : count_(count), keep_all_(max_points < 2 || count <= max_points) {
  if (keep_all_) {
    out_.reserve(count);
    return;
  }
  out_.reserve(max_points);
  interior_ = count - 2;
  buckets_ = (max_points - 2) / 2;
  hi_ = buckets_ == 0 ? SIZE_MAX : Boundary(1);
}

size_t MinMaxDownsampler::Boundary(size_t b) const { return 1 + b * interior_ / buckets_; }

void MinMaxDownsampler::Add(const MetricPoint& p) {
  // Points past `count` (a live series that grew between counting and reading) are not taken:
  // the answer keeps its size limit and its last point.
  if (seen_ >= count_) return;
  size_t i = seen_++;
  if (keep_all_ || i == 0 || i + 1 >= count_) {
    if (!keep_all_ && i + 1 >= count_) Flush();
    out_.push_back(p);
    return;
  }
  if (buckets_ == 0) return;  // room for the first and last point only
  while (i >= hi_) {  // past this bucket: emit it, move on (empty buckets emit nothing)
    Flush();
    hi_ = Boundary(++bucket_ + 1);
  }
  // NaN is neither min nor max of a bucket that has numbers (a NaN-only bucket keeps one NaN).
  if (!have_) {
    min_ = max_ = p;
    min_i_ = max_i_ = i;
    have_ = true;
    return;
  }
  if (std::isnan(p.value)) return;
  if (std::isnan(min_.value) || p.value < min_.value) {
    min_ = p;
    min_i_ = i;
  }
  if (std::isnan(max_.value) || p.value > max_.value) {
    max_ = p;
    max_i_ = i;
  }
}

void MinMaxDownsampler::Flush() {
  if (!have_) return;
  if (min_i_ <= max_i_) {
    out_.push_back(min_);
    if (max_i_ != min_i_) out_.push_back(max_);
  } else {
    out_.push_back(max_);
    out_.push_back(min_);
  }
  have_ = false;
}

std::vector<MetricPoint> MinMaxDownsampler::Finish() { return std::move(out_); }

std::vector<MetricPoint> DownsampleMinMax(const std::vector<MetricPoint>& series,
                                          size_t max_points) {
  MinMaxDownsampler d(series.size(), max_points);
  for (const MetricPoint& p : series) d.Add(p);
  return d.Finish();
}

}  // namespace drover::report
