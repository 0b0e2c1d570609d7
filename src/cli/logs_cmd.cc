// drover logs RUN: a run's output, from the attempt's log files.
#include <fmt/format.h>
#include <unistd.h>

#include <thread>

#include "cli/client.h"
#include "cli/common.h"
#include "common/strings.h"
#include "common/terminal.h"
#include "metrics/metric_lines.h"

namespace drover::cli {
namespace {

struct LogsFlags {
  std::string run;
  int attempt = 0;
  bool stderr_stream = false;
  bool follow = false;
  bool json = false;
};

// A run's output goes out as it is to a file or a pipe (what a pager or a script reads is the run's
// own bytes). On a terminal it is shown through TerminalText: an escape sequence in it would act
// on the reader's terminal (clear it, set its title, write its clipboard), and the reader may be
// an admin reading another user's run. A UTF-8 character cut between two chunks is held for the
// next one.
class OutputWriter {
 public:
  void Write(std::string_view data) {
    if (!tty_) {
      std::fwrite(data.data(), 1, data.size(), stdout);
      return;
    }
    held_.append(data);
    size_t keep = 0;  // the bytes of a character the next chunk completes
    for (size_t back = 1; back <= 3 && back <= held_.size(); ++back) {
      const auto c = static_cast<unsigned char>(held_[held_.size() - back]);
      if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
      const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
      if (need > back) keep = back;
      break;
    }
    const std::string out = TerminalText(std::string_view(held_).substr(0, held_.size() - keep));
    std::fwrite(out.data(), 1, out.size(), stdout);
    held_.erase(0, held_.size() - keep);
  }
  ~OutputWriter() {
    const std::string rest = TerminalText(held_);
    std::fwrite(rest.data(), 1, rest.size(), stdout);
  }

