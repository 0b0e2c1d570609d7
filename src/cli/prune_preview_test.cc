#include "cli/prune_preview.h"

#include <gtest/gtest.h>

namespace drover::cli {
namespace {

PruneSpec Asha() {
  PruneSpec p;
  p.metric = "val_acc";
  return p;
}

// What init's template logs: loss every 10 steps; val_acc and epoch once an epoch, at 51, 103...
std::vector<MetricPoint> TemplateRun(bool with_epoch) {
  std::vector<MetricPoint> out;
  for (int e = 1; e <= 10; ++e) {
    const int64_t step = e * 52 - 1;
    out.push_back({.attempt_id = 1, .step = step, .name = "val_acc", .value = 0.8 + e * 0.01});
    if (with_epoch) out.push_back({.attempt_id = 1, .step = step, .name = "epoch", .value = 1.0 * e});
  }
  return out;
}

TEST(PrunePreview, SaysTheRungsInTheirUnits) {
  PruneSpec p = Asha();
  EXPECT_EQ(PreviewPrune(p, {}, 0).rungs,
            "rungs at 1, 3, 9, 27, 81, ... (epochs when runs report epoch beside val_acc, else "
            "the step of each report)");
  p.resource = "epoch";
  p.max_steps = 10;
  // Rung 9 of a 10-epoch run would stop runs 90% done: the runs rung 3 keeps go to the end.
  EXPECT_EQ(PreviewPrune(p, {}, 0).rungs, "rungs at epoch 1, 3");
  EXPECT_EQ(PrunePreviewText(p, PreviewPrune(p, {}, 0)),
            "prune: asha on val_acc (max), reduction 3: rungs at epoch 1, 3; runs end at 10\n");
  p.max_steps = 27;
  EXPECT_EQ(PreviewPrune(p, {}, 0).rungs, "rungs at epoch 1, 3, 9");
}

TEST(PrunePreview, WarnsWhenRungsOnStepsFallOnOneReport) {
  PruneSpec p = Asha();
  // Without an epoch, rungs 1, 3 and 9 all fall on the first report (step 51).
  PrunePreview steps = PreviewPrune(p, TemplateRun(false), 7);
  ASSERT_EQ(steps.warnings.size(), 1u);
  EXPECT_NE(steps.warnings[0].find("rungs at step 1, 3, 9, 27 all fall on one report of "
                                   "val_acc (step 51) in run 7"),
            std::string::npos)
      << steps.warnings[0];
  EXPECT_NE(steps.warnings[0].find("report epoch beside val_acc"), std::string::npos);
  // With the epoch reported beside it, each rung has its own report.
  EXPECT_TRUE(PreviewPrune(p, TemplateRun(true), 7).warnings.empty());
  // resource: step on a script that reports epochs says to drop it.
  p.resource = "step";
  PrunePreview forced = PreviewPrune(p, TemplateRun(true), 7);
  ASSERT_EQ(forced.warnings.size(), 1u);
  EXPECT_NE(forced.warnings[0].find("drop resource: step"), std::string::npos);
}

TEST(PrunePreview, WarnsWhenTheNamedResourceIsNeverReported) {
  PruneSpec p = Asha();
  p.resource = "tokens";
  PrunePreview none = PreviewPrune(p, TemplateRun(true), 3);
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_NE(none.warnings[0].find("never tokens beside it"), std::string::npos);
}

}  // namespace
}  // namespace drover::cli
