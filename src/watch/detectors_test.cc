#include "watch/detectors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace drover::watch {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

// ----------------------------------------------------------------------------------------------
// Loss spike

TEST(SpikeDetectorTest, FiresOnATenfoldValueAfterNoisyPoints) {
  DetectorConfig config;
  SpikeDetector d("loss", config);
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.02);
  for (int step = 0; step < 30; ++step) {
    EXPECT_FALSE(d.Add(step, 0.5 + noise(rng))) << step;
  }
  std::optional<Finding> f = d.Add(30, 5.0);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, "loss_spike");
  EXPECT_EQ(f->severity, "warning");
  EXPECT_EQ(f->data["metric"], "loss");
  EXPECT_EQ(f->data["step"], 30);
  EXPECT_DOUBLE_EQ(f->data["value"].get<double>(), 5.0);
  EXPECT_NEAR(f->data["median"].get<double>(), 0.5, 0.02);
  EXPECT_GT(f->data["mad"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(f->data["threshold"].get<double>(), 6.0);
  EXPECT_NE(f->message.find("loss spiked to 5 at step 30 (median 0.49"), std::string::npos)
      << f->message;
  EXPECT_NE(f->message.find("over the last 30 values): possible gradient explosion"),
            std::string::npos)
      << f->message;
  // The spike joins the window, but one outlier does not move the median: the next normal
  // value is quiet, and a second spike still fires.
  EXPECT_FALSE(d.Add(31, 0.5));
  EXPECT_TRUE(d.Add(32, 6.0));
}

// The median and MAD the detector reports match a plain sort, for odd and even windows, with
// duplicates, and after the window has slid.
TEST(SpikeDetectorTest, MedianAndMadMatchASort) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(0, 9);
  std::lognormal_distribution<double> skewed(0, 1);
  for (bool duplicates : {true, false}) {
    for (int window : {1, 2, 3, 4, 5, 6, 7, 10, 49, 50, 51}) {
      for (int total : {window, window + 3, 3 * window + 1}) {
        DetectorConfig config;
        config.spike_window = window;
        config.spike_min_points = window;
        config.spike_threshold = 1e-9;  // anything above the median is a spike
        std::vector<double> all;
        for (int i = 0; i < total; ++i) {
          all.push_back(duplicates ? small(rng) * 0.5 : skewed(rng) - 2);
        }
        // (Findings while filling do not matter: every value joins the window either way.)
        SpikeDetector e("loss", config);
        for (int i = 0; i < total; ++i) e.Add(i, all[i]);
        std::vector<double> last(all.end() - window, all.end());
        std::sort(last.begin(), last.end());
        size_t n = last.size();
        double median = n % 2 ? last[n / 2] : (last[n / 2 - 1] + last[n / 2]) / 2;
        std::vector<double> dev;
        for (double x : last) dev.push_back(std::fabs(x - median));
        std::sort(dev.begin(), dev.end());
        double mad = n % 2 ? dev[n / 2] : (dev[n / 2 - 1] + dev[n / 2]) / 2;
        std::optional<Finding> f = e.Add(total, 1e6);
        ASSERT_TRUE(f) << window << " " << total;
        EXPECT_DOUBLE_EQ(f->data["median"].get<double>(), median) << window << " " << total;
        EXPECT_DOUBLE_EQ(f->data["mad"].get<double>(), mad)
            << window << " " << total << " " << duplicates;
        EXPECT_EQ(f->data["window"], window);
      }
    }
  }
}

TEST(SpikeDetectorTest, NeedsMinPointsFirst) {
  DetectorConfig config;
  config.spike_min_points = 20;
  SpikeDetector d("loss", config);
  for (int step = 0; step < 19; ++step) d.Add(step, 0.5 + 0.01 * (step % 3));
  EXPECT_FALSE(d.Add(19, 50.0));  // 19 values known: not yet
  SpikeDetector e("loss", config);
  for (int step = 0; step < 20; ++step) e.Add(step, 0.5 + 0.01 * (step % 3));
  EXPECT_TRUE(e.Add(20, 50.0));
}

