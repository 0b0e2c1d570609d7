// The integration matrix (issue 40; docs/architecture.md, "The integration matrix"): every way in
// (plain `drover run`, `drover run --foreground`, `drover submit` to `drover serve`, MCP `submit`,
// the web form's submit) x every executor (this machine, podman, Slurm) x every workload (a
// sweep, a search with pruning, a pipeline with a cached stage, a retry after a fix, a retry on
// the fixed code and a resume after Ctrl-C). Each cell checks the same records: the runs' states, their attempts, their
// metrics and where each attempt ran. One test per executor, each with one daemon that the four
// daemon ways share and one store for the foreground; the ways of a workload go at once.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "store/store.h"
#include "testutil/cli_fixture.h"
#include "testutil/cli_runner.h"
#include "testutil/mcp_stdio.h"
#include "testutil/slurm.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::ReadFile;

enum class Way { kRun, kForeground, kSubmit, kMcp, kWeb };
enum class Exec { kLocal, kPodman, kSlurm };
constexpr Way kWays[] = {Way::kRun, Way::kForeground, Way::kSubmit, Way::kMcp, Way::kWeb};

const char* Name(Way w) {
  switch (w) {
    case Way::kRun: return "run";
    case Way::kForeground: return "foreground";
    case Way::kSubmit: return "submit";
    case Way::kMcp: return "mcp";
    case Way::kWeb: return "web";
  }
  return "?";
}

