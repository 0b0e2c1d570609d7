#include "sched/gittins.h"

#include <algorithm>
#include <cmath>

namespace drover::sched {
namespace {

constexpr double kFirstStepMs = 60'000;  // one GPU-minute
constexpr int kSteps = 40;               // doubling: up to about 60,000 GPU-years

double StepStart(int step) { return step == 0 ? 0 : kFirstStepMs * std::ldexp(1.0, step - 1); }

}  // namespace

int GittinsIndex::Step(Millis attained) {
  if (attained < kFirstStepMs) return 0;
  int s = 1 + static_cast<int>(std::floor(std::log2(static_cast<double>(attained) / kFirstStepMs)));
  return std::min(s, kSteps - 1);
}

GittinsIndex::GittinsIndex(std::vector<Millis> sizes, size_t min_samples) {
  if (sizes.size() < std::max<size_t>(min_samples, 1)) return;
  std::sort(sizes.begin(), sizes.end());
  std::vector<double> prefix(sizes.size() + 1, 0);  // sum of the first i sizes
  for (size_t i = 0; i < sizes.size(); ++i) prefix[i + 1] = prefix[i] + sizes[i];
  auto count_le = [&](double v) {
    return static_cast<size_t>(std::upper_bound(sizes.begin(), sizes.end(), v,
                                                [](double x, Millis s) { return x < s; }) -
                               sizes.begin());
  };
  index_.assign(kSteps, 0);
  for (int step = 0; step < kSteps; ++step) {
    double a = StepStart(step);
    size_t lo = count_le(a);  // sizes <= a are done
    size_t alive = sizes.size() - lo;
    if (alive == 0) {
      index_[step] = step == 0 ? 0 : index_[step - 1];
      continue;
    }
    double best = 0;
    for (int end = step + 1; end <= kSteps; ++end) {
      double d = StepStart(end) - a;
      size_t hi = count_le(a + d);
      double done = static_cast<double>(hi - lo);
      // Service spent on the runs that finish within d, and d on each that does not.
      double spent = (prefix[hi] - prefix[lo]) - done * a + static_cast<double>(sizes.size() - hi) * d;
      if (spent > 0) best = std::max(best, done / spent);
    }
    index_[step] = best;
  }
}

double GittinsIndex::Index(Millis attained) const {
  if (index_.empty()) return 0;
  return index_[Step(attained)];
}

}  // namespace drover::sched