TEST(SpikeDetectorTest, QuietOnOrdinaryNoise) {
  DetectorConfig config;
  SpikeDetector d("loss", config);
  std::mt19937 rng(42);
  std::normal_distribution<double> noise(0, 0.05);
  int findings = 0;
  for (int step = 0; step < 5000; ++step) {
    if (d.Add(step, 1.0 + noise(rng))) ++findings;
  }
  EXPECT_EQ(findings, 0);
}

TEST(SpikeDetectorTest, QuietOnADecayingNoisyLoss) {
  DetectorConfig config;
  SpikeDetector d("loss", config);
  std::mt19937 rng(1234);
  std::normal_distribution<double> noise(0, 1);
  for (int step = 0; step < 2000; ++step) {
    double clean = 0.1 + 2.3 * std::exp(-step / 300.0);
    double v = clean * (1 + 0.03 * noise(rng));
    EXPECT_FALSE(d.Add(step, v)) << "step " << step << " value " << v;
  }
}

TEST(SpikeDetectorTest, QuietOnASlowUpwardTrend) {
  // Validation loss creeping up (overfitting) is not a spike.
  DetectorConfig config;
  SpikeDetector d("val_loss", config);
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0, 0.005);
  for (int step = 0; step < 2000; ++step) {
    EXPECT_FALSE(d.Add(step, 0.3 + step * 1e-4 + noise(rng))) << step;
  }
}

