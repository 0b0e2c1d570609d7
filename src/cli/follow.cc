#include "cli/follow.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <httplib.h>

#include "cli/catalog.h"
#include "cli/comparison.h"
#include "cli/progress.h"
#include "protocol/api.h"

namespace drover::cli {
namespace {

std::atomic<int> g_interrupts{0};
void OnSigint(int) { g_interrupts.fetch_add(1); }

}  // namespace

void CatchInterruptsForFollow() {
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: a blocking call returns at Ctrl-C
}

Result<Experiment> FetchExperiment(ApiClient& api, const std::string& id_or_name) {
  DROVER_ASSIGN_OR_RETURN(Json j, api.Get("/experiments/" + id_or_name));
  const Json& e = j.contains("experiment") ? j["experiment"] : j;
  return protocol::ExperimentFromJson(e);
}

Result<std::vector<Run>> FetchRuns(ApiClient& api, const RunFilter& f) {
  std::vector<Run> out;
  int offset = f.offset;
  while (true) {
    int page = f.limit > 0 ? std::min(1000, f.limit - static_cast<int>(out.size())) : 1000;
    if (page <= 0) break;
    std::string q = fmt::format("/runs?limit={}&offset={}&order={}", page, offset,
                                f.newest_first ? "desc" : "asc");
    if (f.experiment_id > 0) q += fmt::format("&experiment={}", f.experiment_id);
    if (f.state) q += fmt::format("&state={}", ToString(*f.state));
    if (!f.user.empty()) q += "&user=" + httplib::detail::encode_query_param(f.user);
    DROVER_ASSIGN_OR_RETURN(Json j, api.Get(q));
    const Json& list = j.contains("runs") ? j["runs"] : j;
    for (const auto& r : list) {
      DROVER_ASSIGN_OR_RETURN(Run run, protocol::RunFromJson(r));
      out.push_back(std::move(run));
    }
    if (static_cast<int>(list.size()) < page) break;
    // A full page that is the last: the daemon says so (no request for an empty page).
    if (j.contains("next_offset") && j["next_offset"].is_null()) break;
    offset += static_cast<int>(list.size());
  }
  return out;
}

Result<std::vector<Run>> FetchRuns(ApiClient& api, int64_t experiment_id) {
  RunFilter f;
  f.experiment_id = experiment_id;
  return FetchRuns(api, f);
}

Result<std::map<int64_t, CurveSummary>> FetchCurveSummaries(ApiClient& api, int64_t experiment_id,
                                                            const std::string& metric,
                                                            int last_k) {
  DROVER_ASSIGN_OR_RETURN(
      Json j, api.Get(fmt::format("/experiments/{}/summaries?metric={}&last={}", experiment_id,
                                  httplib::detail::encode_query_param(metric),
                                  std::max(1, last_k))));
  return protocol::CurveSummariesFromJson(j);
}

Result<protocol::ExperimentListing> FetchExperimentCounts(ApiClient& api, int64_t experiment_id) {
  DROVER_ASSIGN_OR_RETURN(Json j, api.Get(fmt::format("/experiments/{}", experiment_id)));
  return protocol::ExperimentListingFromJson(j);
}

Millis FollowPace::Next(Millis now_ms, int64_t ended, int64_t left) {
  Millis wait = last_wait_ > 0 ? last_wait_ * 2 : min_ms_;
  if (last_ms_ >= 0 && ended > last_ended_ && now_ms > last_ms_) {
    wait = static_cast<Millis>(static_cast<double>(left) * static_cast<double>(now_ms - last_ms_) /
                               static_cast<double>(ended - last_ended_) / 2);
  }
  wait = std::clamp(wait, min_ms_, max_ms_);
  last_ms_ = now_ms;
  last_ended_ = ended;
  last_wait_ = wait;
  return wait;
}

int FollowExperiment(ApiClient& api, int64_t experiment_id, const FollowOptions& o) {
  auto exp = FetchExperiment(api, std::to_string(experiment_id));
  if (!exp.ok()) return ReportError(exp.status());
  bool human = !o.json && !o.quiet;
  // Shown to a person: the runs from the start. Otherwise only their counts until the end.
  std::vector<Run> first;
  if (human) {
    auto runs = FetchRuns(api, experiment_id);
    if (!runs.ok()) return ReportError(runs.status());
    first = std::move(*runs);
  }

  CatchInterruptsForFollow();

  RealClock clock;
  std::string metric =
      exp->spec.contains("objective") ? exp->spec["objective"].value("metric", "") : "";
  bool live = human && ::isatty(STDOUT_FILENO) && std::getenv("TERM") != nullptr &&
              std::string(std::getenv("TERM")) != "dumb";
  ProgressView view(stdout, live, clock, exp->name, first, VaryingParams(first), metric);
  std::map<int64_t, Run> last;
  for (const Run& r : first) last[r.id] = r;
  // Each run fetched, compared with what was shown, and its change shown.
  auto show = [&]() -> Status {
    DROVER_ASSIGN_OR_RETURN(auto now, FetchRuns(api, experiment_id));
    for (const Run& r : now) {
      const Run& before = last[r.id];
      if (human && (before.state != r.state || before.attempts != r.attempts)) {
        // A new attempt after the first (a CUDA OOM's halving, a retry): the one before says why.
        const bool again = r.attempts > before.attempts && r.attempts > 1;
        std::optional<Attempt> attempt, previous;
        if (r.state == RunState::kRunning || (again && !IsFinal(r.state))) {
          auto a = api.Get(fmt::format("/runs/{}/attempts", r.id));
          if (a.ok()) {
            const Json& list = a->contains("attempts") ? (*a)["attempts"] : *a;
            std::vector<Attempt> attempts;
            for (const Json& x : list) {
              if (auto parsed = protocol::AttemptFromJson(x); parsed.ok()) attempts.push_back(*parsed);
            }
            // Running: the last is this attempt and the one before it ended; retrying: the last
            // is the one that ended.
            if (r.state == RunState::kRunning && !attempts.empty()) {
              attempt = attempts.back();
              attempts.pop_back();
            }
            if (again && !attempts.empty() && attempts.back().ended) previous = attempts.back();
          }
        }
        // The reason, unless it only says the state again ("succeeded", "cancelled").
        const bool says_more = IsFinal(r.state) && r.reason != ToString(r.state);
        const std::string note = says_more ? r.reason : previous ? RetryNote(r, *previous) : "";
        view.OnRunChanged(r, attempt ? &*attempt : nullptr, note);
      } else if (human && before.final_metrics != r.final_metrics && !r.final_metrics.empty()) {
        MetricPoint p;
        p.run_id = r.id;
        p.name = r.final_metrics.begin().key();
        view.OnMetrics(r, {p});
      }
      last[r.id] = r;
    }
    return Status::Ok();
  };
  using Steady = std::chrono::steady_clock;
  auto ms_since = [](Steady::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0).count();
  };
  const Steady::time_point start = Steady::now();
  Millis shown_ms = 0;  // since start, when the runs were last fetched and shown
  FollowPace pace;
  bool cancel_sent = false;
  bool detached = false;
  // The daemon stopped answering midway (stopped, drained, killed): the experiment is not over
  // and nothing of it is lost, so the user is told where it stands and how to go on.
  auto lost = [&](const Status& st) {
    if (st.code() != Code::kUnavailable) return ReportError(st);
    return ReportError(Unavailable(fmt::format(
        "the daemon stopped answering while experiment {} ({}) was being followed ({}). Its runs "
        "are left for the next daemon on this store: those running go on and are taken over, "
        "queued ones wait. {}see where it stands with drover ls -e {}",
        experiment_id, exp->name, st.message(),
        o.again.empty() ? "" : "Follow it again with " + o.again + "; ", experiment_id)));
  };
  while (true) {
    if (g_interrupts.load() > 0) {
      if (!o.cancel_on_exit) {
        detached = true;
        break;
      }
      if (!cancel_sent) {
        cancel_sent = true;
        auto c = api.Post(fmt::format("/experiments/{}/cancel", experiment_id), Json::object());
        if (!c.ok() && c.status().code() != Code::kFailedPrecondition) return lost(c.status());
      }
    }
    auto counts = FetchExperimentCounts(api, experiment_id);
    if (!counts.ok()) return lost(counts.status());
    const int64_t left = counts->runs.Unfinished();
    // Every run final is not the end of a search: its next trial is proposed after the one
    // before it ends. The daemon says done once it has nothing more to make.
    const bool all_final = left == 0 && counts->experiment.status == ExperimentStatus::kDone;
    const Millis now_ms = ms_since(start);
    if (all_final || (human && now_ms - shown_ms >= kShowEveryMs)) {
      // At the end, every run as it ended (for the results, and each change shown).
      if (Status st = show(); !st.ok()) return lost(st);
      shown_ms = now_ms;
    }
    if (human) view.OnTick();
    if (all_final) break;
    Millis wait = pace.Next(now_ms, counts->runs.Total() - left, left);
    // Shown to a person: their next refresh is due at kShowEveryMs at the latest.
    if (human) wait = std::min(wait, std::max<Millis>(1, kShowEveryMs - (now_ms - shown_ms)));
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
  }
  if (human) view.Finish();
  if (detached) {
    std::fprintf(
        stderr,
        "drover: detached; experiment %lld keeps running in the daemon (drover ls -e %lld, "
        "drover cancel --experiment %lld)\n",
        static_cast<long long>(experiment_id), static_cast<long long>(experiment_id),
        static_cast<long long>(experiment_id));
    return kExitInterrupted;
  }
  std::vector<Run> final_runs;
  for (auto& [id, r] : last) final_runs.push_back(r);
  int code = PrintResults(*CatalogOf(api.info()), *exp, final_runs, o.json, o.quiet);
  PrintStopped(*CatalogOf(api.info()), *exp, final_runs);
  if (o.ended_runs != nullptr) *o.ended_runs = std::move(final_runs);
  return cancel_sent ? kExitInterrupted : code;
}

}  // namespace drover::cli
