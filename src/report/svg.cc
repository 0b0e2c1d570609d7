#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace drover::report {
namespace {

constexpr const char* kFont =
    "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif";
// Fixed colours for a standalone file; a page that inlines the chart overrides them by class.
constexpr const char* kText = "#1f2328";
constexpr const char* kMuted = "#57606a";
constexpr const char* kGrid = "#e6e8eb";
constexpr const char* kAxis = "#8c959f";

// Legend entries: a swatch and the name, cut to at most this many characters (the whole name on
// hover); entries are as wide as the longest name needs, at 12px a character is under 7.2px.
constexpr int kLegendRowHeight = 18;
constexpr int kLegendMaxRows = 8;
constexpr size_t kLegendMaxChars = 40;
constexpr double kLegendCharWidth = 7.2;
// At most about this many points in one line chart (two per bucket), and at least this many
// buckets per series.
constexpr size_t kMaxChartPoints = 400'000;
constexpr size_t kMinColumns = 64;

std::string Num(double v) {
  if (std::fabs(v) < 0.05) v = 0;  // no "-0.0"
  return fmt::format("{:.1f}", v);
}

// The first `max_chars` characters (not bytes: a UTF-8 sequence is never cut), with an ellipsis
// when something was left out.
size_t CountChars(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string Truncate(const std::string& text, size_t max_chars) {
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (chars == max_chars) return text.substr(0, i) + "\u2026";
    ++chars;
  }
  return text;
}

bool Finite(const XY& p) { return std::isfinite(p.x) && std::isfinite(p.y); }

struct Scale {
  double d0 = 0, d1 = 1;  // domain
  double r0 = 0, r1 = 1;  // range in px
  double operator()(double v) const {
    return d1 == d0 ? (r0 + r1) / 2 : r0 + (v - d0) / (d1 - d0) * (r1 - r0);
  }
};

void Header(std::string& out, const ChartOptions& o, int height, const char* kind) {
  if (o.standalone) out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  // Inline in HTML the parser puts <svg> in the SVG namespace itself, and the page stays free of
  // anything that looks like a URL.
  out += fmt::format(
      "<svg{} class=\"chart {}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"{}\" font-size=\"12\" role=\"img\" aria-label=\"{}\">\n",
      o.standalone ? " xmlns=\"http://www.w3.org/2000/svg\"" : "", kind, o.width, height, o.width,
      height, kFont, HtmlEscape(o.title));
  out += fmt::format("<title>{}</title>\n", HtmlEscape(o.title));
  if (o.standalone) {
    out += "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  }
  if (!o.title.empty()) {
    out += fmt::format(
        "<text class=\"title\" x=\"{}\" y=\"22\" font-size=\"14\" font-weight=\"600\" "
        "fill=\"{}\">{}</text>\n",
        PlotAreaFor(o).left, kText, HtmlEscape(o.title));
  }
}

// Grid lines, tick labels, the frame and the axis labels.
void Axes(std::string& out, const ChartOptions& o, const PlotArea& a, const Scale& xs,
          const std::vector<double>& xticks, const Scale& ys, const std::vector<double>& yticks) {
  double bottom = a.top + a.height, right = a.left + a.width;
  out += "<g class=\"axes\">\n";
  double ystep = yticks.size() > 1 ? yticks[1] - yticks[0] : 1;
  for (double t : yticks) {
    std::string y = Num(ys(t));
    out += fmt::format(
        "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>"
        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\" "
        "fill=\"{}\">{}</text>\n",
        Num(a.left), y, Num(right), y, kGrid, Num(a.left - 6), y, kMuted,
        HtmlEscape(FormatTick(t, ystep)));
  }
  double xstep = xticks.size() > 1 ? xticks[1] - xticks[0] : 1;
  for (double t : xticks) {
    std::string x = Num(xs(t));
    // On a log axis the ticks are decades (log10 of the value): labelled with the value.
    const std::string label = o.log_x ? fmt::format("{:g}", std::pow(10.0, t)) : FormatTick(t, xstep);
    out += fmt::format(
        "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>"
        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
        x, Num(a.top), x, Num(bottom), kGrid, x, Num(bottom + 16), kMuted, HtmlEscape(label));
  }
  out += fmt::format(
      "<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"{}\"/>\n",
      Num(a.left), Num(a.top), Num(a.width), Num(a.height), kAxis);
  if (!o.x_label.empty()) {
    out += fmt::format(
        "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
        Num(a.left + a.width / 2), Num(bottom + 34), kText, HtmlEscape(o.x_label));
  }
  if (!o.y_label.empty()) {
    out += fmt::format(
        "<text class=\"label\" transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\" "
        "fill=\"{}\">{}</text>\n",
        Num(a.top + a.height / 2), kText, HtmlEscape(o.y_label));
  }
  out += "</g>\n";
}

void NoData(std::string& out, const PlotArea& a, const std::string& why) {
  out += fmt::format(
      "<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"{}\"/>\n<text class=\"nodata\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
      "fill=\"{}\">{}</text>\n",
      Num(a.left), Num(a.top), Num(a.width), Num(a.height), kAxis, Num(a.left + a.width / 2),
      Num(a.top + a.height / 2), kMuted, HtmlEscape(why));
}

// [lo, hi] of the finite values, or nothing.
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void Add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};


}  // namespace


