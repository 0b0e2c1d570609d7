#pragma once
// For the server's tests: a fake engine, a store in a temp folder filled through the Store API,
// and a real HttpServer on a free loopback port with a real httplib::Client.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "server/server.h"
#include "store/store.h"

namespace drover::server::testing {

namespace fs = std::filesystem;

class FakeEngineControl : public EngineControl {
 public:
  Result<protocol::SubmitResponse> Submit(const protocol::SubmitRequest& request,
                                          const Caller& submitter) override {
    std::lock_guard<std::mutex> l(mu_);
    submits.push_back(request);
    submitters.push_back(submitter.user);
    if (!submit_error.ok()) return submit_error;
    return submit_reply;
  }
  Result<protocol::SubmitResponse> SubmitSpec(const Spec& spec,
                                              const Caller& submitter) override {
    std::lock_guard<std::mutex> l(mu_);
    submitted_specs.push_back(spec);
    submitters.push_back(submitter.user);
    if (!submit_error.ok()) return submit_error;
    return submit_reply;
  }
  Result<std::vector<std::string>> VerifyCode(const Snapshot& snapshot,
                                              const UnixUser&) override {
    std::lock_guard<std::mutex> l(mu_);
    verified_snapshots.push_back(snapshot.hash);
    return changed_code;
  }
  Result<std::vector<std::string>> VerifyOutputs(const RunArtifacts&) override {
    return std::vector<std::string>{};
  }
  Result<std::string> ExportRun(Store&, int64_t, bool, const UnixUser&) override {
    return Unavailable("the fake engine exports nothing");
  }
  Status CancelRun(int64_t run_id) override {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_runs.push_back(run_id);
    return cancel_error;
  }
  Status CancelExperiment(int64_t experiment_id) override {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_experiments.push_back(experiment_id);
    return cancel_error;
  }
  Status SetPriority(int64_t run_id, int priority) override {
    std::lock_guard<std::mutex> l(mu_);
    priorities.emplace_back(run_id, priority);
    return Status::Ok();
  }
  Result<std::vector<int64_t>> Retry(int64_t experiment_id,
                                     const protocol::RetryRequest& which) override {
    std::lock_guard<std::mutex> l(mu_);
    retried.emplace_back(experiment_id, which);
    return which.runs;
  }
  Status CheckSubmit(const protocol::SubmitRequest& request, const Caller&) override {
    std::lock_guard<std::mutex> l(mu_);
    checked.push_back(request);
    return check_error;
  }
  Result<Cleanup> RemoveExperiments(const std::vector<int64_t>& ids, bool dry_run) override {
    std::lock_guard<std::mutex> l(mu_);
    removed.emplace_back(ids, dry_run);
    Cleanup c;
    c.experiments = ids;
    c.applied = !dry_run;
    return c;
  }
  Result<Cleanup> CollectGarbage(const protocol::GcRequest& request) override {
    std::lock_guard<std::mutex> l(mu_);
    collected.push_back(request);
    Cleanup c;
    c.files.push_back({"/store/runs/1", "working copy", 10});
    c.applied = !request.dry_run;
    return c;
  }
  Result<std::vector<Json>> Suggest(int64_t experiment_id, int count) override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<Json> out;
    for (int i = 0; i < count; ++i) out.push_back({{"lr", 0.1 * (i + 1)}});
    return out;
  }
  Status Tell(int64_t experiment_id, const protocol::TellRequest& tell) override {
    std::lock_guard<std::mutex> l(mu_);
    told.emplace_back(experiment_id, tell);
    return Status::Ok();
  }
  Result<int64_t> AddTrial(int64_t experiment_id, const Json& params) override {
    std::lock_guard<std::mutex> l(mu_);
    added.emplace_back(experiment_id, params);
    return 77;
  }
  std::vector<std::pair<int64_t, protocol::TellRequest>> told;
  std::vector<std::pair<int64_t, Json>> added;
  std::vector<protocol::GpuStatus> Gpus() override {
    std::lock_guard<std::mutex> l(mu_);
    if (throw_in_gpus) throw std::runtime_error("boom");
    return gpus;
  }
  std::vector<StreamEvent> WaitEvents(int64_t after_seq, int64_t timeout_ms) override {
    std::unique_lock<std::mutex> l(mu_);
    ++wait_calls;
    waits_cv_.notify_all();
    cv_.wait_for(l, std::chrono::milliseconds(timeout_ms),
                 [&] { return !events_.empty() && events_.back().seq > after_seq; });
    std::vector<StreamEvent> out;
    for (const auto& e : events_) {
      if (e.seq > after_seq) out.push_back(e);
    }
    return out;
  }
  int64_t LastEventSeq() override {
    std::lock_guard<std::mutex> l(mu_);
    return last_seq_;
  }

  // Adds an event (seq = last + 1) and wakes the waiters.
  int64_t Push(const std::string& kind, const Json& data) {
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back({++last_seq_, kind, data});
    cv_.notify_all();
    return last_seq_;
  }
  // Forgets events up to and including `seq`, as a full ring buffer would.
  void Forget(int64_t seq) {
    std::lock_guard<std::mutex> l(mu_);
    while (!events_.empty() && events_.front().seq <= seq) events_.pop_front();
  }
  // Waits until WaitEvents has been called `n` times in all (a stream is listening).
  bool WaitForWaitCalls(int n) {
    std::unique_lock<std::mutex> l(mu_);
    return waits_cv_.wait_for(l, std::chrono::seconds(10), [&] { return wait_calls >= n; });
  }

  template <typename F>
  auto Locked(F f) {
    std::lock_guard<std::mutex> l(mu_);
    return f();
  }

