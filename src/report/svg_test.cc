#include "report/svg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "testutil/xml_check.h"

namespace drover::report {
namespace {

using testing::ParseXml;
using testing::XmlNode;

constexpr double kSvgNaN = std::numeric_limits<double>::quiet_NaN();

// The points a path's d draws: one "x,y" pair each.
size_t PathPoints(const std::string& d) { return std::count(d.begin(), d.end(), ','); }
size_t Subpaths(const std::string& d) { return std::count(d.begin(), d.end(), 'M'); }

std::vector<XY> Line(std::vector<double> ys) {
  std::vector<XY> out;
  for (size_t i = 0; i < ys.size(); ++i) out.push_back({static_cast<double>(i), ys[i]});
  return out;
}

TEST(LineChart, IsAStandaloneSvgWithAxesLegendAndOneColourPerSeries) {
  ChartOptions o;
  o.title = "val_acc";
  o.x_label = "step";
  o.y_label = "val_acc";
  std::string svg = LineChartSvg(
      {{"run 1", Line({0.5, 0.7, 0.9})}, {"run 2", Line({0.4, 0.6, 0.8, 0.85}), true}}, o);
  ASSERT_EQ(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u);
  auto doc = ParseXml(svg);
  ASSERT_EQ(doc.error, "") << svg;
  ASSERT_EQ(doc.root.children.size(), 1u);
  const XmlNode& root = doc.root.children[0];
  EXPECT_EQ(root.name, "svg");
  EXPECT_EQ(root.Attr("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(root.Attr("viewBox"), "0 0 760 " + root.Attr("height"));
  // A white background, so the file reads the same in a dark image viewer.
  auto bg = root.FindAll("rect", "bg");
  ASSERT_EQ(bg.size(), 1u);
  EXPECT_EQ(bg[0]->Attr("fill"), "#ffffff");

  auto lines = root.FindAll("path", "line");
  ASSERT_EQ(lines.size(), 2u);
  // The emphasised series is drawn last (on top), thicker.
  EXPECT_EQ(lines[0]->Attr("data-series"), "run 1");
  EXPECT_EQ(lines[1]->Attr("data-series"), "run 2");
  EXPECT_TRUE(lines[1]->HasClass("best"));
  EXPECT_NE(lines[0]->Attr("stroke"), lines[1]->Attr("stroke"));
  EXPECT_EQ(PathPoints(lines[0]->Attr("d")), 3u);
  EXPECT_EQ(PathPoints(lines[1]->Attr("d")), 4u);

  auto legend = root.FindAll("g", "legend");
  ASSERT_EQ(legend.size(), 1u);
  auto entries = legend[0]->FindAll("g", "entry");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0]->FindAll("text")[0]->text, "run 1");
  EXPECT_EQ(entries[0]->FindAll("rect")[0]->Attr("fill"), lines[0]->Attr("stroke"));

  // Ticks: x covers the steps 0..3 in whole steps, y covers 0.4..0.9.
  std::vector<std::string> ticks;
  for (const auto* t : root.FindAll("text", "tick")) ticks.push_back(t->text);
  EXPECT_NE(std::find(ticks.begin(), ticks.end(), "3"), ticks.end());
  EXPECT_EQ(std::find(ticks.begin(), ticks.end(), "2.5"), ticks.end());
  EXPECT_NE(std::find(ticks.begin(), ticks.end(), "0.9"), ticks.end());
  EXPECT_EQ(root.FindAll("text", "title")[0]->text, "val_acc");
  EXPECT_EQ(root.FindAll("text", "label").size(), 2u);
}

TEST(LineChart, AMillionPointsBecomeTwoPerPixelColumn) {
  std::vector<XY> pts;
  pts.reserve(1'000'000);
  for (int i = 0; i < 1'000'000; ++i)
    pts.push_back({static_cast<double>(i), std::sin(i * 1e-4) * i});
  ChartOptions o;
  o.width = 1000;
  std::string svg = LineChartSvg({{"long", pts}}, o);
  auto doc = ParseXml(svg);
  ASSERT_EQ(doc.error, "");
  auto lines = doc.root.FindAll("path", "line");
  ASSERT_EQ(lines.size(), 1u);
  int columns = static_cast<int>(PlotAreaFor(o).width);
  // Every column holds ~1,000 points; each gives its lowest and its highest.
  EXPECT_EQ(PathPoints(lines[0]->Attr("d")), 2u * columns);
  EXPECT_EQ(Subpaths(lines[0]->Attr("d")), 1u);
  EXPECT_LT(svg.size(), 64u * 1024) << "a million points must make a small file";
}

TEST(LineChart, ManySeriesShareAPointBudget) {
  std::vector<LineSeries> series(500);
  for (size_t i = 0; i < series.size(); ++i) {
    series[i].name = "run " + std::to_string(i);
    for (int k = 0; k < 2000; ++k) series[i].points.push_back({1.0 * k, 1.0 * k * (i + 1)});
  }
  ChartOptions o;
  o.width = 1120;
  auto doc = ParseXml(LineChartSvg(series, o));
  ASSERT_EQ(doc.error, "");
  auto lines = doc.root.FindAll("path", "line");
  ASSERT_EQ(lines.size(), 500u);
  size_t total = 0;
  for (const auto* l : lines) total += PathPoints(l->Attr("d"));
  // 400,000 points at most: 400 buckets of two points per series instead of 1,036.
  EXPECT_EQ(PathPoints(lines[0]->Attr("d")), 800u);
  EXPECT_LE(total, 400'000u);
}

TEST(PixelDownsample, KeepsASpikeAndTheOrderOfMinAndMax) {
  std::vector<XY> pts = Line(std::vector<double>(100'000, 1.0));
  pts[54'321].y = 50;
  pts[54'400].y = -3;
  auto pieces = PixelDownsample(pts, 0, 100'000, 100);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_LE(pieces[0].size(), 200u);
  bool spike = false, dip = false;
  for (size_t i = 0; i < pieces[0].size(); ++i) {
    if (pieces[0][i].y == 50) {
      spike = true;
      // The spike (step 54321) comes before the dip (54400) in the same column.
      ASSERT_LT(i + 1, pieces[0].size());
      EXPECT_EQ(pieces[0][i + 1].y, -3);
    }
    dip = dip || pieces[0][i].y == -3;
  }
  EXPECT_TRUE(spike);
  EXPECT_TRUE(dip);
  // Fewer points than columns: nothing is lost.
  EXPECT_EQ(PixelDownsample(Line({3, 1, 2}), 0, 2, 500)[0].size(), 3u);
}

TEST(PixelDownsample, NonFiniteValuesBreakTheLine) {
  auto pieces = PixelDownsample(Line({1, 2, kSvgNaN, 3, 4}), 0, 4, 100);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].size(), 2u);
  EXPECT_EQ(pieces[1].size(), 2u);
  EXPECT_EQ(pieces[1][0].y, 3);
  double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(PixelDownsample(Line({1, inf, 2, -inf, 3}), 0, 4, 100).size(), 3u);
  // Leading and trailing NaN (a run that diverged at the end) make no empty pieces.
  EXPECT_EQ(PixelDownsample(Line({kSvgNaN, 1, 2, kSvgNaN}), 0, 3, 100).size(), 1u);
  EXPECT_TRUE(PixelDownsample(Line({kSvgNaN, kSvgNaN}), 0, 1, 100).empty());

  // NaN every other point: at most one break per column, so the output stays bounded.
  std::vector<double> ys;
  for (int i = 0; i < 200'000; ++i) ys.push_back(i % 2 ? kSvgNaN : 1.0 * i);
  auto many = PixelDownsample(Line(ys), 0, 200'000, 100);
  size_t points = 0;
  for (const auto& p : many) points += p.size();
  EXPECT_LE(many.size(), 100u);
  EXPECT_LE(points, 200u);
}

TEST(LineChart, NaNBreaksThePathAndALonePointIsADot) {
  ChartOptions o;
  std::string svg = LineChartSvg({{"diverged", Line({1, 2, 3, kSvgNaN, 2, kSvgNaN, 1, 0.5})}}, o);
  auto doc = ParseXml(svg);
  ASSERT_EQ(doc.error, "");
  auto lines = doc.root.FindAll("path", "line");
  ASSERT_EQ(lines.size(), 1u);
  std::string d = lines[0]->Attr("d");
  EXPECT_EQ(Subpaths(d), 3u) << d;
  EXPECT_EQ(PathPoints(d), 6u) << d;
  EXPECT_NE(d.find("h0"), std::string::npos) << "the lone point at step 4 is drawn as a dot";
  EXPECT_EQ(d.find_first_not_of("0123456789.,-MLh "), std::string::npos) << "no nan or inf: " << d;
}

TEST(Svg, EscapesEveryText) {
  ChartOptions o;
  o.title = "loss <of> \"A&B\" 'x'";
  std::string name = "run 1 \xc2\xb7 model=<script>&amp; \xe5\xaf\xb9\xe6\xaf\x94";
  std::string svg = LineChartSvg({{name + "\x01\xff", Line({1, 2})}}, o);
  auto doc = ParseXml(svg);
  ASSERT_EQ(doc.error, "") << svg;
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_EQ(doc.root.FindAll("text", "title")[0]->text, o.title);
  auto lines = doc.root.FindAll("path", "line");
  ASSERT_EQ(lines.size(), 1u);
  // The control character is dropped and the stray byte becomes U+FFFD; the rest is kept.
  EXPECT_EQ(lines[0]->Attr("data-series"), name + "\xef\xbf\xbd");
  EXPECT_EQ(svg.find('\x01'), std::string::npos);

}

TEST(LineChart, LongLegendsAreCutAndEmptyChartsSaySo) {
  std::vector<LineSeries> series;
  for (int i = 0; i < 100; ++i) series.push_back({"run " + std::to_string(i), Line({1.0 * i, 2})});
  ChartOptions o;
  auto doc = ParseXml(LineChartSvg(series, o));
  ASSERT_EQ(doc.error, "");
  EXPECT_EQ(doc.root.FindAll("path", "line").size(), 100u);
  auto more = doc.root.FindAll("text", "more");
  ASSERT_EQ(more.size(), 1u);
  size_t entries = doc.root.FindAll("g", "entry").size();
  EXPECT_EQ(more[0]->text, "\u2026 and " + std::to_string(100 - entries) + " more");

  auto empty = ParseXml(LineChartSvg({}, o));
  ASSERT_EQ(empty.error, "");
  ASSERT_EQ(empty.root.FindAll("text", "nodata").size(), 1u);
  EXPECT_EQ(empty.root.FindAll("text", "nodata")[0]->text, "no runs to show");
  auto no_values = ParseXml(LineChartSvg({{"run 1", Line({kSvgNaN})}}, o));
  ASSERT_EQ(no_values.error, "");
  EXPECT_EQ(no_values.root.FindAll("path").size(), 0u);
}

TEST(LineChart, InlineChartsLeaveColoursToThePage) {
  ChartOptions o;
  o.standalone = false;
  std::string svg = LineChartSvg({{"a", Line({1, 2})}}, o);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(svg.find("xmlns"), std::string::npos);
  auto doc = ParseXml(svg);
  ASSERT_EQ(doc.error, "");
  EXPECT_TRUE(doc.root.FindAll("rect", "bg").empty());
  EXPECT_TRUE(doc.root.children[0].HasClass("chart"));
}

TEST(Scatter, CategoriesAndTheBestPoint) {
  std::vector<ScatterPoint> pts = {
      {0, "mlp", 0.95, "run 1", false, ""},
      {0, "cnn", 0.98, "run 2", true, "best: run 2"},
      {0, "mlp", 0.96, "run 3", false, ""},
      {0, "rnn <x>", kSvgNaN, "run 4", false, ""},  // no value: left out
  };
  ChartOptions o;
  o.title = "val_acc by model";
  auto doc = ParseXml(ScatterSvg(pts, /*categorical=*/true, o));
  ASSERT_EQ(doc.error, "");
  auto circles = doc.root.FindAll("circle", "point");
  ASSERT_EQ(circles.size(), 3u);
  auto best = doc.root.FindAll("circle", "best");
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0]->FindAll("title")[0]->text, "run 2");
  ASSERT_EQ(doc.root.FindAll("text", "note").size(), 1u);
  EXPECT_EQ(doc.root.FindAll("text", "note")[0]->text, "best: run 2");
  std::vector<std::string> labels;
  for (const auto* t : doc.root.FindAll("text", "tick")) {
    if (t->FindAll("title").size() == 1) labels.push_back(t->text);
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"mlp", "cnn"}));
  // Equal categories sit side by side, not on top of each other.
  EXPECT_NE(circles[0]->Attr("cx"), circles[1]->Attr("cx"));
}

TEST(Scatter, NumericAxis) {
  std::vector<ScatterPoint> pts = {{16, "", 0.9, "a", false, ""},
                                   {32, "", 0.95, "b", false, ""},
                                   {64, "", 0.97, "c", true, "best"}};
  auto doc = ParseXml(ScatterSvg(pts, false, ChartOptions{}));
  ASSERT_EQ(doc.error, "");
  auto circles = doc.root.FindAll("circle", "point");
  ASSERT_EQ(circles.size(), 3u);
  EXPECT_LT(std::stod(circles[0]->Attr("cx")), std::stod(circles[1]->Attr("cx")));
  // Higher values are higher up (smaller y).
  EXPECT_GT(std::stod(circles[0]->Attr("cy")), std::stod(circles[1]->Attr("cy")));
  auto empty = ParseXml(ScatterSvg({}, false, ChartOptions{}));
  ASSERT_EQ(empty.error, "");
  EXPECT_EQ(empty.root.FindAll("text", "nodata").size(), 1u);
}

TEST(Axis, NiceTicksAndLabels) {
  auto unit = NiceTicks(0, 1, 5);
  ASSERT_EQ(unit.size(), 6u);
  for (size_t i = 0; i < unit.size(); ++i) EXPECT_NEAR(unit[i], 0.2 * i, 1e-12);
  auto t = NiceTicks(0.013, 0.987, 5);
  EXPECT_LE(t.front(), 0.013);
  EXPECT_GE(t.back(), 0.987);
  EXPECT_EQ(NiceTicks(0, 3, 7, 1), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(NiceTicks(0, 999'999, 7, 1).back(), 1'000'000);
  auto flat = NiceTicks(5, 5, 5);
  EXPECT_LT(flat.front(), 5);
  EXPECT_GT(flat.back(), 5);
  for (double v : NiceTicks(-0.3, 0.3, 5)) EXPECT_FALSE(std::signbit(v) && v == 0);
  EXPECT_EQ(FormatTick(0.2, 0.2), "0.2");
  EXPECT_EQ(FormatTick(0.05, 0.05), "0.05");
  EXPECT_EQ(FormatTick(1000, 200), "1000");
  EXPECT_EQ(FormatTick(0, 0.1), "0");
  EXPECT_EQ(FormatTick(2e6, 1e6), "2e+06");
}

TEST(Svg, SeriesColoursAreDistinct) {
  std::set<std::string> colours;
  for (size_t i = 0; i < 40; ++i) {
    std::string c = SeriesColor(i);
    EXPECT_EQ(c.size(), 7u) << c;
    EXPECT_EQ(c[0], '#');
    colours.insert(c);
  }
  EXPECT_EQ(colours.size(), 40u);
}

}  // namespace
}  // namespace drover::report
