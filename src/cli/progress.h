#pragma once
// What `drover run` shows while the engine works: on a terminal a live view redrawn in place
// (done/running/queued/failed, each running run's latest metric, ETA); otherwise one plain line
// per state change, for logs and CI.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "engine/engine.h"

namespace drover::cli {

// Why a run is on a later attempt, from the attempt before it: "retried after CUDA OOM:
// batch_size 64 -> 32" (the parameters it now runs with, against its own), or "retried after
// exit_code". For the follower, which sees the new attempt and not the engine's note.
std::string RetryNote(const Run& run, const Attempt& previous);

class ProgressView : public EngineObserver {
 public:
  ProgressView(std::FILE* out, bool live, const Clock& clock, std::string title,
               std::vector<Run> runs, std::vector<std::string> varying, std::string metric);
  void OnRunChanged(const Run& run, const Attempt* attempt, const std::string& note) override;
  void OnMetrics(const Run& run, const std::vector<MetricPoint>& points) override;
  void OnTick() override;
  void OnStopping(int running, bool force, Millis grace_ms) override;
  void OnStoreStalled(const Status& why, Millis retry_in_ms) override;
  void OnStoreRecovered(Millis stalled_ms) override;
  void OnStartsHeld(int64_t run_id, const Status& why, Millis retry_in_ms) override;
  void OnStartsResumed(Millis held_ms) override;
  void Finish();  // final redraw; leaves the view on screen

 private:
  struct Row {
    Run run;
    std::string where;   // "GPU 0", "CPU", "Slurm job 12 on node3 (partition gpu)"
    std::string latest;  // "epoch 3 val_acc=0.95"
    Millis started_ms = 0;
  };
  void Draw(bool force);
  std::string Summary() const;

  std::FILE* out_;
  bool live_;
  const Clock& clock_;
  std::string title_;
  std::vector<std::string> varying_;
  std::string metric_;
  std::map<int64_t, Row> rows_;
  Millis start_ms_;
  Millis last_draw_ms_ = 0;
  int drawn_lines_ = 0;
  bool stalled_ = false;  // the store could not commit at the last word from the engine
  bool held_ = false;     // no run could be prepared to start at the last word from the engine
  std::vector<Millis> durations_;
};

}  // namespace drover::cli