  // What the server asked (read through Locked()).
  std::vector<UnixUser> submitters;
  std::vector<protocol::SubmitRequest> submits;
  std::vector<Spec> submitted_specs;
  std::vector<std::string> verified_snapshots;
  std::vector<std::string> changed_code;  // what VerifyCode answers
  std::vector<int64_t> cancelled_runs;
  std::vector<int64_t> cancelled_experiments;
  std::vector<std::pair<int64_t, int>> priorities;
  std::vector<std::pair<int64_t, protocol::RetryRequest>> retried;
  std::vector<std::pair<std::vector<int64_t>, bool>> removed;
  std::vector<protocol::GcRequest> collected;
  std::vector<protocol::SubmitRequest> checked;
  Status check_error;
  int wait_calls = 0;
  // What it answers (set before the server runs).
  protocol::SubmitResponse submit_reply;
  Status submit_error;
  Status cancel_error;
  std::vector<protocol::GpuStatus> gpus;
  bool throw_in_gpus = false;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable waits_cv_;
  std::deque<StreamEvent> events_;
  int64_t last_seq_ = 0;
};

// A reply, its body parsed as JSON (null when it is not JSON).
struct Reply {
  int status = 0;
  Json body;
  std::string raw;
  httplib::Headers headers;
};

inline constexpr const char* kToken = "test-token-0123456789abcdef";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "drover-server-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto s = Store::Open(StorePath());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }

  void TearDown() override {
    StopServer();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string StorePath() const { return (dir_ / "drover.db").string(); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Starts the server (after the store is filled, though it reads live data either way).
  void StartServer(ServerOptions o = {}) {
    o.store_path = StorePath();
    o.port = 0;
    if (o.token.empty()) o.token = kToken;
    server_ = std::make_unique<HttpServer>(o, engine_, clock_);
    Status st = server_->Bind();
    ASSERT_TRUE(st.ok()) << st.ToString();
    thread_ = std::thread([this] { server_->Run(); });
  }

  void StopServer() {
    if (!server_) return;
    server_->Stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }

  int Port() const { return server_->port(); }

  // A client that sends the right token (and, by default, the right Host).
  std::unique_ptr<httplib::Client> Client(bool with_token = true) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", Port());
    c->set_connection_timeout(5);
    c->set_read_timeout(30);
    if (with_token) c->set_default_headers({{"Authorization", std::string("Bearer ") + kToken}});
    return c;
  }

  // GET/POST with the token; the body parsed as JSON (null when it is not JSON).
  Reply Get(const std::string& path, httplib::Headers extra = {}) {
    auto c = Client();
    return Wrap(c->Get(path.c_str(), extra));
  }
  Reply Post(const std::string& path, const std::string& body, httplib::Headers extra = {}) {
    auto c = Client();
    return Wrap(c->Post(path.c_str(), extra, body, "application/json"));
  }
  Reply Delete(const std::string& path) {
    auto c = Client();
    return Wrap(c->Delete(path.c_str()));
  }
  static Reply Wrap(const httplib::Result& r) {
    Reply out;
    if (!r) {
      ADD_FAILURE() << "request failed: " << httplib::to_string(r.error());
      return out;
    }
    out.status = r->status;
    out.raw = r->body;
    out.headers = r->headers;
    out.body = Json::parse(r->body, nullptr, false);
    if (out.body.is_discarded()) out.body = nullptr;
    return out;
  }

  // --- filling the store
  Experiment AddExperiment(const std::string& name) {
    Experiment e;
    e.name = name;
    e.spec_yaml = "name: " + name + "\ncommand: [python3, train.py]\n";
    e.spec = {{"name", name}};
    e.snapshot_hash = "snap-" + name;
    e.git_commit = "c0ffee";
    e.git_diff = "diff --git a/train.py b/train.py\n";
    e.created_ms = 1'700'000'000'000;
    EXPECT_TRUE(store_->InsertExperiment(e).ok());
    Snapshot s;
    s.hash = e.snapshot_hash;
    s.path = Path("snapshots/" + s.hash);
    s.git = true;
    s.git_commit = "first-commit";
    s.bytes = 1234;
    s.files = 3;
    EXPECT_TRUE(store_->PutSnapshot(s).ok());
    EXPECT_TRUE(
        store_
            ->PutEnvironment({e.id, "/usr/bin/python3", "numpy==1.24.2\ntorch==1.13.1", "box", ""})
            .ok());
    return e;
  }

  drover::Run AddRun(int64_t experiment_id, RunState state, int index = 0) {
    drover::Run r;
    r.experiment_id = experiment_id;
    r.index = index;
    r.params = {{"lr", 0.1 * (index + 1)}};
    r.current_params = r.params;
    r.fingerprint = "fp" + std::to_string(index);
    r.state = state;
    r.created_ms = 1'700'000'000'000 + index;
    EXPECT_TRUE(store_->InsertRun(r).ok());
    return r;
  }

  Attempt AddAttempt(int64_t run_id, int number, bool ended) {
    Attempt a;
    a.run_id = run_id;
    a.number = number;
    a.ended = ended;
    a.reason = ended ? "succeeded" : "";
    a.exit_code = ended ? 0 : -1;
    a.argv = {"python3", "train.py"};
    a.started_ms = 1'700'000'000'500;
    std::string base = "run" + std::to_string(run_id) + "-attempt" + std::to_string(number);
    a.stdout_path = Path(base + ".stdout");
    a.stderr_path = Path(base + ".stderr");
    EXPECT_TRUE(store_->InsertAttempt(a).ok());
    return a;
  }

  void AppendFile(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << bytes;
  }

  fs::path dir_;
  std::unique_ptr<Store> store_;  // the test's own connection (the writer)
  FakeEngineControl engine_;
  RealClock clock_;  // the server's time source (sessions and tokens are signed with wall time)
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

}  // namespace drover::server::testing
