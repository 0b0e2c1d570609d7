// Metric tailing (metric_tail.h): each source's points pass the run's name limits and derived
// metrics on their way to the store; a NaN in a watched metric is handed to the host to stop
// the run as diverged.
#include "metrics/metric_tail.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "metrics/metric_lines.h"
#include "protocol/api.h"
#include "watch/run_watch.h"

namespace drover {

namespace {

// Whether NaN/Inf in this metric means the run diverged (docs/spec.md, monitor.watch).
bool Watched(const Spec& spec, const std::string& name) {
  if (!spec.monitor.watch.empty()) return watch::IsLossLike(spec, name);
  return watch::IsLossLike(spec, name) || (spec.objective && spec.objective->metric == name);
}

// Whether the spec reads this metric: its objective, its pruner's metric, a derived metric or
// one of their inputs.
bool SpecNames(const Spec& spec, const std::string& name) {
  if (spec.objective && spec.objective->metric == name) return true;
  if (spec.prune && spec.prune->metric == name) return true;
  for (const auto& d : spec.metrics) {
    if (d.name == name || std::find(d.inputs.begin(), d.inputs.end(), name) != d.inputs.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace

// What the sources of one look hand their points to.
class MetricTail::Sink : public PointSink {
 public:
  Sink(const TailLook& look, TailHost& host, RunTail& tail, std::vector<MetricPoint>* points)
      : look_(look), host_(host), tail_(tail), points_(points) {}

  void BeginLine() override { tail_.new_names_in_line = 0; }
  void Line(std::string_view line) override { host_.Line(line); }
  void Warn(const watch::Finding& finding, const std::string& key) override {
    spdlog::warn("run {}: {}", look_.run->id, finding.message);
    host_.Warn(finding, key);
  }
  Result<std::vector<Attempt>> EarlierAttempts() override { return host_.Attempts(); }

  // One metric point of the run: admitted under the run's names limit, fed to its derived
  // metrics, and recorded.
  void Point(int64_t step, std::string name, double value, Millis t) override {
    const Spec& spec = *look_.spec;
    Run& run = *look_.run;
    if (name.size() > kMaxMetricNameBytes) return;
    if (!run.final_metrics.contains(name)) {
      // A run keeps at most kMaxMetricNames names, and one line (or one step of an event file)
      // adds at most kMaxNewMetricNamesPerLine of them, so a wide first line (1,000 per-class
      // values) cannot keep the names logged after it out. The names the spec ranks, prunes,
      // derives or watches for divergence by are always kept, up to as many again.
      const size_t have = run.final_metrics.size();
      const bool needed = SpecNames(spec, name) || Watched(spec, name);
      const bool admit = needed ? have < 2 * kMaxMetricNames
                                : have < kMaxMetricNames &&
                                      tail_.new_names_in_line < kMaxNewMetricNamesPerLine;
      if (!admit) {
        if (!tail_.names_capped) {
          tail_.names_capped = true;
          watch::Finding f;
          f.kind = "metric_names";
          f.severity = "warning";
          f.message = fmt::format(
              "the run logs more metric names than drover keeps ({} a run, {} new in one line or "
              "step); {} and later new names are not recorded: log per-class values under fewer "
              "names, or as a list",
              kMaxMetricNames, kMaxNewMetricNamesPerLine, name);
          f.data = {{"metric", name}, {"names", have}};
          Warn(f, "metric_names");
        }
        return;
      }
      ++tail_.new_names_in_line;
    }
    if (!spec.metrics.empty() && !tail_.derived) {
      tail_.derived = std::make_unique<DerivedMetrics>(spec.metrics);
      std::map<std::string, double> last;
      for (const auto& [k, v] : run.final_metrics.items()) {
        // Stored non-finite values are the protocol's strings ("NaN", "Infinity"); null is an
        // older store's NaN, unknown.
        if (auto d = protocol::NumberFromJson(v); d.ok()) last[k] = *d;
      }
      tail_.derived->Seed(last);
    }
    if (tail_.derived) {
      for (auto& [at, d] : tail_.derived->Feed(step, name, value)) {
        Record(at, std::move(d.first), d.second, t);
      }
    }
    Record(step, std::move(name), value, t);
  }

  // The one path of every point stored, logged or derived: its run's last value, and a NaN or
  // infinity in a watched metric stops the run as diverged.
  void Record(int64_t step, std::string name, double value, Millis t) {
    const Spec& spec = *look_.spec;
    // JSON has no NaN or infinity: the run's last values keep them as the protocol spells them
    // ("NaN", "Infinity", "-Infinity"), so +Inf is stored and shown as infinite, not as null.
    look_.run->final_metrics[name] = protocol::NumberJson(value);
    if (!std::isfinite(value) && spec.monitor.stop_on_nan && Watched(spec, name)) {
      host_.Diverged(name, value, step);
    }
    MetricPoint p;
    p.run_id = look_.attempt->run_id;
    p.attempt_id = look_.attempt->id;
    p.step = step;
    p.name = std::move(name);
    p.value = value;
    p.t_ms = t;
    points_->push_back(std::move(p));
  }

 private:
  const TailLook& look_;
  TailHost& host_;
  RunTail& tail_;
  std::vector<MetricPoint>* points_;
};

Tailed MetricTail::Read(const TailLook& look, TailHost& host) {
  RunTail& tail = runs_[look.run->id];
  if (tail.sources.empty()) {
    for (const MetricSourceRegistration& r : MetricSources()) tail.sources.push_back(r.make());
  }
  Tailed out;
  Sink sink(look, host, tail, &out.points);
  SourceLook source{look.attempt, look.spec, look.files, look.final, look.now};
  const std::span<const MetricSourceRegistration> names = MetricSources();
  for (size_t i = 0; i < tail.sources.size(); ++i) {
    Result<bool> changed = tail.sources[i]->Read(source, sink);
    if (!changed.ok()) {
      spdlog::warn("run {}: {}: {}", look.run->id, names[i].name, changed.status().message());
      continue;
    }
    out.changed = out.changed || *changed;
  }
  // The step that ended with this batch: its derived points pass the same checks as any other
  // (a NaN derived loss at a real training pace arrives here, not through Feed).
  if (tail.derived) {
    for (auto& [at, d] : tail.derived->Flush()) {
      sink.Record(at, std::move(d.first), d.second, look.now.wall);
    }
  }
  return out;
}

}  // namespace drover
