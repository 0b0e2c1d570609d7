#include "watch/run_watch.h"

#include <gtest/gtest.h>

#include "spec/spec_parser.h"

namespace drover::watch {
namespace {

Spec MakeSpec(const std::string& extra = "") {
  auto s = ParseSpecString("name: w\ncommand: python train.py\n" + extra, "w.yaml", ".");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

// One line of drover.torch.TrainingMonitor, in the order the engine hands the points over
// (a JSON object's keys sorted: allocated, fragmentation, reserved).
std::vector<RunFinding> AllocatorLine(RunWatch& w, int64_t step, double allocated, double reserved) {
  std::vector<RunFinding> out;
  for (auto [name, value] : std::vector<std::pair<std::string, double>>{
           {"cuda_allocated_bytes", allocated},
           {"cuda_fragmentation", (reserved - allocated) / reserved},
           {"cuda_reserved_bytes", reserved}}) {
    MetricPoint p;
    p.step = step;
    p.name = name;
    p.value = value;
    p.t_ms = step * 1000;
    for (auto& f : w.OnPoint(p)) out.push_back(std::move(f));
  }
  return out;
}

TEST(RunWatch, FragmentationFromTheClientsLinesNeedsThreeLinesInARow) {
  Spec spec = MakeSpec();
  DetectorConfig config;
  RunWatch w(spec, config);
  const double GiB = 1 << 30;
  EXPECT_TRUE(AllocatorLine(w, 1, 0.6 * GiB, 1 * GiB).empty());
  EXPECT_TRUE(AllocatorLine(w, 2, 0.6 * GiB, 1 * GiB).empty());
  auto third = AllocatorLine(w, 3, 0.6 * GiB, 1 * GiB);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].finding.kind, "fragmentation");
  EXPECT_EQ(third[0].key_suffix, "fragmentation");
}

TEST(RunWatch, FragmentationOfASmallPoolIsNotReported) {
  Spec spec = MakeSpec();
  DetectorConfig config;
  RunWatch w(spec, config);
  const double MiB = 1 << 20;
  for (int step = 1; step < 10; ++step) EXPECT_TRUE(AllocatorLine(w, step, 60 * MiB, 100 * MiB).empty());
}

TEST(RunWatch, SpikesAreWatchedOnLossLikeMetricsOnly) {
  Spec spec = MakeSpec("monitor: {watch: [val_loss]}\n");
  DetectorConfig config;
  RunWatch w(spec, config);
  std::vector<RunFinding> found;
  for (int step = 0; step < 40; ++step) {
    for (const char* name : {"loss", "val_loss"}) {
      MetricPoint p;
      p.step = step;
      p.name = name;
      p.value = step == 39 ? 100.0 : 1.0 + 0.01 * (step % 4);
      for (auto& f : w.OnPoint(p)) found.push_back(std::move(f));
    }
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].key_suffix, "loss_spike:val_loss");
}

}  // namespace
}  // namespace drover::watch
