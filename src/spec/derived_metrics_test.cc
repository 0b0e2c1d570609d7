#include "spec/derived_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/hash.h"
#include "spec/expand.h"
#include "spec/spec_parser.h"

namespace drover {
namespace {

DerivedMetricSpec D(std::string name, std::string expr) {
  DerivedMetricSpec d{std::move(name), std::move(expr), {}};
  auto in = ExpressionInputs(d.expression);
  if (in.ok()) d.inputs = *in;
  return d;
}

TEST(DerivedMetrics, ExpressionInputsAreTheMetricNamesRead) {
  auto in = ExpressionInputs("samples / time_s");
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(*in, (std::vector<std::string>{"samples", "time_s"}));
  auto dotted = ExpressionInputs("1 - val.acc + sqrt(loss) * _pi");
  ASSERT_TRUE(dotted.ok());
  EXPECT_EQ(*dotted, (std::vector<std::string>{"loss", "val.acc"}));
  EXPECT_FALSE(ExpressionInputs("1 +").ok());
  EXPECT_FALSE(ExpressionInputs("2 * 3").ok());  // reads no metric
  EXPECT_FALSE(ExpressionInputs("").ok());
  EXPECT_FALSE(ExpressionInputs(std::string(2000, 'a')).ok());
}

TEST(DerivedMetrics, EachStepIsComputedOnceFromTheLatestValueOfEachInput) {
  DerivedMetrics d({D("err", "1 - val_acc"), D("samples_per_s", "samples / time_s")});
  std::vector<std::pair<int64_t, std::pair<std::string, double>>> out;
  auto take = [&](auto v) { out.insert(out.end(), v.begin(), v.end()); };
  // Step 1 written as separate points (a TensorBoard writer's one event per scalar).
  take(d.Feed(1, "samples", 640));
  take(d.Feed(1, "time_s", 2));
  take(d.Feed(1, "val_acc", 0.75));
  EXPECT_TRUE(out.empty());  // the step has not ended yet
  take(d.Feed(2, "samples", 1280));  // step 1 ends
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (std::pair<int64_t, std::pair<std::string, double>>{1, {"err", 0.25}}));
  EXPECT_EQ(out[1].second.first, "samples_per_s");
  EXPECT_DOUBLE_EQ(out[1].second.second, 320);
  out.clear();
  take(d.Flush());
  // Step 2 only changed samples: samples_per_s uses time_s of step 1; err is not recomputed.
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].first, 2);
  EXPECT_DOUBLE_EQ(out[0].second.second, 640);
  EXPECT_TRUE(d.Flush().empty());
}

TEST(DerivedMetrics, ADerivedMetricReadsOnesAboveItAndWaitsForAllItsInputs) {
  DerivedMetrics d({D("err", "1 - acc"), D("err_pct", "err * 100"), D("ratio", "a / b")});
  auto out = d.Feed(0, "acc", 0.9);
  out = d.Flush();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].second.first, "err_pct");
  EXPECT_NEAR(out[1].second.second, 10, 1e-9);
  d.Feed(1, "a", 1);
  EXPECT_TRUE(d.Flush().empty());  // b never reported
  // A restarted engine seeds the last values.
  DerivedMetrics r({D("ratio", "a / b")});
  r.Seed({{"b", 4}});
  r.Feed(5, "a", 2);
  auto again = r.Flush();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_DOUBLE_EQ(again[0].second.second, 0.5);
}

TEST(DerivedMetrics, TheSpecSectionIsCheckedWhereItIsWritten) {
  auto ok = ParseSpecString(
      "name: x\ncommand: run\nmetrics:\n  err: 1 - val_acc\n  sps: samples / time_s\n", "s.yaml", "/tmp");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->metrics.size(), 2u);
  EXPECT_EQ(ok->metrics[1].inputs, (std::vector<std::string>{"samples", "time_s"}));
  auto bad = ParseSpecString("name: x\ncommand: run\nmetrics:\n  err: 1 - \n", "s.yaml", "/tmp");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("s.yaml:4"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("not an expression"), std::string::npos);
  auto self = ParseSpecString("name: x\ncommand: run\nmetrics:\n  a: a + 1\n", "s.yaml", "/tmp");
  ASSERT_FALSE(self.ok());
  auto list = ParseSpecString("name: x\ncommand: run\nmetrics: [a]\n", "s.yaml", "/tmp");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("mapping of name: expression"), std::string::npos);
}

