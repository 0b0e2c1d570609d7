// The engine's side of metric tailing (metrics/metric_tail.h): at each look the tail reads the
// running attempt's sources; the points and the offsets they reach are stored in one
// transaction, so none is lost or stored twice; output of any kind counts as progress for stall
// detection.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>

#include "engine/engine.h"
#include "engine/live.h"

namespace drover {

namespace fs = std::filesystem;

// The tail's host for one run: the engine, for that run.
class Engine::TailHostFor : public TailHost {
 public:
  TailHostFor(Engine& engine, Live& live, Instant now) : e_(engine), live_(live), now_(now) {}
  void Line(std::string_view line) override {
    e_.alerts_.OnRunLine(live_.run, live_.attempt ? live_.attempt->number : 0, line, now_.wall);
  }
  void Warn(const watch::Finding& finding, const std::string& key) override {
    e_.alerts_.RaiseForRun(live_.run, AttemptNumber(live_), finding, key, now_.wall);
  }
  Result<std::vector<Attempt>> Attempts() override {
    return e_.store_.ListAttempts(live_.run.id);
  }
  void Diverged(const std::string& name, double value, int64_t step) override {
    if (Stopping(live_)) return;
    // A diverged run only burns GPU time from here on: stop it now.
    e_.Stop(live_, StopReason::kDiverged, now_, e_.options_.kill_grace_ms);
    spdlog::info("run {}: {} is {} at step {}: stopping it as diverged", live_.run.id, name,
                 value, step);
    watch::Finding f;
    f.kind = "diverged";
    f.severity = "error";
    f.message = fmt::format("{} became {} at step {}: stopped the run as diverged", name,
                            std::isnan(value) ? "NaN" : "infinite", step);
    f.data = {{"metric", name}, {"step", step}};
    e_.alerts_.RaiseForRun(live_.run, AttemptNumber(live_), f, "diverged", now_.wall);
  }

 private:
  Engine& e_;
  Live& live_;
  Instant now_;
};

// Notes whether the run's logs grew since last seen (its clock for monitor.stall_ms).
void Engine::NoteOutput(Live& live, Instant now) {
  if (SpecOf(live).monitor.stall_ms <= 0) return;
  const Attempt& a = *live.attempt;
  // Any output counts as progress, stderr too (tqdm bars, warnings).
  std::error_code ec;
  int64_t bytes = static_cast<int64_t>(fs::file_size(a.stdout_path, ec));
  if (ec) bytes = 0;
  int64_t err_bytes = static_cast<int64_t>(fs::file_size(a.stderr_path, ec));
  if (!ec) bytes += err_bytes;
  watchers_.OnOutputSize(live.run.id, bytes, now.mono);
}

// Reads the running attempt's metric sources (tail_) and stores what they gave.
void Engine::TailMetrics(Live& live, bool final, Instant now) {
  Attempt& a = *live.attempt;
  TailHostFor host(*this, live, now);
  TailLook look;
  look.run = &live.run;
  look.attempt = &a;
  look.spec = &SpecOf(live);
  look.files = live.files ? &*live.files : nullptr;
  look.final = final;
  look.now = now;
  Tailed tailed = tail_.Read(look, host);
  NoteOutput(live, now);
  if (!tailed.changed && tailed.points.empty()) return;
  Tx();
  // Points and the offsets they reach land in one transaction, so none is lost or stored twice.
  Status st = store_.InsertMetrics(tailed.points);
  if (st.ok()) st = store_.UpdateAttempt(a);
  if (st.ok()) st = store_.UpdateRun(live.run);
  if (!st.ok()) Fail(st);
  WatchPoints(live, tailed.points, now.wall);
  if (live.attempt && !live.attempt->stopping && search_.OnPoints(live.run, tailed.points, final)) {
    Stop(live, StopReason::kPrune, now, options_.kill_grace_ms);
  }
  if (!tailed.points.empty()) {
    Notify([this, run = live.run, points = std::move(tailed.points)] {
      observer_->OnMetrics(run, points);
    });
  }
}

}  // namespace drover