 private:
  const bool tty_ = ::isatty(STDOUT_FILENO) == 1;
  std::string held_;
};

// Through the daemon's API (GET /runs/{id}/logs), following attempts as the daemon runs them.
int LogsFromDaemon(const DaemonInfo& daemon, const LogsFlags& f) {
  auto id = ParseRunId(f.run);
  if (!id.ok()) return ReportError(id.status());
  ApiClient api(daemon);
  std::string stream = f.stderr_stream ? "stderr" : "stdout";
  int attempt = f.attempt;
  int64_t offset = 0;
  std::string all;  // for --json
  OutputWriter out;
  while (true) {
    std::string path = fmt::format("/runs/{}/logs?stream={}&offset={}{}{}", *id, stream, offset,
                                   attempt > 0 ? fmt::format("&attempt={}", attempt) : "",
                                   f.follow ? "&follow=1" : "");
    auto r = api.Get(path, 60);
    if (!r.ok()) return ReportError(r.status());
    const Json& j = *r;
    std::string data = j.value("data", "");
    if (f.json) {
      all += data;
    } else {
      out.Write(data);
      std::fflush(stdout);
    }
    int got = j.value("attempt", 0);
    offset = j.value("next_offset", offset);
    if (!f.follow) {
      if (!j.value("ended", false) && data.empty()) break;
      if (j.value("ended", false) || data.empty()) break;
      attempt = got;
      continue;  // more than one chunk
    }
    if (got > 0) attempt = got;
    if (j.value("ended", false)) {
      if (got < j.value("attempts", 0)) {
        attempt = got + 1;
        offset = 0;
        if (!f.json) std::printf("--- attempt %d ---\n", attempt);
        continue;
      }
      if (j.value("run_ended", false)) break;
      attempt = got + 1;  // a retry may come: the server waits for it to start
      offset = 0;
    }
  }
  if (f.json) {
    Json lines = Json::array();
    for (const auto& l : Split(all, '\n')) lines.push_back(l);
    if (!lines.empty() && lines.back() == "") lines.erase(lines.end() - 1);
    std::printf("%s\n", Json({{"run_id", *id}, {"attempt", attempt}, {"stream", stream},
                              {"lines", lines}})
                            .dump(2, ' ', false, Json::error_handler_t::replace)
                            .c_str());
  }
  return kExitOk;
}

int Logs(Globals& g, const LogsFlags& f) {
  if (auto daemon = FindDaemon(g)) return LogsFromDaemon(*daemon, f);
  auto store = OpenStore(g, false);
  if (!store.ok()) return ReportError(store.status());
  auto run = LoadRun(**store, f.run);
  if (!run.ok()) return ReportError(run.status());
  auto attempts = (*store)->ListAttempts(run->id);
  if (!attempts.ok()) return ReportError(attempts.status());
  if (attempts->empty()) {
    if (!f.follow) {
      std::fprintf(stderr, "run %lld has not started yet; no output\n",
                   static_cast<long long>(run->id));
      return kExitOk;
    }
  }
  if (f.attempt < 0 || f.attempt > static_cast<int>(attempts->size())) {
    return ReportError(InvalidArgument(fmt::format("run {} has {} attempts; pick 1..{}", run->id,
                                                   attempts->size(), attempts->size())));
  }
  int number = f.attempt > 0 ? f.attempt : static_cast<int>(attempts->size());
  auto path_of = [&](const Attempt& a) { return f.stderr_stream ? a.stderr_path : a.stdout_path; };

  if (f.json) {
    if (number == 0) {
      std::printf("%s\n", Json({{"run_id", run->id}, {"attempt", 0}, {"lines", Json::array()}})
                              .dump(2, ' ', false, Json::error_handler_t::replace)
                              .c_str());
      return kExitOk;
    }
    const Attempt& a = (*attempts)[number - 1];
    Json lines = Json::array();
    auto st = ReadNewLines(path_of(a), 0, true, [&](std::string_view l) { lines.push_back(l); });
    if (!st.ok()) return ReportError(st.status());
    std::printf("%s\n", Json({{"run_id", run->id},
                              {"attempt", number},
                              {"stream", f.stderr_stream ? "stderr" : "stdout"},
                              {"path", path_of(a)},
                              {"lines", lines}})
                            .dump(2, ' ', false, Json::error_handler_t::replace)
                            .c_str());
    return kExitOk;
  }

  int64_t offset = 0;
  OutputWriter out;
  auto print = [&](std::string_view l) {
    out.Write(l);
    out.Write("\n");
  };
  while (true) {
    if (number >= 1 && number <= static_cast<int>(attempts->size())) {
      const Attempt& a = (*attempts)[number - 1];
      auto next = ReadNewLines(path_of(a), offset, a.ended, print);
      if (!next.ok()) return ReportError(next.status());
      offset = *next;
      std::fflush(stdout);
      if (!f.follow) return kExitOk;
      if (a.ended && number < static_cast<int>(attempts->size())) {
        ++number;  // a retry started: follow it
        offset = 0;
        std::printf("--- attempt %d ---\n", number);
        continue;
      }
      if (a.ended && IsFinal(run->state)) return kExitOk;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto r = (*store)->GetRun(run->id);
    auto at = (*store)->ListAttempts(run->id);
    if (!r.ok() || !at.ok() || !r->has_value()) return kExitInternal;
    run = **r;
    *attempts = *at;
    if (number == 0 && !attempts->empty()) number = 1;
    // Cancelled before it ever started: there is nothing more to wait for.
    if (attempts->empty() && IsFinal(run->state)) return kExitOk;
  }
}

}  // namespace

Command RegisterLogs(CLI::App& root, Globals& g) {
  auto f = std::make_shared<LogsFlags>();
  CLI::App* app =
      root.add_subcommand("logs", "Print a run's output (the latest attempt by default)");
  app->add_option("run", f->run, "Run id, as `drover ls` lists it")->required();
  app->add_option("-a,--attempt", f->attempt, "Which attempt (1, 2, ...); default the latest");
  app->add_flag("--stderr", f->stderr_stream, "Print stderr instead of stdout");
  app->add_flag("-f,--follow", f->follow, "Keep printing new output until the run ends");
  app->add_flag("--json", f->json, "Print the lines as JSON");
  return {app, [&g, f] { return Logs(g, *f); }};
}

}  // namespace drover::cli