TEST(SpikeDetectorTest, IgnoresNonFiniteValues) {
  DetectorConfig config;
  config.spike_min_points = 5;
  SpikeDetector d("loss", config);
  for (int step = 0; step < 5; ++step) d.Add(step, 1.0 + 0.01 * step);
  EXPECT_FALSE(d.Add(5, std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(d.Add(6, std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(d.Add(7, 1.02));
  EXPECT_TRUE(d.Add(8, 10.0));
}

TEST(SpikeDetectorTest, ConstantSeriesUsesARelativeFloor) {
  // MAD 0: the scale falls back to 1e-3 x |median|, so tiny wiggles are quiet, jumps are not.
  DetectorConfig config;
  SpikeDetector d("loss", config);
  for (int step = 0; step < 30; ++step) d.Add(step, 2.0);
  EXPECT_FALSE(d.Add(30, 2.01));  // 2.01 <= 2 + 6 x 0.002
  EXPECT_TRUE(d.Add(31, 2.5));
  SpikeDetector z("loss", config);
  for (int step = 0; step < 30; ++step) z.Add(step, 0.0);
  EXPECT_TRUE(z.Add(30, 1e-6));  // all zeros: the absolute floor
}

TEST(SpikeDetectorTest, DownwardMovesAreNotSpikes) {
  DetectorConfig config;
  SpikeDetector d("loss", config);
  for (int step = 0; step < 30; ++step) d.Add(step, 1.0 + 0.01 * (step % 5));
  EXPECT_FALSE(d.Add(30, 0.01));
}

TEST(SpikeDetectorTest, HalfAMillionPointsOfGaussianNoiseRarelyFire) {
  // Six scaled MADs is beyond 6 sigma for Gaussian noise. (Its speed is measured in
  // bench/watch.sh, not here.)
  DetectorConfig config;
  SpikeDetector d("loss", config);
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 0.05);
  constexpr int kPoints = 500'000;
  std::vector<double> values;
  values.reserve(kPoints);
  for (int i = 0; i < kPoints; ++i) values.push_back(1.0 + noise(rng));
  int findings = 0;
  for (int i = 0; i < kPoints; ++i) findings += d.Add(i, values[i]).has_value();
  EXPECT_LT(findings, 5);
}

TEST(LeakDetectorTest, AJumpAtStartThenFlatIsNotALeak) {
  // CUDA context, weights and optimizer state arrive in the first samples, then memory holds.
  DetectorConfig config;
  LeakDetector d("driver", config);
  int fired = 0;
  fired += d.Add(0, int64_t{500} << 20).has_value();
  for (int i = 1; i < 60; ++i) fired += d.Add(i * 5000, int64_t{8} << 30).has_value();
  EXPECT_EQ(fired, 0);
}

TEST(LeakDetectorTest, GrowthInChunksEveryFewSamplesIsALeak) {
  // The caching allocator grows in chunks: flat, flat, flat, +512 MiB, ...
  DetectorConfig config;
  LeakDetector d("driver", config);
  int fired = 0;
  for (int i = 0; i < 40; ++i) {
    fired += d.Add(i * 5000, (int64_t{4} << 30) + (i / 4) * (int64_t{512} << 20)).has_value();
  }
  EXPECT_GT(fired, 0);
}

// ----------------------------------------------------------------------------------------------
// Plateau

TEST(PlateauDetectorTest, FiresOnceAfterWindowFlatPoints) {
  DetectorConfig config;
  config.plateau_window = 10;
  PlateauDetector d("loss", /*maximize=*/false, config);
  EXPECT_FALSE(d.Add(0, 1.0));
  EXPECT_FALSE(d.Add(1, 0.5));  // best 0.5 at step 1
  for (int step = 2; step < 11; ++step) EXPECT_FALSE(d.Add(step, 0.5 + 0.01 * step)) << step;
  std::optional<Finding> f = d.Add(11, 0.6);  // the 10th point without improvement
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, "plateau");
  EXPECT_EQ(f->severity, "info");
  EXPECT_EQ(f->message, "loss has not improved for 10 points (best 0.5 at step 1)");
  EXPECT_EQ(f->data["best_step"], 1);
  EXPECT_EQ(f->data["points"], 10);
  for (int step = 12; step < 100; ++step) EXPECT_FALSE(d.Add(step, 0.55)) << step;
}

TEST(PlateauDetectorTest, ReArmsAfterImprovement) {
  DetectorConfig config;
  config.plateau_window = 5;
  PlateauDetector d("loss", false, config);
  d.Add(0, 1.0);
  int fired = 0;
  for (int step = 1; step <= 5; ++step) fired += d.Add(step, 1.0).has_value();
  EXPECT_EQ(fired, 1);
  EXPECT_FALSE(d.Add(6, 0.8));  // improvement: re-armed
  fired = 0;
  // Stuck well above the best (0.9 against 0.8: half the progress from 1.0 away).
  for (int step = 7; step <= 10; ++step) fired += d.Add(step, 0.9).has_value();
  EXPECT_EQ(fired, 0);
  std::optional<Finding> f = d.Add(11, 0.9);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->message, "loss has not improved for 5 points (best 0.8 at step 6)");
}

TEST(PlateauDetectorTest, ARunThatConvergedIsNoPlateauOneStuckFromTheStartIs) {
  DetectorConfig config;
  config.plateau_window = 50;
  // The loss falls from 2.0 to 0.1 and stays there, within 0.002: converged.
  PlateauDetector converged("loss", false, config);
  int step = 0;
  for (; step < 100; ++step) {
    EXPECT_FALSE(converged.Add(step, 0.1 + 1.9 * std::exp(-0.1 * step))) << step;
  }
  for (; step < 400; ++step) {
    EXPECT_FALSE(converged.Add(step, 0.1001 + 0.002 * ((step * 7919) % 100) / 100.0)) << step;
  }
  // Then it drifts back up, far from its best: that is reported.
  bool fired = false;
  for (; step < 500 && !fired; ++step) fired = converged.Add(step, 0.8).has_value();
  EXPECT_TRUE(fired);
  // A loss that never moves from where it started (a learning rate too low) is reported.
  PlateauDetector stuck("loss", false, config);
  fired = false;
  for (int s = 0; s <= 50 && !fired; ++s) fired = stuck.Add(s, 2.3 + 0.0001 * (s % 3)).has_value();
  EXPECT_TRUE(fired);
}

TEST(PlateauDetectorTest, TinyImprovementsDoNotCount) {
  DetectorConfig config;
  config.plateau_window = 5;
  config.plateau_min_delta = 1e-2;
  PlateauDetector d("loss", false, config);
  d.Add(0, 1.0);
  for (int step = 1; step < 5; ++step) EXPECT_FALSE(d.Add(step, 1.0 - 0.001 * step));
  EXPECT_TRUE(d.Add(5, 0.995));  // 0.5% better than the best: below min_delta (1%)
}

TEST(PlateauDetectorTest, MaximizeMode) {
  DetectorConfig config;
  config.plateau_window = 3;
  PlateauDetector d("val_acc", /*maximize=*/true, config);
  d.Add(10, 0.90);
  EXPECT_FALSE(d.Add(20, 0.95));  // better
  EXPECT_FALSE(d.Add(30, 0.10));  // lower is worse in max mode
  EXPECT_FALSE(d.Add(40, 0.94));
  std::optional<Finding> f = d.Add(50, 0.95);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->message, "val_acc has not improved for 3 points (best 0.95 at step 20)");
  EXPECT_EQ(f->data["mode"], "max");
  // In min mode the same drop would be an improvement.
  PlateauDetector m("loss", false, config);
  m.Add(10, 0.90);
  m.Add(20, 0.95);
  m.Add(30, 0.96);
  EXPECT_FALSE(m.Add(40, 0.10));
}