PlotArea PlotAreaFor(const ChartOptions& o) {
  PlotArea a;
  a.left = 64;
  a.top = o.title.empty() ? 14 : 38;
  a.width = std::max(10.0, o.width - a.left - 20.0);
  a.height = std::max(10.0, o.height - a.top - 44.0);
  return a;
}

std::vector<double> NiceTicks(double lo, double hi, int target, double min_step) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double raw = (hi - lo) / std::max(1, target);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double f = raw / mag;
  double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  step = std::max(step, min_step);
  double start = std::floor(lo / step) * step;
  double end = std::ceil(hi / step) * step;
  if (!std::isfinite(start) || !std::isfinite(end) || step <= 0) return {lo, hi};
  int n = static_cast<int>(std::llround((end - start) / step));
  n = std::clamp(n, 1, 100);
  std::vector<double> ticks;
  for (int i = 0; i <= n; ++i) {
    double t = start + i * step;
    if (std::fabs(t) < step * 1e-9) t = 0;  // no "-0"
    ticks.push_back(t);
  }
  return ticks;
}

std::string FormatTick(double value, double step) {
  if (!std::isfinite(value)) return fmt::format("{}", value);
  if (value == 0) return "0";
  double a = std::fabs(value);
  if (a >= 1e6 || (step > 0 && step < 1e-4)) return fmt::format("{:.3g}", value);
  int decimals = step > 0 ? std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9))) : 3;
  return fmt::format("{:.{}f}", value, decimals);
}

