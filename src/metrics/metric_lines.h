#pragma once
// Logs are the source of truth for metrics: every stdout line that is a JSON object with numeric
// fields becomes metric points. The reader keeps a byte offset so each line is read once, and
// the offset is stored with the points so a restarted engine resumes where it stopped.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace drover {

inline constexpr int kMaxMetricDepth = 4;
// New metric names one line (or one step of an event file) may add to a run, of the run's
// kMaxMetricNames: a wide first line cannot keep out the names logged after it.
inline constexpr size_t kMaxNewMetricNamesPerLine = 500;

struct MetricLine {
  int64_t step = 0;
  std::vector<std::pair<std::string, double>> values;
};

// The step is the line's "step" field, else its "epoch" field, else `fallback_step`; a step must
// be a finite number of at most 9e15 in magnitude (cut to an integer), else it is not used. The
// "step" field is never a metric, usable or not; "epoch" is one only beside a usable "step"; no
// top-level drover_* field (drover_alert, drover_checkpoint, ...) is one, whatever its value.
// Nested objects are flattened with dots ({"val": {"acc": 0.9}} gives val.acc) down to
// kMaxMetricDepth levels below the top; booleans, strings and lists are ignored. A line that is
// not a JSON object, or has no numeric field, gives nothing.
// Flat objects of numbers (drover.log's lines) are read by a small scanner; anything else by the
// full JSON parser, with the same result.
std::optional<MetricLine> ParseMetricLine(std::string_view line, int64_t fallback_step);
// Always the full JSON parser (the reference the scanner is tested against).
std::optional<MetricLine> ParseMetricLineWithJson(std::string_view line, int64_t fallback_step);

// A line `{"drover_alert": {"message": ..., "level": "warning", "key": ..., "details": {...}}}`
// (drover.alert() in the Python client): an alert raised by the run itself. level defaults to
// warning and must be info, warning or error; key defaults to the message. Anything else,
// including such a line without a message, is not an alert line.
struct AlertLine {
  std::string message;
  std::string level = "warning";
  std::string key;
  nlohmann::json details = nlohmann::json::object();
};
std::optional<AlertLine> ParseAlertLine(std::string_view line);

// What a run reports about itself through the Python client (docs/python.md), one JSON line each:
//   {"drover_checkpoint": {"step": N, ...}}   a checkpoint saved at step N (drover.Checkpointer)
//   {"drover_resume": {"step": N}}            resumed from the checkpoint of step N
//   {"drover_hparams": {"args.lr": 0.01, ...}} hyper-parameters (numbers, strings, booleans, null)
// Anything else, or a line of another shape, is none of these.
struct ReportLine {
  enum class Kind { kCheckpoint, kResume, kHparams };
  Kind kind = Kind::kCheckpoint;
  int64_t step = 0;                                 // checkpoint and resume
  nlohmann::json hparams = nlohmann::json::object();  // at most kMaxHparams, values cut
};
inline constexpr size_t kMaxHparams = 256;
inline constexpr size_t kMaxHparamBytes = 200;  // a string value or a key longer is cut
std::optional<ReportLine> ParseReportLine(std::string_view line);

// Bounds on one ReadNewLines call. Memory stays within a chunk and max_line whatever the file
// holds (a run can print gigabytes between two looks).
struct LineLimits {
  // A line longer than this is not handed over (no metric or alert line is that long): it is
  // skipped up to its newline. 0: no limit.
  int64_t max_line = 0;
  // Stop after about this many bytes (at a line's end) unless `final`; the next call goes on
  // from there. 0: no limit.
  int64_t max_read = 0;
};
// What the engine reads of a running attempt's output per look.
inline constexpr LineLimits kEngineLineLimits{1 << 20, 16 << 20};

// Calls `on_line` for each complete line in `path` after byte `offset` and returns the offset
// after the last complete line (or the skipped part of an over-long one). With `final` (the
// process has ended) a last line without a newline counts too. A missing file reads as empty;
// a file no longer than `offset` is not opened.
Result<int64_t> ReadNewLines(const std::string& path, int64_t offset, bool final,
                             const std::function<void(std::string_view)>& on_line,
                             const LineLimits& limits = {});

// The last `max_bytes` of a file ("" when missing), for classifying how a run ended.
std::string ReadTail(const std::string& path, int64_t max_bytes);

}  // namespace drover
