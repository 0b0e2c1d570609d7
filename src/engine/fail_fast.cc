#include "engine/fail_fast.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cctype>

#include "common/strings.h"

namespace drover {

namespace {

// The outcomes that say the command itself failed; the others (a timeout, CUDA OOM, NaN, a
// stall, an interruption) say it ran and end the watch.
bool CommandFailed(const Run& run) {
  const std::optional<AttemptOutcome> o = ParseAttemptOutcome(run.reason);
  return o && (*o == AttemptOutcome::kExitCode || *o == AttemptOutcome::kSignal ||
               *o == AttemptOutcome::kLaunchError);
}

}  // namespace

std::string FailFast::LastLine(const std::string& error) {
  std::vector<std::string> lines = Split(error, '\n');
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    std::string line = *it;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) return line;
  }
  return "";
}

std::string FailFast::Signature(const Run& run, const std::string& error) {
  // Each number (0.1, 3e-4, 12) becomes one '#'.
  const std::string line = LastLine(error);
  std::string shape;
  for (size_t i = 0; i < line.size();) {
    if (!std::isdigit(static_cast<unsigned char>(line[i]))) {
      shape += line[i++];
      continue;
    }
    shape += '#';
    while (i < line.size() && (std::isdigit(static_cast<unsigned char>(line[i])) ||
                               line[i] == '.' || line[i] == 'e' || line[i] == 'E' ||
                               ((line[i] == '-' || line[i] == '+') &&
                                (line[i - 1] == 'e' || line[i - 1] == 'E')))) {
      ++i;
    }
  }
  return run.reason + "\n" + shape;
}

void FailFast::Watch(const Experiment& e, const Spec& spec) {
  if (spec.fail_fast <= 0) {
    watched_.erase(e.id);
    return;
  }
  Watched w;
  w.name = e.name;
  w.threshold = spec.fail_fast;
  watched_[e.id] = std::move(w);
}

void FailFast::OnFinal(const Run& run) {
  auto it = watched_.find(run.experiment_id);
  if (it == watched_.end() || it->second.over) return;
  Watched& w = it->second;
  if (run.state == RunState::kCancelled) return;  // the user's (or this) doing: not counted
  if (run.state != RunState::kFailed || !CommandFailed(run)) {
    w.over = true;  // it ran, or failed another way: not one error
    return;
  }
  std::string error;
  Result<std::vector<Attempt>> attempts = ctx_.store().ListAttempts(run.id);
  if (!attempts.ok()) {
    ctx_.Fail(attempts.status());
    return;
  }
  if (!attempts->empty()) error = attempts->back().error;
  const std::string signature = Signature(run, error);
  if (w.runs.empty()) {
    w.signature = signature;
    w.error = LastLine(error);
  } else if (signature != w.signature) {
    w.over = true;
    return;
  }
  w.runs.push_back(run.id);
  if (static_cast<int>(w.runs.size()) >= w.threshold) {
    w.over = true;
    w.stop = true;
    ctx_.Wake();
  }
}

void FailFast::Apply(Instant now) {
  for (auto& [experiment_id, w] : watched_) {
    if (!w.stop) continue;
    w.stop = false;
    std::vector<std::string> ids;
    for (int64_t id : w.runs) ids.push_back(std::to_string(id));
    const std::string error =
        w.error.empty() ? fmt::format("{}, with nothing on stderr", w.signature.substr(
                                                                        0, w.signature.find('\n')))
                        : w.error;
    const int cancelled = host_.StopExperiment(
        experiment_id,
        fmt::format("cancelled: its experiment stopped after its first {} runs failed the same way",
                    w.runs.size()),
        now);
    Alert a;
    a.kind = "experiment_stopped";
    a.severity = "error";
    a.key = fmt::format("experiment:{}:fail_fast", experiment_id);
    a.message = fmt::format(
        "experiment {} ({}) stopped: its first {} runs to end ({}) all failed the same way: {}. "
        "{} waiting run{} cancelled and no more trials are proposed; runs still running go on. "
        "Fix the cause (drover logs {} --stderr), then run the spec again (fail_fast: 0 in the "
        "spec turns this off)",
        experiment_id, w.name, w.runs.size(), Join(ids, ", "), error, cancelled,
        cancelled == 1 ? " was" : "s were", w.runs.front());
    a.experiment_id = experiment_id;
    a.run_id = w.runs.back();
    a.data = {{"runs", w.runs}, {"error", error}, {"cancelled", cancelled}};
    ctx_.Alert(std::move(a), now.wall);
  }
}

}  // namespace drover