TEST(DerivedMetrics, ACycleOrAReadOfOneBelowIsRefusedWhereItIsWritten) {
  // metrics: {a: b, b: a + x} was accepted and neither was ever computed (issue 39, 14).
  auto cycle = ParseSpecString("name: x\ncommand: run\nmetrics:\n  a: b * 2\n  b: a + x\n",
                               "s.yaml", "/tmp");
  ASSERT_FALSE(cycle.ok());
  const std::string& m = cycle.status().message();
  EXPECT_NE(m.find("s.yaml:4"), std::string::npos) << m;
  EXPECT_NE(m.find("metrics.a reads b, a derived metric defined below it"), std::string::npos)
      << m;
  // A longer cycle, and a plain read of one below (never computed either), the same way.
  auto three = ParseSpecString(
      "name: x\ncommand: run\nmetrics:\n  a: loss + 1\n  b: c + 1\n  c: b + a\n", "s.yaml",
      "/tmp");
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("s.yaml:5"), std::string::npos)
      << three.status().message();
  // Reading those above is how they chain.
  auto chain = ParseSpecString(
      "name: x\ncommand: run\nmetrics:\n  a: loss + 1\n  b: a * 2\n  c: a + b\n", "s.yaml",
      "/tmp");
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  DerivedMetrics d(chain->metrics);
  d.Feed(1, "loss", 1);
  auto out = d.Flush();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_DOUBLE_EQ(out[2].second.second, 6);  // c = 2 + 4
}

TEST(DerivedMetrics, TheExpressionsArePartOfTheFingerprint) {
  // A changed expression was served from the cache of a run that computed another one.
  auto parse = [](const std::string& metrics) {
    auto s = ParseSpecString("name: x\ncommand: run\n" + metrics, "s.yaml", "/tmp");
    EXPECT_TRUE(s.ok()) << s.status().message();
    return *s;
  };
  const std::vector<std::string> argv = {"run"};
  const Json params = Json::object();
  auto fp = [&](const Spec& s) { return Fingerprint(s, argv, params, "snap"); };
  const Spec none = parse("");
  const Spec err = parse("metrics: {err: 1 - acc}\n");
  const Spec err2 = parse("metrics: {err: 100 - acc}\n");
  const Spec other = parse("metrics: {loss2: 1 - acc}\n");
  EXPECT_NE(fp(none), fp(err));
  EXPECT_NE(fp(err), fp(err2));
  EXPECT_NE(fp(err), fp(other));
  EXPECT_EQ(fp(err), fp(parse("metrics: {err: 1 - acc}\n")));
  // Where event files are read from decides which metrics the run has, too.
  EXPECT_NE(fp(none), fp(parse("tensorboard: logs\n")));
  EXPECT_NE(fp(none), fp(parse("tensorboard: false\n")));
  // A spec without them keeps the fingerprint it had (expand_test pins that canonical form).
  EXPECT_EQ(fp(none), Sha256Hex(Json({{"argv", argv},
                                       {"env", Json::object()},
                                       {"params", params},
                                       {"shell", false},
                                       {"snapshot", "snap"}})
                                     .dump()));
}

TEST(SpecCheckpoint, CheckpointedRunsArePreemptibleOthersOnlyWhenTheSpecSaysSo) {
  auto plain = ParseSpecString("name: x\ncommand: run\n", "s.yaml", "/tmp");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->checkpoint);
  EXPECT_FALSE(plain->preemptible);
  auto ckpt = ParseSpecString("name: x\ncommand: run\ncheckpoint: true\n", "s.yaml", "/tmp");
  ASSERT_TRUE(ckpt.ok());
  EXPECT_TRUE(ckpt->preemptible);
  auto both = ParseSpecString("name: x\ncommand: run\ncheckpoint: true\npreemptible: false\n",
                              "s.yaml", "/tmp");
  ASSERT_TRUE(both.ok());
  EXPECT_FALSE(both->preemptible);
  auto stored = SpecFromJson(SpecToJson(*ckpt));
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->checkpoint);
  EXPECT_TRUE(stored->preemptible);
}

TEST(SpecTensorBoard, AFolderInsideTheWorkingCopyOrOff) {
  auto a = ParseSpecString("name: x\ncommand: run\ntensorboard: lightning_logs/\n", "s.yaml", "/tmp");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->tensorboard, "lightning_logs");
  auto off = ParseSpecString("name: x\ncommand: run\ntensorboard: false\n", "s.yaml", "/tmp");
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->tensorboard_off);
  EXPECT_FALSE(ParseSpecString("name: x\ncommand: run\ntensorboard: ../x\n", "s.yaml", "/tmp").ok());
  EXPECT_FALSE(ParseSpecString("name: x\ncommand: run\ntensorboard: /tmp/x\n", "s.yaml", "/tmp").ok());
  auto back = SpecFromJson(SpecToJson(*off));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->tensorboard_off);
}

}  // namespace
}  // namespace drover