std::string SeriesColor(size_t i) {
  // Tableau 10: tested for telling apart, mid-tone so it shows on white and on near-black.
  static constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                             "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  if (i < std::size(kPalette)) return kPalette[i];
  // Beyond ten: hues a golden angle apart at the palette's saturation and lightness.
  double h = std::fmod(i * 137.508, 360.0), s = 0.55, l = 0.52;
  double c = (1 - std::fabs(2 * l - 1)) * s;
  double x = c * (1 - std::fabs(std::fmod(h / 60.0, 2) - 1));
  double m = l - c / 2;
  double r = 0, g = 0, b = 0;
  int sector = static_cast<int>(h / 60) % 6;
  switch (sector) {
    case 0:
      r = c, g = x;
      break;
    case 1:
      r = x, g = c;
      break;
    case 2:
      g = c, b = x;
      break;
    case 3:
      g = x, b = c;
      break;
    case 4:
      r = x, b = c;
      break;
    default:
      r = c, b = x;
  }
  auto byte = [&](double v) { return static_cast<int>(std::lround((v + m) * 255)); };
  return fmt::format("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b));
}

std::vector<std::vector<XY>> PixelDownsample(const std::vector<XY>& points, double x_min,
                                             double x_max, int columns) {
  columns = std::max(1, columns);
  std::vector<std::vector<XY>> pieces;
  std::vector<XY> piece;
  struct Bucket {
    bool open = false;
    long col = 0;
    size_t imin = 0, imax = 0;
    bool break_after = false;  // a non-finite value fell inside it, after its first number
  } bucket;
  bool gap = false;  // a non-finite value since the last number
  auto flush = [&] {
    if (!bucket.open) return;
    size_t first = std::min(bucket.imin, bucket.imax), second = std::max(bucket.imin, bucket.imax);
    piece.push_back(points[first]);
    if (second != first) piece.push_back(points[second]);
    bucket.open = false;
  };
  auto end_piece = [&] {
    if (!piece.empty()) pieces.push_back(std::move(piece));
    piece.clear();
  };
  double span = x_max - x_min;
  for (size_t i = 0; i < points.size(); ++i) {
    const XY& p = points[i];
    if (!Finite(p)) {
      gap = true;
      continue;
    }
    long col = span > 0 ? static_cast<long>(std::floor((p.x - x_min) / span * columns)) : 0;
    col = std::clamp<long>(col, 0, columns - 1);
    if (bucket.open && col == bucket.col) {
      if (gap) bucket.break_after = true;
      if (p.y < points[bucket.imin].y) bucket.imin = i;
      if (p.y > points[bucket.imax].y) bucket.imax = i;
    } else {
      bool brk = gap || (bucket.open && bucket.break_after);
      flush();
      if (brk) end_piece();
      bucket = Bucket{true, col, i, i, false};
    }
    gap = false;
  }
  flush();
  end_piece();
  return pieces;
}

std::string LineChartSvg(const std::vector<LineSeries>& series, const ChartOptions& o) {
  PlotArea a = PlotAreaFor(o);
  // One bucket per pixel column; with hundreds of series fewer, so the file stays a few MB
  // however many runs an experiment has.
  int columns = std::max(1, static_cast<int>(a.width));
  if (!series.empty()) {
    columns = std::min<int>(columns,
                            std::max<size_t>(kMinColumns, kMaxChartPoints / (2 * series.size())));
  }

  // The legend under the plot: as many rows as needed, up to a limit ("... and N more").
  size_t chars = 8;
  for (const auto& s : series) chars = std::max(chars, CountChars(s.name));
  chars = std::min(chars, kLegendMaxChars);
  double entry_width = 32 + chars * kLegendCharWidth;
  size_t per_row = std::max<size_t>(1, static_cast<size_t>((o.width - 24) / entry_width));
  size_t rows = std::min<size_t>((series.size() + per_row - 1) / per_row, kLegendMaxRows);
  int legend_height = rows == 0 ? 0 : static_cast<int>(rows) * kLegendRowHeight + 10;
  int height = o.height + legend_height;

  std::string out;
  Header(out, o, height, "line-chart");

  Range xr;
  bool integral = true;
  for (const auto& s : series) {
    for (const auto& p : s.points) {
      if (!Finite(p)) continue;
      xr.Add(p.x);
      integral = integral && p.x == std::floor(p.x);
    }
  }
  if (xr.empty()) {
    NoData(out, a, series.empty() ? "no runs to show" : "no values reported yet");
  } else {
    // Steps are whole numbers: no tick at step 2.5.
    std::vector<double> xticks = NiceTicks(xr.lo, xr.hi, 7, integral ? 1 : 0);
    Scale xs{xticks.front(), xticks.back(), a.left, a.left + a.width};
    std::vector<std::vector<std::vector<XY>>> drawn;
    Range yr;
    for (const auto& s : series) {
      drawn.push_back(PixelDownsample(s.points, xs.d0, xs.d1, columns));
      for (const auto& piece : drawn.back()) {
        for (const auto& p : piece) yr.Add(p.y);
      }
    }
    std::vector<double> yticks = NiceTicks(yr.lo, yr.hi, 5);
    Scale ys{yticks.front(), yticks.back(), a.top + a.height, a.top};
    Axes(out, o, a, xs, xticks, ys, yticks);
    // Emphasised series last, so they are drawn on top.
    out +=
        "<g class=\"series\" fill=\"none\" stroke-linejoin=\"round\" stroke-linecap=\"round\">\n";
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < series.size(); ++i) {
        if (series[i].emphasis != (pass == 1) || drawn[i].empty()) continue;
        std::string d;
        for (const auto& piece : drawn[i]) {
          d += fmt::format("M{},{}", Num(xs(piece[0].x)), Num(ys(piece[0].y)));
          // A lone point is a zero-length line, which round caps draw as a dot.
          if (piece.size() == 1) d += "h0";
          for (size_t k = 1; k < piece.size(); ++k) {
            d += fmt::format("{}{},{}", k == 1 ? "L" : " ", Num(xs(piece[k].x)),
                             Num(ys(piece[k].y)));
          }
        }
        out += fmt::format(
            "<path class=\"line{}\" data-series=\"{}\" stroke=\"{}\" stroke-width=\"{}\" "
            "d=\"{}\"><title>{}</title></path>\n",
            series[i].emphasis ? " best" : "", HtmlEscape(series[i].name), SeriesColor(i),
            series[i].emphasis ? "2.75" : "1.5", d, HtmlEscape(series[i].name));
      }
    }
    out += "</g>\n";
  }

  if (rows > 0) {
    out += "<g class=\"legend\">\n";
    size_t shown = std::min(series.size(), rows * per_row);
    for (size_t i = 0; i < shown; ++i) {
      double x = 12 + static_cast<double>(i % per_row) * entry_width;
      double y = o.height + 8 + static_cast<double>(i / per_row) * kLegendRowHeight;
      if (i + 1 == shown && shown < series.size()) {
        out += fmt::format(
            "<text class=\"more\" x=\"{}\" y=\"{}\" fill=\"{}\">\u2026 and {} more</text>\n",
            Num(x), Num(y + 10), kMuted, series.size() - shown + 1);
        break;
      }
      out += fmt::format(
          "<g class=\"entry\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"14\" "
          "height=\"{}\" rx=\"1\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" "
          "fill=\"{}\"{}>{}</text></g>\n",
          HtmlEscape(series[i].name), Num(x), Num(series[i].emphasis ? y + 2 : y + 3.5),
          series[i].emphasis ? 5 : 2.5, SeriesColor(i), Num(x + 20), Num(y + 10), kText,
          series[i].emphasis ? " font-weight=\"600\"" : "",
          HtmlEscape(Truncate(series[i].name, chars)));
    }
    out += "</g>\n";
  }
  out += "</svg>\n";
  return out;
}

