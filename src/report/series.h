#pragma once
// Metric series as the report reads them, and the downsampling that keeps a long one small.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/run.h"

namespace drover::report {

// One metric of one run: its points in attempt-then-step order, maybe downsampled.
struct MetricSeries {
  std::string name;
  int64_t count = 0;  // points before downsampling
  std::vector<MetricPoint> points;
};

// The contract of GET /api/v1/runs/{id}/metrics?points=N (docs/http-api.md), so a report reads
// the same curve from the store as from a daemon: a series longer than `max_points` keeps its
// first and last point; the points between are cut into (max_points - 2) / 2 buckets of equal
// count, each giving its lowest and highest value in step order (one point when they are the
// same point). NaN is never chosen over a number. max_points < 2 keeps everything.
std::vector<MetricPoint> DownsampleMinMax(const std::vector<MetricPoint>& series,
                                          size_t max_points);

// The same, one point at a time, for a series whose length is known before it is read (the
// daemon streams a 1,000,000-point curve from the store through it without holding it whole).
class MinMaxDownsampler {
 public:
  MinMaxDownsampler(size_t count, size_t max_points);
  void Add(const MetricPoint& p);  // `count` times, in order; further points are ignored
  std::vector<MetricPoint> Finish();

 private:
  size_t Boundary(size_t bucket) const;  // the first index of a bucket
  void Flush();

  size_t count_;
  bool keep_all_;
  size_t interior_ = 0, buckets_ = 1, bucket_ = 0, hi_ = 0, seen_ = 0;
  bool have_ = false;
  MetricPoint min_, max_;
  size_t min_i_ = 0, max_i_ = 0;
  std::vector<MetricPoint> out_;
};

}  // namespace drover::report
