#include "cli/progress.h"

#include <fmt/format.h>

#include <algorithm>

#include "cli/common.h"
#include "common/strings.h"
#include "common/terminal.h"

namespace drover::cli {

std::string RetryNote(const Run& run, const Attempt& previous) {
  const std::optional<AttemptOutcome> outcome = ParseAttemptOutcome(previous.reason);
  std::string why = outcome == AttemptOutcome::kCudaOom ? "CUDA OOM"
                    : previous.reason.empty()           ? "its attempt " + std::to_string(previous.number)
                                                        : previous.reason;
  std::string changed;
  if (run.params.is_object() && run.current_params.is_object()) {
    for (const auto& [name, now] : run.current_params.items()) {
      auto was = run.params.find(name);
      if (was == run.params.end() || *was == now) continue;
      changed += fmt::format("{}{} {} -> {}", changed.empty() ? "" : ", ", name, FormatValue(*was),
                             FormatValue(now));
    }
  }
  return "retried after " + why + (changed.empty() ? "" : ": " + changed);
}

ProgressView::ProgressView(std::FILE* out, bool live, const Clock& clock, std::string title,
                           std::vector<Run> runs, std::vector<std::string> varying,
                           std::string metric)
    : out_(out),
      live_(live),
      clock_(clock),
      title_(std::move(title)),
      varying_(std::move(varying)),
      metric_(std::move(metric)),
      start_ms_(clock.Now()) {
  for (auto& r : runs) rows_[r.id].run = std::move(r);
}

void ProgressView::OnRunChanged(const Run& run, const Attempt* attempt, const std::string& note) {
  Row& row = rows_[run.id];
  Millis now = clock_.Now();
  const bool was_running = row.run.state == RunState::kRunning;
  const std::string was_where = row.where;
  if (run.state == RunState::kRunning && attempt) {
    // A Slurm job says where it is (pending, then its node); a local run its GPUs.
    const std::string placed = DescribePlacement(attempt->executor);
    row.where = !placed.empty()                       ? placed
                : attempt->cuda_visible_devices.empty() ? "CPU"
                                                        : "GPU " + attempt->cuda_visible_devices;
    row.started_ms = attempt->started_ms;
    row.latest.clear();
  }
  if (IsFinal(run.state) && row.run.started_ms > 0) {
    durations_.push_back(now - row.run.started_ms);
  }
  if (IsFinal(run.state) && run.started_ms > 0 && row.run.started_ms == 0) {
    durations_.push_back(now - run.started_ms);
  }
  row.run = run;
  if (live_) return;
  // Nothing new to say: still running where it was.
  if (was_running && run.state == RunState::kRunning && row.where == was_where) return;
  std::string params = ParamsSummary(run.current_params, varying_);
  std::string line =
      fmt::format("[{}] run {} {}", FormatDuration(now - start_ms_), run.id, ToString(run.state));
  if (run.state == RunState::kRunning) line += " on " + row.where;
  if (!params.empty()) line += " (" + params + ")";
  if (attempt && attempt->number > 1 && run.state == RunState::kRunning) {
    line += fmt::format(" attempt {}", attempt->number);
  }
  // The note, unless the line says it already (the state, "succeeded"; where, "on CPU").
  if (!note.empty() && note != ToString(run.state) && line.find(note) == std::string::npos) {
    line += ": " + note;
  }
  if (IsFinal(run.state) && !metric_.empty() && run.final_metrics.contains(metric_)) {
    line += fmt::format("  {}={}", metric_, FormatValue(run.final_metrics[metric_]));
  }
  // A note may quote the run's stderr; names are the run's own: shown, never obeyed.
  std::fprintf(out_, "%s\n", TerminalLine(line).c_str());
  std::fflush(out_);
}

void ProgressView::OnMetrics(const Run& run, const std::vector<MetricPoint>& points) {
  Row& row = rows_[run.id];
  row.run.final_metrics = run.final_metrics;
  if (points.empty()) return;
  std::string shown = metric_;
  if (shown.empty() || !run.final_metrics.contains(shown)) shown = points.back().name;
  row.latest =
      fmt::format("step {} {}={}", points.back().step, shown,
                  run.final_metrics.contains(shown) ? FormatValue(run.final_metrics[shown]) : "?");
}

void ProgressView::OnStopping(int running, bool force, Millis grace_ms) {
  std::string msg =
      force ? fmt::format("drover: killing {} run{} now", running, running == 1 ? "" : "s")
            : fmt::format(
                  "drover: stopping {} run{} (SIGTERM; SIGKILL in {}); Ctrl-C again to "
                  "kill at once",
                  running, running == 1 ? "" : "s", FormatDuration(grace_ms));
  // Below the live view, which is redrawn above it from now on.
  if (live_) drawn_lines_ = 0;
  std::fprintf(out_, "%s\n", msg.c_str());
  std::fflush(out_);
}

void ProgressView::OnStoreStalled(const Status& why, Millis retry_in_ms) {
  std::string msg;
  if (!stalled_) {
    msg = fmt::format(
        "drover: cannot write to the store: {}. Running runs keep running; no run starts until "
        "there is room: free space on the store's disk (retrying in {})",
        why.message(), FormatDuration(retry_in_ms));
  } else {
    msg = fmt::format("drover: the store still cannot commit; retrying in {}",
                      FormatDuration(retry_in_ms));
  }
  stalled_ = true;
  if (live_) drawn_lines_ = 0;
  std::fprintf(out_, "%s\n", msg.c_str());
  std::fflush(out_);
}

void ProgressView::OnStoreRecovered(Millis stalled_ms) {
  stalled_ = false;
  if (live_) drawn_lines_ = 0;
  std::fprintf(out_, "drover: the store commits again after %s; nothing was lost, carrying on\n",
               FormatDuration(stalled_ms).c_str());
  std::fflush(out_);
}

void ProgressView::OnStartsHeld(int64_t run_id, const Status& why, Millis retry_in_ms) {
  std::string msg;
  if (!held_) {
    msg = fmt::format(
        "drover: cannot prepare run {} to start: {}. Running runs keep running; queued runs wait, "
        "charged nothing: free space on the store's disk (retrying in {})",
        run_id, why.message(), FormatDuration(retry_in_ms));
  } else {
    msg = fmt::format("drover: run {} still cannot be prepared; retrying in {}", run_id,
                      FormatDuration(retry_in_ms));
  }
  held_ = true;
  if (live_) drawn_lines_ = 0;
  std::fprintf(out_, "%s\n", msg.c_str());
  std::fflush(out_);
}

void ProgressView::OnStartsResumed(Millis held_ms) {
  held_ = false;
  if (live_) drawn_lines_ = 0;
  std::fprintf(out_, "drover: runs start again after %s; none was charged an attempt\n",
               FormatDuration(held_ms).c_str());
  std::fflush(out_);
}

void ProgressView::OnTick() {
  if (live_) Draw(false);
}

void ProgressView::Finish() {
  if (live_) Draw(true);
}

std::string ProgressView::Summary() const {
  int done = 0, running = 0, queued = 0, failed = 0, cancelled = 0, pruned = 0;
  for (const auto& [id, row] : rows_) {
    switch (row.run.state) {
      case RunState::kSucceeded:
        ++done;
        break;
      case RunState::kRunning:
        ++running;
        break;
      case RunState::kQueued:
      case RunState::kRetrying:
        ++queued;
        break;
      case RunState::kFailed:
        ++failed;
        break;
      case RunState::kCancelled:
        ++cancelled;
        break;
      case RunState::kPruned:
        ++pruned;
        break;
    }
  }
  Millis now = clock_.Now();
  std::string eta = "?";
  int left = running + queued;
  if (left == 0) {
    eta = "0s";
  } else if (!durations_.empty()) {
    double mean = 0;
    for (Millis d : durations_) mean += static_cast<double>(d);
    mean /= static_cast<double>(durations_.size());
    int parallel = std::max(1, running);
    eta = FormatDuration(static_cast<Millis>(mean * left / parallel));
  }
  std::string s = fmt::format("{}: {} done, {} running, {} queued, {} failed", title_, done,
                              running, queued, failed);
  if (pruned) s += fmt::format(", {} pruned", pruned);
  if (cancelled) s += fmt::format(", {} cancelled", cancelled);
  s += fmt::format("  elapsed {}  ETA {}", FormatDuration(now - start_ms_), eta);
  return s;
}

void ProgressView::Draw(bool force) {
  Millis now = clock_.Now();
  if (!force && now - last_draw_ms_ < 200) return;
  last_draw_ms_ = now;
  std::vector<std::string> lines = {Summary()};
  for (const auto& [id, row] : rows_) {
    if (row.run.state != RunState::kRunning) continue;
    std::string l =
        fmt::format("  run {:<5} {:<7} {:<6}", id, row.where, FormatDuration(now - row.started_ms));
    std::string params = ParamsSummary(row.run.current_params, varying_);
    if (!params.empty()) l += " " + params;
    if (!row.latest.empty()) l += "  " + row.latest;
    lines.push_back(l);
  }
  std::string buf;
  if (drawn_lines_ > 0) buf += fmt::format("\x1b[{}F\x1b[J", drawn_lines_);
  for (const auto& l : lines) buf += TerminalLine(l) + "\n";  // the view's own escapes above only
  std::fputs(buf.c_str(), out_);
  std::fflush(out_);
  drawn_lines_ = static_cast<int>(lines.size());
}

}  // namespace drover::cli
