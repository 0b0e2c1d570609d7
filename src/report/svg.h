#pragma once
// A small SVG chart writer for reports and `drover compare --plot`: line charts of named series
// (x = step) and scatter plots (a parameter against the objective). Pure: data in, text out.
//
// The output is well-formed XML: every text goes through HtmlEscape (common/strings.h). Colours
// are set as presentation attributes (fixed, for a standalone .svg on its white background) and every
// element has a class, so a page that inlines the chart restyles it for dark mode with CSS.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/strings.h"

namespace drover::report {

struct XY {
  double x = 0;
  double y = 0;
};

struct LineSeries {
  std::string name;        // legend and hover text
  std::vector<XY> points;  // in drawing order; a non-finite y (NaN, inf) breaks the line
  bool emphasis = false;   // drawn thicker, first in the legend (the best run)
};

struct ChartOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  int width = 760;   // the whole image, px
  int height = 360;  // title, plot and axes, px; the legend adds to it
  // A file of its own: XML declaration and a white background. Otherwise an element to inline
  // in HTML (transparent; the page's CSS colours it).
  bool standalone = true;
  // Scatter: the x axis on a log scale (decade ticks), when every x is positive.
  bool log_x = false;
};

// Where the plot area sits inside a chart of `options`' size: the pixel columns a series is
// downsampled to are the plot's width.
struct PlotArea {
  double left = 0, top = 0, width = 0, height = 0;
};
PlotArea PlotAreaFor(const ChartOptions& options);

// A line chart, one path per series (a series with no finite point is only in the legend).
// Each series is downsampled to the plot's pixel columns first, so a 1,000,000-point series
// costs as much as a 700-point one (with more than ~200 series, to fewer columns, so that a
// chart holds at most ~400,000 points).
std::string LineChartSvg(const std::vector<LineSeries>& series, const ChartOptions& options);

// What a line chart draws of one series: its points cut into `columns` buckets of equal width
// over [x_min, x_max]; each bucket gives its lowest and highest point, in their order (one when
// they are the same point), so spikes and dips survive. The result is the line's pieces: a
// non-finite y ends a piece (at most one break per bucket, so the output stays bounded however
// the NaNs fall).
std::vector<std::vector<XY>> PixelDownsample(const std::vector<XY>& points, double x_min,
                                             double x_max, int columns);

struct ScatterPoint {
  double x = 0;            // on a numeric x axis
  std::string category;    // on a categorical x axis
  double y = 0;            // non-finite points are left out
  std::string label;       // hover text
  bool highlight = false;  // the best run: larger, ringed and labelled
  std::string note;        // the label shown beside a highlighted point ("best: run 12")
};

// A scatter plot. With `categorical`, x is `category` (in order of first appearance), else `x`.
std::string ScatterSvg(const std::vector<ScatterPoint>& points, bool categorical,
                       const ChartOptions& options);

// About `target` round tick values (1, 2 or 5 times a power of ten, and at least `min_step`
// apart) from at or below `lo` to at or above `hi`.
std::vector<double> NiceTicks(double lo, double hi, int target, double min_step = 0);
// A tick label with as many decimals as the tick spacing needs: 0.25, 1000, 1e+06.
std::string FormatTick(double value, double step);
// The colour of the i-th series: distinct, and readable on white and on a dark background.
std::string SeriesColor(size_t i);

}  // namespace drover::report