TEST(PlateauDetectorTest, IgnoresNonFiniteValues) {
  DetectorConfig config;
  config.plateau_window = 2;
  PlateauDetector d("loss", false, config);
  EXPECT_FALSE(d.Add(0, std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(d.Add(1, -std::numeric_limits<double>::infinity()));
  d.Add(2, 1.0);
  EXPECT_FALSE(d.Add(3, 1.0));
  EXPECT_TRUE(d.Add(4, 1.0));
}

// ----------------------------------------------------------------------------------------------
// Memory leak

TEST(LeakDetectorTest, FiresOnSteadyGrowth) {
  DetectorConfig config;  // window 20, min growth 256MiB, monotonic 0.8
  LeakDetector d("cuda_allocated_bytes", config);
  int64_t base = kGiB + 200 * kMiB;
  std::optional<Finding> f;
  for (int i = 0; i < 20; ++i) {
    f = d.Add(1'000'000 + i * 60'000, base + i * 100 * kMiB);  // 100MiB a minute
    if (i < 19) {
      EXPECT_FALSE(f) << i;
    }
  }
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, "memory_leak");
  EXPECT_EQ(f->severity, "warning");
  EXPECT_EQ(f->data["source"], "cuda_allocated_bytes");
  EXPECT_EQ(f->data["growth_bytes"], 19 * 100 * kMiB);
  EXPECT_EQ(f->data["from_bytes"], base);
  EXPECT_EQ(f->data["to_bytes"], base + 19 * 100 * kMiB);
  EXPECT_NEAR(f->data["rate_bytes_per_min"].get<double>(), 100.0 * kMiB, 1);
  EXPECT_EQ(f->message,
            "GPU memory (cuda_allocated_bytes) grew by 1.9GiB over the last 20 samples (1.2GiB "
            "-> 3.1GiB, 100MiB/min): possible memory leak");
  // It keeps firing while the condition holds (the alert layer dedups).
  EXPECT_TRUE(d.Add(1'000'000 + 20 * 60'000, base + 20 * 100 * kMiB));
}

TEST(LeakDetectorTest, ToleratesSomeDips) {
  DetectorConfig config;
  LeakDetector d("process", config);
  std::optional<Finding> f;
  for (int i = 0; i < 20; ++i) {
    int64_t v = kGiB + i * 50 * kMiB - (i % 7 == 3 ? 80 * kMiB : 0);  // 3 dips in 19 steps
    f = d.Add(i * 1000, v);
  }
  EXPECT_TRUE(f);
}

TEST(LeakDetectorTest, QuietOnASawtooth) {
  // Memory that is allocated over a few samples and freed again (an epoch's caches, a
  // validation pass): the window can hold a large rise, but a quarter of the steps go down.
  DetectorConfig config;
  LeakDetector d("cuda_allocated_bytes", config);
  for (int i = 0; i < 500; ++i) {
    int64_t v = 2 * kGiB + (i % 4) * 300 * kMiB;
    EXPECT_FALSE(d.Add(i * 1000, v)) << i;
  }
  // Alloc/free every other sample.
  LeakDetector e("cuda_allocated_bytes", config);
  for (int i = 0; i < 500; ++i) {
    EXPECT_FALSE(e.Add(i * 1000, 2 * kGiB + (i % 2) * kGiB)) << i;
  }
}

TEST(LeakDetectorTest, QuietOnGrowthBelowMin) {
  DetectorConfig config;
  LeakDetector d("cuda_allocated_bytes", config);
  for (int i = 0; i < 200; ++i) {
    EXPECT_FALSE(d.Add(i * 1000, kGiB + i * kMiB)) << i;  // 19MiB per window < 256MiB
  }
}

TEST(LeakDetectorTest, QuietOnFlatOrShrinkingMemory) {
  DetectorConfig config;
  config.leak_min_growth = 1;
  LeakDetector d("cuda_allocated_bytes", config);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(d.Add(i * 1000, kGiB));
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(d.Add(100'000 + i * 1000, kGiB - i * kMiB));
}

TEST(LeakDetectorTest, SameTimestampsHaveNoRate) {
  DetectorConfig config;
  config.leak_window = 3;
  LeakDetector d("cuda_allocated_bytes", config);
  d.Add(5, kGiB);
  d.Add(5, 2 * kGiB);
  std::optional<Finding> f = d.Add(5, 3 * kGiB);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->message,
            "GPU memory (cuda_allocated_bytes) grew by 2GiB over the last 3 samples (1GiB -> "
            "3GiB): possible memory leak");
}

// ----------------------------------------------------------------------------------------------
// Fragmentation

TEST(FragmentationDetectorTest, NeedsConsecutiveSamples) {
  DetectorConfig config;  // 0.25, 3 samples, 512MiB
  FragmentationDetector d(config);
  EXPECT_FALSE(d.Add(1, 0.38, 4 * kGiB));
  EXPECT_FALSE(d.Add(2, 0.38, 4 * kGiB));
  EXPECT_FALSE(d.Add(3, 0.10, 4 * kGiB));  // resets
  EXPECT_FALSE(d.Add(4, 0.38, 4 * kGiB));
  EXPECT_FALSE(d.Add(5, 0.38, 4 * kGiB));
  std::optional<Finding> f = d.Add(6, 0.38, 4 * kGiB);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, "fragmentation");
  EXPECT_EQ(f->severity, "warning");
  EXPECT_EQ(f->data["samples"], 3);
  EXPECT_EQ(f->data["reserved_bytes"], 4 * kGiB);
  EXPECT_NE(f->message.find("CUDA allocator fragmentation 38% (reserved - allocated over "
                            "reserved) for 3 samples"),
            std::string::npos)
      << f->message;
  EXPECT_NE(f->message.find("1.5GiB of 4GiB reserved"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"), std::string::npos);
  EXPECT_TRUE(d.Add(7, 0.40, 4 * kGiB));  // still over
}

TEST(FragmentationDetectorTest, NeedsMinReserved) {
  DetectorConfig config;
  FragmentationDetector d(config);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(d.Add(i, 0.9, 256 * kMiB)) << i;
  // A small pool in the middle breaks the streak.
  EXPECT_FALSE(d.Add(10, 0.9, kGiB));
  EXPECT_FALSE(d.Add(11, 0.9, kGiB));
  EXPECT_FALSE(d.Add(12, 0.9, 100 * kMiB));
  EXPECT_FALSE(d.Add(13, 0.9, kGiB));
  EXPECT_FALSE(d.Add(14, 0.9, kGiB));
  EXPECT_TRUE(d.Add(15, 0.9, kGiB));
}

TEST(FragmentationDetectorTest, UnknownReservedSkipsTheSizeRule) {
  DetectorConfig config;
  config.fragmentation_samples = 2;
  FragmentationDetector d(config);
  EXPECT_FALSE(d.Add(1, 0.5, -1));
  std::optional<Finding> f = d.Add(2, 0.5, -1);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->message.find("reserved is not allocated"), std::string::npos) << f->message;
}

TEST(FragmentationDetectorTest, AtTheThresholdIsNotOver) {
  DetectorConfig config;
  config.fragmentation_samples = 1;
  FragmentationDetector d(config);
  EXPECT_FALSE(d.Add(1, 0.25, kGiB));
  EXPECT_TRUE(d.Add(2, 0.26, kGiB));
}

// ----------------------------------------------------------------------------------------------
// Idle GPU

TEST(IdleGpuDetectorTest, FiresOnlyAfterIdleForWhileHeld) {
  DetectorConfig config;  // 30%, 5m
  IdleGpuDetector d(0, config);
  Millis t = 1'700'000'000'000;
  EXPECT_FALSE(d.Add(t, 3, true));  // idle since t
  EXPECT_FALSE(d.Add(t + 60'000, 5, true));
  EXPECT_FALSE(d.Add(t + 299'999, 3, true));
  std::optional<Finding> f = d.Add(t + 300'000, 3, true);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, "idle_gpu");
  EXPECT_EQ(f->severity, "warning");
  EXPECT_EQ(f->message, "GPU 0 is held by a run but 3% utilised for 5m00s");
  EXPECT_EQ(f->data["gpu"], 0);
  EXPECT_EQ(f->data["idle_ms"], 300'000);
  // Every sample while still idle (the alert silences repeats).
  EXPECT_TRUE(d.Add(t + 305'000, 2, true));
}

TEST(IdleGpuDetectorTest, BusySampleResets) {
  DetectorConfig config;
  config.idle_for_ms = 10'000;
  IdleGpuDetector d(1, config);
  EXPECT_FALSE(d.Add(0, 0, true));
  EXPECT_FALSE(d.Add(9'000, 0, true));
  EXPECT_FALSE(d.Add(9'500, 95, true));  // busy: reset
  EXPECT_FALSE(d.Add(10'000, 0, true));  // idle again since 10s
  EXPECT_FALSE(d.Add(19'999, 0, true));
  std::optional<Finding> f = d.Add(20'000, 0, true);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->message, "GPU 1 is held by a run but 0% utilised for 10.0s");
}

TEST(IdleGpuDetectorTest, NotHeldResetsAndNeverFires) {
  DetectorConfig config;
  config.idle_for_ms = 10'000;
  IdleGpuDetector d(0, config);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(d.Add(i * 1000, 0, false));
  EXPECT_FALSE(d.Add(100'000, 0, true));
  EXPECT_FALSE(d.Add(105'000, 0, false));  // released: reset
  EXPECT_FALSE(d.Add(106'000, 0, true));
  EXPECT_FALSE(d.Add(115'000, 0, true));
  EXPECT_TRUE(d.Add(116'000, 0, true));
}

TEST(IdleGpuDetectorTest, UnknownUtilisationChangesNothing) {
  DetectorConfig config;
  config.idle_for_ms = 10'000;
  IdleGpuDetector d(0, config);
  EXPECT_FALSE(d.Add(0, 1, true));
  EXPECT_FALSE(d.Add(5'000, -1, true));   // unknown: neither busy nor idle
  EXPECT_FALSE(d.Add(10'000, -1, true));  // unknown never fires by itself
  EXPECT_TRUE(d.Add(10'001, 1, true));    // idle since 0
  IdleGpuDetector e(0, config);
  for (int i = 0; i < 30; ++i) EXPECT_FALSE(e.Add(i * 1000, -1, true));
}

TEST(IdleGpuDetectorTest, AtTheThresholdIsBusy) {
  DetectorConfig config;
  config.idle_for_ms = 0;
  IdleGpuDetector d(0, config);
  EXPECT_FALSE(d.Add(0, 30, true));
  EXPECT_TRUE(d.Add(1, 29.9, true));
}

}  // namespace
}  // namespace drover::watch
