#pragma once
// A ProcessLauncher whose processes are scripted and whose time is a FakeClock: engine tests run
// retries, timeouts and cancels with no sleeps and no real processes. Output is written to the
// attempt's log files at start, so the engine's log reader sees it as it would a real run's.
#include <csignal>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "exec/process_launcher.h"

namespace drover::testing {

struct FakeProcess {
  Millis duration_ms = 10;
  int exit_code = 0;
  std::string stdout_text;
  std::string stderr_text;
  bool ignores_sigterm = false;
};

class FakeLauncher : public ProcessLauncher {
 public:
  using Script = std::function<FakeProcess(const LaunchSpec&)>;
  FakeLauncher(FakeClock& clock, Script script) : clock_(clock), script_(std::move(script)) {}

  Result<ExecHandle> Start(const LaunchSpec& spec) override {
    if (spec.argv.empty() || spec.argv[0] == "no-such-program") {
      return Status(Code::kIo, "cannot start 'no-such-program': No such file or directory");
    }
    FakeProcess p = script_(spec);
    std::ofstream(spec.stdout_path) << p.stdout_text;
    std::ofstream(spec.stderr_path) << p.stderr_text;
    int pid = next_pid_++;
    // Processes run for a duration: monotonic time, which a step of the wall clock leaves alone.
    live_[pid] = {p, clock_.Monotonic() + p.duration_ms, 0};
    launches.push_back(spec);
    running_now = static_cast<int>(live_.size());
    max_running = std::max(max_running, running_now);
    return ExecHandle(pid);
  }

  // With background_starts, starts are handed over as the daemon's supervisor takes them: each
  // is reported by the next Wait() (held back one more when that Wait delivers an interrupt, so a
  // Ctrl-C can come while a run is starting).
  bool StartsInBackground() const override { return background_starts; }
  Result<int64_t> BeginStart(const LaunchSpec& spec) override {
    const int64_t ticket = next_ticket_++;
    StartOutcome o;
    o.ticket = ticket;
    Result<ExecHandle> started = Start(spec);
    if (started.ok()) {
      o.handle = *started;
      o.identity = 1;
    } else {
      o.error = started.status();
    }
    handed_over_.push_back(std::move(o));
    return ticket;
  }

  // Recorded as the signal a local launcher would send its group.
  void Stop(ExecHandle attempt, StopSignal how) override {
    const int pgid = static_cast<int>(attempt.id);
    const int sig = how == StopSignal::kKill ? SIGKILL : SIGTERM;
    signals.push_back({pgid, sig});
    auto it = live_.find(pgid);
    if (it == live_.end()) return;
    if (sig == SIGKILL || (sig == SIGTERM && !it->second.proc.ignores_sigterm)) {
      it->second.end_ms = clock_.Monotonic();
      it->second.signal = sig;
    }
  }

  WaitResult Wait(int64_t timeout_ms) override {
    WaitResult r;
    if (pending_interrupt != 0) {
      // Delivered together with whatever exits are due now, as a real Wait may.
      r.interrupt_signal = pending_interrupt;
      pending_interrupt = 0;
      timeout_ms = 0;
    }
    if (!handed_over_.empty()) {
      if (r.interrupt_signal == 0) {
        r.started = std::move(handed_over_);
        handed_over_.clear();
      }
      timeout_ms = 0;
    }
    Millis limit = clock_.Monotonic() + timeout_ms;
    Millis first = limit;
    for (const auto& [pid, l] : live_) first = std::min(first, l.end_ms);
    if (first > clock_.Monotonic()) clock_.Advance(first - clock_.Monotonic());
    auto reported = [&](int pid) {  // a process's start is reported before its exit
      for (const StartOutcome& o : handed_over_) {
        if (o.handle.id == pid) return false;
      }
      return true;
    };
    for (auto it = live_.begin(); it != live_.end();) {
      if (it->second.end_ms <= clock_.Monotonic() && reported(it->first)) {
        ProcessExit e;
        e.handle = ExecHandle(it->first);
        if (it->second.signal != 0) {
          e.signal = it->second.signal;
        } else {
          e.exit_code = it->second.proc.exit_code;
        }
        r.exits.push_back(e);
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
    if (!r.exits.empty() && interrupt_with_next_exit != 0) {
      r.interrupt_signal = interrupt_with_next_exit;
      interrupt_with_next_exit = 0;
    }
    running_now = static_cast<int>(live_.size());
    if (on_wait) on_wait(*this);
    return r;
  }

  // Shims a previous engine started: Identity knows them (as it knows this launcher's own
  // pids, start ticks 1), and once adopted they end after `remaining_ms` with `exit_code`
  // (SIGKILL ends them at once), as a real adopted shim is reported from its exit file.
  struct Foreign {
    int64_t ticks = 1;
    Millis remaining_ms = 1000;
    int exit_code = 0;
    bool ignores_sigterm = false;
    std::map<std::string, std::string> env;  // what EnvOf reads (none: unreadable)
  };
  std::map<int, Foreign> foreign;
  std::optional<std::string> EnvOf(ExecHandle attempt, const std::string& name) override {
    auto it = foreign.find(static_cast<int>(attempt.id));
    if (it == foreign.end()) return std::nullopt;
    auto v = it->second.env.find(name);
    if (v == it->second.env.end()) return std::nullopt;
    return v->second;
  }
  int64_t Identity(ExecHandle attempt) override {
    const int pid = static_cast<int>(attempt.id);
    if (live_.count(pid)) return 1;
    auto it = foreign.find(pid);
    return it == foreign.end() ? 0 : it->second.ticks;
  }
  void Adopt(ExecHandle attempt, int64_t start_ticks, const ExitRecordAt& record) override {
    const int pid = static_cast<int>(attempt.id);
    adopted.push_back({pid, record.file});
    auto it = foreign.find(pid);
    if (it == foreign.end() || it->second.ticks != start_ticks) return;
    FakeProcess p;
    p.exit_code = it->second.exit_code;
    p.ignores_sigterm = it->second.ignores_sigterm;
    live_[pid] = {p, clock_.Monotonic() + it->second.remaining_ms, 0};
    foreign.erase(it);
  }
  void set_next_pid(int pid) { next_pid_ = pid; }

  std::vector<LaunchSpec> launches;
  std::vector<std::pair<int, std::string>> adopted;  // pid, exit_path
  std::vector<std::pair<int, int>> signals;
  int running_now = 0;
  int max_running = 0;
  int pending_interrupt = 0;         // delivered by the next Wait, with the exits due by then
  int interrupt_with_next_exit = 0;  // a Ctrl-C that arrives in the same Wait as an exit
  std::function<void(FakeLauncher&)> on_wait;
  bool background_starts = false;

 private:
  struct LiveProc {
    FakeProcess proc;
    Millis end_ms = 0;
    int signal = 0;
  };
  FakeClock& clock_;
  Script script_;
  std::vector<StartOutcome> handed_over_;  // not reported yet
  int64_t next_ticket_ = 1;
  std::map<int, LiveProc> live_;
  int next_pid_ = 1000;
};

// The value of NAME in a launch's environment ("" when absent).
inline std::string EnvOf(const LaunchSpec& spec, const std::string& name) {
  for (const auto& kv : spec.env) {
    if (kv.rfind(name + "=", 0) == 0) return kv.substr(name.size() + 1);
  }
  return "";
}

}  // namespace drover::testing
