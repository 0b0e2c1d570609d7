#include "report/series.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>


namespace drover::report {
namespace {

std::vector<MetricPoint> Points(const std::vector<double>& values) {
  std::vector<MetricPoint> out;
  for (size_t i = 0; i < values.size(); ++i) {
    MetricPoint p;
    p.step = static_cast<int64_t>(i);
    p.name = "loss";
    p.value = values[i];
    out.push_back(p);
  }
  return out;
}

std::vector<MetricPoint> Series(int n, double (*f)(int)) {
  std::vector<MetricPoint> out;
  for (int i = 0; i < n; ++i) out.push_back({1, 1, i, "loss", f(i), 1000 + i});
  return out;
}

// The bucket rule written the plain way, over a whole vector: the streaming downsampler must
// choose exactly the same points.
std::vector<MetricPoint> ReferenceDownsample(const std::vector<MetricPoint>& s, size_t max_points) {
  if (max_points < 2 || s.size() <= max_points) return s;
  std::vector<MetricPoint> out = {s.front()};
  size_t interior = s.size() - 2, buckets = (max_points - 2) / 2;
  for (size_t b = 0; b < buckets; ++b) {
    size_t lo = 1 + b * interior / buckets, hi = 1 + (b + 1) * interior / buckets;
    if (lo >= hi) continue;
    size_t imin = lo, imax = lo;
    for (size_t i = lo; i < hi; ++i) {
      double v = s[i].value;
      if (std::isnan(v)) continue;
      if (std::isnan(s[imin].value) || v < s[imin].value) imin = i;
      if (std::isnan(s[imax].value) || v > s[imax].value) imax = i;
    }
    out.push_back(s[std::min(imin, imax)]);
    if (imin != imax) out.push_back(s[std::max(imin, imax)]);
  }
  out.push_back(s.back());
  return out;
}

TEST(Downsample, PointsBeyondTheCountAreIgnored) {
  // A live series that grew between counting and reading: the answer keeps its limit.
  MinMaxDownsampler d(10, 4);
  for (int i = 0; i < 13; ++i) d.Add({1, 1, i, "loss", static_cast<double>(i), i});
  auto out = d.Finish();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out.front().step, 0);
  EXPECT_EQ(out.back().step, 9);
  MinMaxDownsampler all(3, 0);
  for (int i = 0; i < 5; ++i) all.Add({1, 1, i, "loss", 1.0, i});
  EXPECT_EQ(all.Finish().size(), 3u);
}

TEST(Downsample, StreamingPicksTheSamePointsAsTheBucketRule) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  for (size_t n : {0, 1, 2, 3, 7, 100, 101, 1000, 4097}) {
    std::vector<MetricPoint> s;
    for (size_t i = 0; i < n; ++i) {
      double v = u(rng) < 0.05 ? std::nan("") : u(rng);
      s.push_back({1, 1, static_cast<int64_t>(i), "loss", v, static_cast<int64_t>(i)});
    }
    for (size_t budget : {0, 1, 2, 3, 4, 5, 10, 51, 100, 2000}) {
      auto got = DownsampleMinMax(s, budget);
      auto want = ReferenceDownsample(s, budget);
      ASSERT_EQ(got.size(), want.size()) << n << " points, budget " << budget;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].step, want[i].step) << n << " points, budget " << budget << ", #" << i;
      }
    }
  }
}

TEST(Downsample, ShortSeriesUnchanged) {
  auto s = Series(10, [](int i) { return i * 1.0; });
  EXPECT_EQ(DownsampleMinMax(s, 10).size(), 10u);
  EXPECT_EQ(DownsampleMinMax(s, 50).size(), 10u);
  EXPECT_EQ(DownsampleMinMax(s, 0).size(), 10u);
}

TEST(Downsample, KeepsFirstLastAndExtremes) {
  // A smooth decline with one spike and one dip: both must survive 1000 -> 50.
  auto s = Series(1000, [](int i) { return 10.0 - i * 0.01; });
  s[333].value = 1000;
  s[777].value = -1000;
  auto d = DownsampleMinMax(s, 50);
  ASSERT_EQ(d.size(), 50u);
  EXPECT_EQ(d.front().step, 0);
  EXPECT_EQ(d.back().step, 999);
  bool spike = false, dip = false;
  for (size_t i = 1; i < d.size(); ++i) EXPECT_LT(d[i - 1].step, d[i].step);  // step order
  for (const auto& p : d) {
    spike |= p.step == 333;
    dip |= p.step == 777;
  }
  EXPECT_TRUE(spike);
  EXPECT_TRUE(dip);
}

TEST(Downsample, OddBudgetsAndTinyBudgets) {
  auto s = Series(1000, [](int i) { return std::sin(i * 0.1); });
  EXPECT_LE(DownsampleMinMax(s, 51).size(), 51u);
  EXPECT_GE(DownsampleMinMax(s, 51).size(), 49u);
  auto two = DownsampleMinMax(s, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].step, 0);
  EXPECT_EQ(two[1].step, 999);
  EXPECT_EQ(DownsampleMinMax(s, 4).size(), 4u);
  // More buckets than interior points never repeats a point.
  auto small = Series(7, [](int i) { return i * 1.0; });
  auto d = DownsampleMinMax(small, 6);
  for (size_t i = 1; i < d.size(); ++i) EXPECT_LT(d[i - 1].step, d[i].step);
}

TEST(Downsample, NaNDoesNotHideNumbers) {
  auto s = Series(100, [](int i) { return i % 2 ? std::nan("") : i * 1.0; });
  auto d = DownsampleMinMax(s, 10);
  int numbers = 0;
  for (const auto& p : d) numbers += !std::isnan(p.value);
  EXPECT_GE(numbers, 8);
}

TEST(DownsampleMinMax, KeepsEndsSpikesAndTheLimit) {
  std::vector<double> v(1000, 1.0);
  v[500] = 9;
  v[501] = -9;
  v[998] = std::numeric_limits<double>::quiet_NaN();
  auto out = DownsampleMinMax(Points(v), 50);
  EXPECT_LE(out.size(), 50u);
  EXPECT_EQ(out.front().step, 0);
  EXPECT_EQ(out.back().step, 999);
  bool spike = false, dip = false;
  for (size_t i = 0; i < out.size(); ++i) {
    spike = spike || out[i].value == 9;
    dip = dip || out[i].value == -9;
    if (i > 0) {
      EXPECT_LT(out[i - 1].step, out[i].step);  // step order
    }
    EXPECT_FALSE(std::isnan(out[i].value)) << "NaN is never chosen over a number";
  }
  EXPECT_TRUE(spike);
  EXPECT_TRUE(dip);
  EXPECT_EQ(DownsampleMinMax(Points(v), 0).size(), 1000u);
  EXPECT_EQ(DownsampleMinMax(Points({1, 2, 3}), 2).size(), 2u);
  EXPECT_EQ(DownsampleMinMax(Points({1, 2, 3}), 10).size(), 3u);
}

}  // namespace
}  // namespace drover::report