std::string ScatterSvg(const std::vector<ScatterPoint>& input, bool categorical,
                       const ChartOptions& o) {
  PlotArea a = PlotAreaFor(o);
  std::string out;
  Header(out, o, o.height, "scatter");
  std::vector<const ScatterPoint*> points;
  for (const auto& p : input) {
    if (std::isfinite(p.y) && (categorical || std::isfinite(p.x))) points.push_back(&p);
  }
  if (points.empty()) {
    NoData(out, a, "no run reported a value");
    out += "</svg>\n";
    return out;
  }
  Range yr;
  for (const auto* p : points) yr.Add(p->y);
  std::vector<double> yticks = NiceTicks(yr.lo, yr.hi, 5);
  Scale ys{yticks.front(), yticks.back(), a.top + a.height, a.top};

  std::vector<double> cx(points.size());
  if (categorical) {
    std::vector<std::string> cats;
    for (const auto* p : points) {
      if (std::find(cats.begin(), cats.end(), p->category) == cats.end()) {
        cats.push_back(p->category);
      }
    }
    double band = a.width / static_cast<double>(cats.size());
    // Grid and labels for the y axis only; categories get a label under each band.
    Axes(out, o, a, Scale{0, 1, a.left, a.left + a.width}, {}, ys, yticks);
    size_t label_chars = std::max<size_t>(3, static_cast<size_t>(band / 7));
    for (size_t c = 0; c < cats.size(); ++c) {
      out += fmt::format(
          "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">"
          "<title>{}</title>{}</text>\n",
          Num(a.left + band * (c + 0.5)), Num(a.top + a.height + 16), kMuted, HtmlEscape(cats[c]),
          HtmlEscape(Truncate(cats[c], label_chars)));
    }
    // Points of one category spread a little sideways, so equal values do not hide each other.
    std::vector<int> seen(cats.size(), 0);
    double spread = std::min(band * 0.08, 5.0);
    for (size_t i = 0; i < points.size(); ++i) {
      size_t c = std::find(cats.begin(), cats.end(), points[i]->category) - cats.begin();
      int k = seen[c]++;
      cx[i] = a.left + band * (c + 0.5) + ((k % 5) - 2) * spread;
    }
  } else {
    const bool log = o.log_x && std::all_of(points.begin(), points.end(),
                                            [](const ScatterPoint* p) { return p->x > 0; });
    auto at = [&](double x) { return log ? std::log10(x) : x; };
    Range xr;
    for (const auto* p : points) xr.Add(at(p->x));
    std::vector<double> xticks;
    if (log) {
      // One tick per decade the values span.
      for (double d = std::floor(xr.lo); d <= std::ceil(xr.hi); d += 1) xticks.push_back(d);
      if (xticks.size() < 2) xticks.push_back(xticks.back() + 1);
    } else {
      xticks = NiceTicks(xr.lo, xr.hi, 6);
    }
    Scale xs{xticks.front(), xticks.back(), a.left, a.left + a.width};
    ChartOptions axes = o;
    axes.log_x = log;
    Axes(out, axes, a, xs, xticks, ys, yticks);
    for (size_t i = 0; i < points.size(); ++i) cx[i] = xs(at(points[i]->x));
  }

  out += "<g class=\"points\">\n";
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < points.size(); ++i) {
      const ScatterPoint& p = *points[i];
      if (p.highlight != (pass == 1)) continue;
      std::string x = Num(cx[i]), y = Num(ys(p.y));
      if (!p.highlight) {
        out += fmt::format(
            "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\" fill-opacity=\"0.75\">"
            "<title>{}</title></circle>\n",
            x, y, SeriesColor(0), HtmlEscape(p.label));
        continue;
      }
      out += fmt::format(
          "<circle class=\"point best\" cx=\"{}\" cy=\"{}\" r=\"6.5\" fill=\"{}\" stroke=\"{}\" "
          "stroke-width=\"1.5\"><title>{}</title></circle>\n",
          x, y, SeriesColor(1), kText, HtmlEscape(p.label));
      if (!p.note.empty()) {
        bool left = cx[i] > a.left + a.width * 0.75;  // keep the note inside the plot
        out += fmt::format(
            "<text class=\"note\" x=\"{}\" y=\"{}\" text-anchor=\"{}\" font-weight=\"600\" "
            "fill=\"{}\">{}</text>\n",
            Num(cx[i] + (left ? -10 : 10)), Num(ys(p.y) - 8), left ? "end" : "start", kText,
            HtmlEscape(p.note));
      }
    }
  }
  out += "</g>\n</svg>\n";
  return out;
}

}  // namespace drover::report
