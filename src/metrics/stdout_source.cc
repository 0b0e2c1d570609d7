// The run's stdout as a metric source (docs/metrics.md): every line that is a JSON object with
// numeric fields is one step's points; drover's report lines (checkpoint, resume, hparams) change
// the attempt's record; every other line is handed on (the run's own alerts are read from them).
#include <string_view>

#include "metrics/metric_lines.h"
#include "metrics/metric_source.h"

namespace drover {

namespace {

class StdoutSource : public MetricSource {
 public:
  Result<bool> Read(const SourceLook& look, PointSink& sink) override {
    Attempt& a = *look.attempt;
    if (a.id != attempt_id_) {  // a new attempt: its own lines, counted from the first
      attempt_id_ = a.id;
      lines_ = 0;
    }
    bool reported = false;
    auto offset = ReadNewLines(a.stdout_path, a.stdout_offset, look.final,
                               [&](std::string_view line) {
      sink.Line(line);
      if (auto r = ParseReportLine(line)) {
        reported = true;
        if (r->kind == ReportLine::Kind::kCheckpoint) {
          a.checkpoint = CheckpointMark{r->step, look.now.wall};
        } else if (r->kind == ReportLine::Kind::kResume) {
          if (!a.checkpoint) a.checkpoint = CheckpointMark{r->step, look.now.wall};
          a.hparams["resumed_from_step"] = r->step;
        } else {
          for (auto it = r->hparams.begin(); it != r->hparams.end(); ++it) {
            if (a.hparams.size() >= kMaxHparams && !a.hparams.contains(it.key())) break;
            a.hparams[it.key()] = it.value();
          }
        }
        return;
      }
      // A line without step or epoch is the step after the last line's.
      auto m = ParseMetricLine(line, lines_);
      if (!m) return;
      ++lines_;
      sink.BeginLine();
      for (auto& [name, value] : m->values) {
        sink.Point(m->step, std::move(name), value, look.now.wall);
      }
    }, kEngineLineLimits);
    if (!offset.ok()) return offset.status();
    const bool changed = reported || *offset != a.stdout_offset;
    a.stdout_offset = *offset;
    return changed;
  }

 private:
  int64_t attempt_id_ = -1;
  int64_t lines_ = 0;  // metric lines of this attempt read so far: the step of lines without one
};

}  // namespace

std::unique_ptr<MetricSource> MakeStdoutSource() { return std::make_unique<StdoutSource>(); }

}  // namespace drover