class Matrix : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    fg_store_ = (dir_ / "fg-store").string();
    code_ = (dir_ / "code").string();
    marks_ = (dir_ / "marks").string();
    fs::create_directories(marks_);
    // Metric lines and where the attempt ran (its host name: a container's is drover-run-N).
    Write("code/emit.sh",
          "echo \"host=$(hostname)\"\n"
          "steps=${2:-1}; s=1\n"
          "while [ $s -le $steps ]; do\n"
          "  echo \"{\\\"step\\\": $s, \\\"loss\\\": $1}\"\n"
          "  s=$((s+1)); [ $s -le $steps ] && sleep 1\n"
          "done\n"
          "exit 0\n");
    Write("code/prep.sh", "echo \"host=$(hostname)\"; mkdir -p data && echo prepared > data/d.txt\n");
    Write("code/train.sh",
          "echo \"host=$(hostname)\"; test -f data/d.txt || exit 4\n"
          "echo \"{\\\"step\\\": 1, \\\"loss\\\": $1}\"\n");
    // Fails until its mark exists (the "fix"), then reports a loss.
    Write("code/flaky.sh",
          "echo \"host=$(hostname)\"\n"
          "if [ -f \"$1\" ]; then echo '{\"step\": 1, \"loss\": 0.5}'; exit 0; fi\n"
          "echo 'RuntimeError: not fixed yet' >&2; exit 3\n");
    // Waits (to be interrupted) until its mark exists.
    Write("code/slow.sh",
          "echo \"host=$(hostname)\"\n"
          "if [ -f \"$1\" ]; then echo '{\"step\": 1, \"loss\": 0.25}'; exit 0; fi\n"
          "sleep 120\n");
    for (Way w : kWays) {
      fs::create_directories(ProjectOf(w));
      for (const char* f : {"emit.sh", "prep.sh", "train.sh", "flaky.sh", "slow.sh"}) {
        fs::copy_file(code_ + "/" + f, ProjectOf(w) + "/" + f);
      }
    }
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    hostname_ = host;
    ::unsetenv("DROVER_FOREGROUND");
  }
  void TearDown() override {
    for (pid_t p : background_) {
      ::kill(p, SIGKILL);
      testing::WaitExit(p);
    }
    testing::StopDaemonOf(store_);
    ::setenv("DROVER_FOREGROUND", "1", 1);
    CliFixture::TearDown();
  }

  // What every spec of this executor carries.
  std::string ExecutorLines() const {
    switch (exec_) {
      case Exec::kLocal: return "";
      case Exec::kPodman:
        return "container: {image: localhost/drover-bb:test, mounts: [\"" + marks_ + ":" + marks_ +
               "\"]}\n";
      case Exec::kSlurm: return "executor: {kind: slurm}\n";
    }
    return "";
  }
  std::string SpecText(const std::string& body, Way w, const std::string& workload) const {
    return "name: " + workload + "-" + Name(w) + "\nworkdir: .\nresources: {gpus: 0}\n" +
           ExecutorLines() + body;
  }
  // Each way has its own project folder (as each user or agent has), with the scripts in it.
  std::string ProjectOf(Way w) const { return code_ + "/" + Name(w); }
  std::string SpecPath(Way w, const std::string& workload) const {
    return ProjectOf(w) + "/" + workload + ".yaml";
  }
  void WriteSpec(Way w, const std::string& workload, const std::string& text) {
    std::ofstream(SpecPath(w, workload)) << text;
  }
  const std::string& StoreOf(Way w) const { return w == Way::kForeground ? fg_store_ : store_; }

  void StartDaemon() {
    std::vector<std::string> extra = {"--gpu-leases", "off", "--fake-gpus", "2x16GiB"};
    if (exec_ == Exec::kSlurm) extra.insert(extra.end(), {"--executor", "slurm"});
    pid_t pid = testing::StartDaemon(store_, dir_.string(), extra);
    Json info = Json::parse(ReadFile(store_ + "/daemon.json"), nullptr, false);
    ASSERT_TRUE(info.is_object() && info.value("pid", 0) == pid)
        << ReadFile((dir_ / "serve.err").string());
    port_ = info["port"].get<int>();
    token_ = ReadFile(store_ + "/token");
    while (!token_.empty() && (token_.back() == '\n' || token_.back() == ' ')) token_.pop_back();
  }

  // --- ways in. Each submits the spec file of (way, workload); the experiment id, or 0.
  // Plain `drover run` and `--foreground` follow their experiment in the background (started
  // here, waited for by Settle); the others return once it is queued.
  void Start(Way w, const std::string& workload, std::vector<std::string> more = {}) {
    const std::string spec = SpecPath(w, workload);
    switch (w) {
      case Way::kRun:
      case Way::kForeground: {
        std::vector<std::string> args = {"--store", StoreOf(w), "run", fs::path(spec).filename()};
        if (w == Way::kForeground) {
          args.insert(args.end(), {"--foreground", "--fake-gpus", "2x16GiB", "--gpu-leases", "off"});
        }
        args.insert(args.end(), more.begin(), more.end());
        const std::string base = (dir_ / (workload + "-" + Name(w))).string();
        pid_t pid = testing::SpawnDrover(args, base + ".out", base + ".err", ProjectOf(w));
        following_[w] = pid;
        background_.push_back(pid);
        return;
      }
      case Way::kSubmit: {
        auto r = testing::RunDrover({"--store", store_, "submit", fs::path(spec).filename()}, ProjectOf(w));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        return;
      }
      case Way::kMcp: {
        auto r = testing::RunDroverWithInput(
            {"--store", store_, "mcp"},
            testing::McpStdin({{"submit", {{"spec_yaml", ReadFile(spec)}, {"base_dir", ProjectOf(w)}}}}),
            code_);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        ASSERT_NE(r.out.find("\"experiment_id\""), std::string::npos) << r.out;
        return;
      }
      case Way::kWeb: {
        Json body = {{"spec_yaml", ReadFile(spec)}, {"spec_name", "web.yaml"}, {"base_dir", ProjectOf(w)}};
        auto res = WebPost("/api/v1/experiments", body);
        ASSERT_EQ(res.first, 201) << res.second;
        return;
      }
    }
  }
  // The web UI's way: signed in with the token (a session cookie), the page's CSRF token on
  // every change, from the daemon's own origin.
  std::pair<int, std::string> WebPost(const std::string& path, const Json& body) {
    httplib::Client c("127.0.0.1", port_);
    const std::string origin = "http://127.0.0.1:" + std::to_string(port_);
    if (cookie_.empty()) {
      auto login = c.Post("/login", {{"Origin", origin}}, "token=" + token_,
                          "application/x-www-form-urlencoded");
      if (!login || login->status != 303) return {login ? login->status : -1, "sign-in"};
      std::string set = login->get_header_value("Set-Cookie");
      cookie_ = set.substr(0, set.find(';'));
      auto session = c.Get("/api/v1/session", {{"Cookie", cookie_}});
      if (!session) return {-1, "session"};
      csrf_ = Json::parse(session->body).value("csrf", "");
    }
    auto res = c.Post(path, {{"Cookie", cookie_}, {"X-Drover-Csrf", csrf_}, {"Origin", origin}},
                      body.dump(), "application/json");
    return res ? std::make_pair(res->status, res->body) : std::make_pair(-1, std::string("none"));
  }
  // Retry the failed and/or cancelled runs of the way's experiment, through the same way.
  // `current`: on the workdir as it is now (drover retry --code current), not the submitted code.
  void Retry(Way w, const std::string& workload, bool cancelled, bool failed = false,
             bool current = false) {
    const int64_t id = ExperimentId(w, workload);
    ASSERT_GT(id, 0);
    failed = failed || !cancelled;
    switch (w) {
      case Way::kRun:
      case Way::kForeground:
      case Way::kSubmit: {
        std::vector<std::string> args = {"--store", StoreOf(w), "retry", std::to_string(id)};
        if (failed) args.push_back("--failed");
        if (cancelled) args.push_back("--cancelled");
        if (current) args.insert(args.end(), {"--code", "current"});
        if (w == Way::kForeground) {
          args.insert(args.end(), {"--fake-gpus", "2x16GiB", "--gpu-leases", "off"});
        } else {
          args.push_back("--detach");
        }
        auto r = testing::RunDrover(args, code_);
        ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
        return;
      }
      case Way::kMcp: {
        Json args = {{"experiment", std::to_string(id)}};
        if (failed) args["failed"] = true;
        if (cancelled) args["cancelled"] = true;
        if (current) args["code"] = "current";
        auto r = testing::RunDroverWithInput({"--store", store_, "mcp"},
                                             testing::McpStdin({{"retry", args}}), code_);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        ASSERT_NE(r.out.find("\"run_ids\""), std::string::npos) << r.out;
        return;
      }
      case Way::kWeb: {
        Json body = Json::object();
        if (failed) body["failed"] = true;
        if (cancelled) body["cancelled"] = true;
        if (current) body["code"] = "current";
        auto res = WebPost("/api/v1/experiments/" + std::to_string(id) + "/retry", body);
        ASSERT_EQ(res.first, 200) << res.second;
        return;
      }
    }
  }
  // Cancel the way's experiment where no Ctrl-C reaches it (it was queued, not followed).
  void Cancel(Way w, const std::string& workload) {
    const int64_t id = ExperimentId(w, workload);
    ASSERT_GT(id, 0);
    if (w == Way::kMcp) {
      auto r = testing::RunDroverWithInput(
          {"--store", store_, "mcp"},
          testing::McpStdin({{"cancel", {{"experiment", std::to_string(id)}}}}), code_);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    } else if (w == Way::kWeb) {
      auto res = WebPost("/api/v1/experiments/" + std::to_string(id) + "/cancel", Json::object());
      ASSERT_EQ(res.first, 200) << res.second;
    } else {
      auto r = testing::RunDrover({"--store", store_, "cancel", "-e", std::to_string(id)}, code_);
      ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    }
  }

  // --- records
  std::unique_ptr<Store> Open(Way w) {
    auto s = Store::Open(StoreOf(w) + "/drover.db");
    return s.ok() ? std::move(*s) : nullptr;
  }
  // The newest experiment of the way's workload (its name), or 0.
  int64_t ExperimentId(Way w, const std::string& workload, int nth_newest = 0) {
    auto store = Open(w);
    if (!store) return 0;
    auto exps = store->ListExperiments();
    if (!exps.ok()) return 0;
    const std::string name = workload + "-" + Name(w);
    for (const Experiment& e : *exps) {  // newest first
      if (e.name == name && nth_newest-- == 0) return e.id;
    }
    return 0;
  }
  std::vector<drover::Run> RunsOf(Way w, int64_t experiment) {
    auto store = Open(w);
    RunFilter f;
    f.experiment_id = experiment;
    return store ? store->ListRuns(f).value() : std::vector<drover::Run>{};
  }
  // The way's name and, for a follower, what it printed (which says why it exited as it did).
  std::string Said(Way w, const std::string& workload) const {
    std::string out = Name(w);
    if (w == Way::kRun || w == Way::kForeground) {
      const std::string base = (dir_ / (workload + "-" + Name(w))).string();
      out += "\nstdout:\n" + ReadFile(base + ".out") + "stderr:\n" + ReadFile(base + ".err");
    }
    return out;
  }
  // Waits until the followers have exited and every way's newest experiment of `workload` has
  // `runs` runs, all final. The followers' exit codes, by way.
  std::map<Way, int> Settle(const std::string& workload, size_t runs, int seconds = 180) {
    std::map<Way, int> codes;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    for (auto& [w, pid] : following_) {
      for (;;) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
          codes[w] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          std::erase(background_, pid);
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          ADD_FAILURE() << Name(w) << ": drover run did not end";
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    following_.clear();
    for (Way w : kWays) {
      for (;;) {
        const int64_t id = ExperimentId(w, workload);
        auto rs = id > 0 ? RunsOf(w, id) : std::vector<drover::Run>{};
        if (rs.size() == runs && std::all_of(rs.begin(), rs.end(), [](const drover::Run& r) {
              return IsFinal(r.state);
            })) {
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          ADD_FAILURE() << Name(w) << " " << workload << ": " << rs.size() << " runs, not all final";
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    return codes;
  }
  // The same checks in every cell: the state, the attempts, the loss stored, and where each
  // attempt that ran ran (the executor's record, the host the run saw).
  void CheckRun(Way w, const drover::Run& r, RunState state, int attempts) {
    SCOPED_TRACE(std::string(Name(w)) + " run " + std::to_string(r.id) + " (" + r.stage + ")");
    EXPECT_EQ(r.state, state) << r.reason;
    EXPECT_EQ(r.attempts, attempts) << r.reason;
    if (state == RunState::kSucceeded || state == RunState::kPruned) {
      EXPECT_TRUE(r.final_metrics.contains("loss") || r.stage == "prep") << r.final_metrics.dump();
    }
    auto store = Open(w);
    ASSERT_TRUE(store);
    const std::vector<Attempt> made = store->ListAttempts(r.id).value();
    for (const Attempt& a : made) {
      const std::string out = ReadFile(a.stdout_path);
      switch (exec_) {
        case Exec::kLocal:
          EXPECT_TRUE(a.executor.empty() || a.executor.value("kind", "") == "local")
              << a.executor.dump();
          EXPECT_NE(out.find("host=" + hostname_), std::string::npos) << a.stdout_path << ": " << out;
          break;
        case Exec::kPodman:
          EXPECT_NE(out.find("host=drover-run-" + std::to_string(r.id)), std::string::npos)
              << a.stdout_path << ": " << out;
          break;
        case Exec::kSlurm:
          EXPECT_EQ(a.executor.value("kind", ""), "slurm") << a.executor.dump();
          EXPECT_GT(a.executor.value("job_id", int64_t{0}), 0) << a.executor.dump();
          break;
      }
    }
  }

  // Every run of each way's newest experiment of `workload` succeeded, with `attempts` each.
  void CheckEverySucceeded(const std::string& workload, int attempts) {
    for (Way w : kWays) {
      for (const drover::Run& r : RunsOf(w, ExperimentId(w, workload))) {
        CheckRun(w, r, RunState::kSucceeded, attempts);
      }
    }
  }

  void RunMatrix() {
    StartDaemon();
    if (HasFailure()) return;
    Sweep();
    Search();
    Pipeline();
    RetryAfterAFix();
    RetryOnTheFixedCode();
    ResumeAfterCtrlC();
  }

  void Sweep() {
    SCOPED_TRACE("a sweep");
    for (Way w : kWays) {
      WriteSpec(w, "sweep", SpecText("command: /bin/sh emit.sh 0.{i} 1 " + std::string(Name(w)) +
                                         "\nparams: {i: [1, 2]}\n",
                                     w, "sweep"));
      Start(w, "sweep");
    }
    for (auto [w, code] : Settle("sweep", 2)) EXPECT_EQ(code, 0) << Said(w, "sweep");
    CheckEverySucceeded("sweep", 1);
  }

  void Search() {
    SCOPED_TRACE("a search with pruning");
    // Three trials one after another, each reporting its loss at steps 1 and 2 (a second
    // apart): ASHA keeps the best half at step 1, so a trial worse than the first is stopped.
    // The seed fixes the proposals, so a later trial is worse than an earlier one at step 1 and
    // is pruned (checked below: at least one pruned in every way).
    for (Way w : kWays) {
      WriteSpec(w, "search", SpecText("command: /bin/sh emit.sh {x} 2\nparams: {x: {uniform: [0.0, 1.0]}}\n"
                     "search: {sampler: random, trials: 3, parallel: 1, seed: 4}\n"
                     "prune: {rule: asha, min_steps: 1, reduction: 2}\n"
                     "objective: {metric: loss, mode: min}\n",
                     w, "search"));
      Start(w, "search");
    }
    for (auto [w, code] : Settle("search", 3)) EXPECT_EQ(code, 0) << Said(w, "search");
    for (Way w : kWays) {
      auto runs = RunsOf(w, ExperimentId(w, "search"));
      ASSERT_EQ(runs.size(), 3u) << Name(w);
      int pruned = 0;
      for (const drover::Run& r : runs) {
        pruned += r.state == RunState::kPruned;
        CheckRun(w, r, r.state == RunState::kPruned ? RunState::kPruned : RunState::kSucceeded, 1);
        // How each trial was proposed is recorded whichever way it came in (the first with the
        // submit, the rest by the search driver): the random sampler's.
        EXPECT_EQ(r.origin, TrialOrigin::kRandom) << Name(w) << ": run " << r.id;
      }
      EXPECT_GE(pruned, 1) << Name(w) << ": no trial was stopped early";
    }
  }

  void Pipeline() {
    SCOPED_TRACE("a pipeline with a cached stage");
    const std::string body =
        "params: {lr: [0.1]}\nstages:\n"
        "  prep:  {command: \"/bin/sh prep.sh WAY\", outputs: [data/]}\n"
        "  train: {command: \"/bin/sh train.sh {lr} WAY\", needs: [prep]}\n";
    auto of = [](std::string text, Way w) {
      for (size_t at; (at = text.find("WAY")) != std::string::npos;) text.replace(at, 3, Name(w));
      return text;
    };
    for (Way w : kWays) {
      WriteSpec(w, "pipe", SpecText(of(body, w), w, "pipe"));
      Start(w, "pipe");
    }
    for (auto [w, code] : Settle("pipe", 2)) EXPECT_EQ(code, 0) << Said(w, "pipe");
    // One value edited in the spec file in the project folder: prep is cached, train runs.
    std::string edited = body;
    edited.replace(edited.find("0.1]"), 4, "0.2]");
    for (Way w : kWays) {
      WriteSpec(w, "pipe", SpecText(of(edited, w), w, "pipe"));
      Start(w, "pipe");
    }
    for (auto [w, code] : Settle("pipe", 2)) EXPECT_EQ(code, 0) << Said(w, "pipe");
    for (Way w : kWays) {
      ASSERT_GT(ExperimentId(w, "pipe", 1), 0) << Name(w) << ": the second submit made no experiment";
      for (const drover::Run& r : RunsOf(w, ExperimentId(w, "pipe"))) {
        if (r.stage == "prep") {
          EXPECT_NE(r.cached_from, 0) << Name(w) << ": prep ran again";
          EXPECT_EQ(r.state, RunState::kSucceeded) << Name(w);
        } else {
          EXPECT_EQ(r.cached_from, 0) << Name(w);
          CheckRun(w, r, RunState::kSucceeded, 1);
          EXPECT_DOUBLE_EQ(r.final_metrics.value("loss", 0.0), 0.2) << Name(w);
        }
      }
    }
  }

  void RetryAfterAFix() {
    SCOPED_TRACE("a retry after a fix");
    // Four runs one at a time, failing the same way until the fix: the first three fail and fail
    // fast cancels the fourth (engine/fail_fast.h); after the fix, the failed ones and the
    // cancelled one are retried and succeed.
    for (Way w : kWays) {
      WriteSpec(w, "retry", SpecText("command: /bin/sh flaky.sh " + marks_ + "/retry-" + Name(w) +
                                         " {i}\nparams: {i: [1, 2, 3, 4]}\nmax_parallel: 1\n",
                                     w, "retry"));
      Start(w, "retry");
    }
    for (auto [w, code] : Settle("retry", 4)) EXPECT_NE(code, 0) << Said(w, "retry");
    for (Way w : kWays) {
      auto runs = RunsOf(w, ExperimentId(w, "retry"));
      ASSERT_EQ(runs.size(), 4u);
      for (const drover::Run& r : runs) {
        EXPECT_EQ(r.state, r.id == runs.back().id ? RunState::kCancelled : RunState::kFailed)
            << Name(w) << " run " << r.id;
      }
      std::ofstream(marks_ + "/retry-" + Name(w)) << "fixed\n";
      Retry(w, "retry", /*cancelled=*/true, /*failed=*/true);
    }
    Settle("retry", 4);
    for (Way w : kWays) {
      auto runs = RunsOf(w, ExperimentId(w, "retry"));
      for (const drover::Run& r : runs) {
        CheckRun(w, r, RunState::kSucceeded, r.id == runs.back().id ? 1 : 2);
      }
    }
  }

  // The fix is in the code this time (a file the script looks for in its working copy): a retry
  // as submitted would fail again; with the current code (a new snapshot) both runs succeed as
  // their second attempt, every way in, on every executor.
  void RetryOnTheFixedCode() {
    SCOPED_TRACE("a retry on the fixed code");
    for (Way w : kWays) {
      WriteSpec(w, "codefix", SpecText("command: /bin/sh flaky.sh fixed-" + std::string(Name(w)) +
                                           " {i}\nparams: {i: [1, 2]}\nmax_parallel: 1\n",
                                       w, "codefix"));
      Start(w, "codefix");
    }
    for (auto [w, code] : Settle("codefix", 2)) EXPECT_NE(code, 0) << Said(w, "codefix");
    for (Way w : kWays) {
      for (const drover::Run& r : RunsOf(w, ExperimentId(w, "codefix"))) {
        EXPECT_EQ(r.state, RunState::kFailed) << Name(w) << " run " << r.id;
      }
      std::ofstream(ProjectOf(w) + "/fixed-" + Name(w)) << "fixed\n";
      Retry(w, "codefix", /*cancelled=*/false, /*failed=*/true, /*current=*/true);
    }
    Settle("codefix", 2);
    for (Way w : kWays) {
      for (const drover::Run& r : RunsOf(w, ExperimentId(w, "codefix"))) {
        CheckRun(w, r, RunState::kSucceeded, 2);
        EXPECT_FALSE(r.snapshot_hash.empty()) << Name(w) << " run " << r.id;
        EXPECT_EQ(r.snapshot_from, 2) << Name(w) << " run " << r.id;
      }
    }
  }

  void ResumeAfterCtrlC() {
    SCOPED_TRACE("a resume after Ctrl-C");
    for (Way w : kWays) {
      WriteSpec(w, "resume", SpecText("command: /bin/sh slow.sh " + marks_ + "/resume-" + Name(w) + "\n", w,
                     "resume"));
      Start(w, "resume");
    }
    // Once each run runs: Ctrl-C to the commands that follow, a cancel for the others.
    for (Way w : kWays) {
      for (int i = 0; i < 1200; ++i) {
        const int64_t id = ExperimentId(w, "resume");
        auto rs = id > 0 ? RunsOf(w, id) : std::vector<drover::Run>{};
        // Running, and started far enough to say where (a container's client starts first).
        if (!rs.empty() && rs[0].state == RunState::kRunning) {
          auto store = Open(w);
          auto made = store ? store->ListAttempts(rs[0].id).value() : std::vector<Attempt>{};
          if (!made.empty() && ReadFile(made.back().stdout_path).find("host=") != std::string::npos) {
            break;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (following_.count(w)) {
        ::kill(following_[w], SIGINT);
      } else {
        Cancel(w, "resume");
      }
    }
    for (auto [w, code] : Settle("resume", 1)) EXPECT_EQ(code, 130) << Said(w, "resume");
    for (Way w : kWays) {
      auto runs = RunsOf(w, ExperimentId(w, "resume"));
      ASSERT_EQ(runs.size(), 1u);
      EXPECT_EQ(runs[0].state, RunState::kCancelled) << Name(w);
      std::ofstream(marks_ + "/resume-" + Name(w)) << "go\n";
      if (w == Way::kRun || w == Way::kForeground) {
        Start(w, "resume", {"--resume"});
      } else {
        Retry(w, "resume", /*cancelled=*/true);
      }
    }
    for (auto [w, code] : Settle("resume", 1)) EXPECT_EQ(code, 0) << Said(w, "resume");
    for (Way w : kWays) {
      EXPECT_EQ(ExperimentId(w, "resume", 1), 0) << Name(w) << ": resume made a new experiment";
    }
    CheckEverySucceeded("resume", 2);
  }

  Exec exec_ = Exec::kLocal;
  std::string fg_store_, code_, marks_, hostname_;
  int port_ = 0;
  std::string token_, cookie_, csrf_;
  std::map<Way, pid_t> following_;
  std::vector<pid_t> background_;
};

TEST_F(Matrix, ThisMachine) {
  exec_ = Exec::kLocal;
  RunMatrix();
}

TEST_F(Matrix, Podman) {
  auto images = RunAndCapture({"podman", "image", "exists", "localhost/drover-bb:test"},
                              {.timeout_ms = 30'000});
  if (!images.ok() || images->exit_code != 0) {
    GTEST_SKIP() << "podman or its test image localhost/drover-bb:test is not here "
                    "(scripts/podman-local.sh install && scripts/podman-local.sh images)";
  }
  exec_ = Exec::kPodman;
  RunMatrix();
}

TEST_F(Matrix, Slurm) {
  if (!testing::SlurmAnswers()) GTEST_SKIP() << testing::kNoSlurm;
  exec_ = Exec::kSlurm;
  RunMatrix();
}

}  // namespace
}  // namespace drover
