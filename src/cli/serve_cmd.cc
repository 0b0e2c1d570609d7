// drover serve: host the engine as a daemon behind the HTTP API.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <fstream>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>

#include "cli/client.h"
#include "cli/common.h"
#include "cli/daemon_start.h"
#include "cli/engine_setup.h"
#include "common/files.h"
#include "cli/mcp_tools.h"
#include "drover_version.h"
#include "common/strings.h"
#include "common/users.h"
#include "daemon/daemon.h"
#include "engine/engine.h"
#include "exec/posix_launcher.h"
#include "gpu/gpu_probe.h"
#include "server/server.h"
#include "store/engine_lock.h"

namespace drover::cli {
namespace {

struct ServeFlags {
  std::string listen = "127.0.0.1:7070";
  std::string fake_gpus;
  int cpus = 0;
  bool stop_runs = false;
  EngineFlags engine;
  std::vector<std::string> recipes;
  std::string socket;  // default <store>/daemon.sock
  bool shared = false;
  std::string idle_exit;  // --idle-exit DURATION ("" or 0: never)
};

// Ends the daemon the usual way (SIGTERM to itself: it drains) when its store folder is gone,
// stopping its runs first since no engine would ever adopt them; or, with --idle-exit, once it
// has had nothing queued or running and no request for that long (docs/lab-server.md, "Daemons
// started on demand").
class Watchdog {
 public:
  Watchdog(const Globals& g, Engine& engine, const server::HttpServer& http, Millis idle_ms)
      : g_(g), engine_(engine), http_(http), idle_ms_(idle_ms) {}
  ~Watchdog() { Stop(); }
  void Start() {
    if (::stat(StoreDir(g_).c_str(), &store_) != 0) return;
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static int64_t NowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  bool StoreGone() const {
    struct stat st {};
    return ::stat(StoreDir(g_).c_str(), &st) != 0 || st.st_ino != store_.st_ino ||
           st.st_dev != store_.st_dev;
  }
  bool RunsLeft(Store& store) const {
    for (RunState s : {RunState::kQueued, RunState::kRunning, RunState::kRetrying}) {
      RunFilter f;
      f.state = s;
      f.limit = 1;
      auto runs = store.ListRuns(f);
      if (!runs.ok() || !runs->empty()) return true;  // unsure: not idle
    }
    return false;
  }
  void Loop() {
    std::unique_ptr<Store> store;
    int64_t idle_since = NowMs();
    for (int tick = 0;; ++tick) {
      {
        std::unique_lock<std::mutex> l(mu_);
        if (cv_.wait_for(l, std::chrono::milliseconds(500), [this] { return stop_; })) return;
      }
      if (StoreGone()) {
        spdlog::warn("the store folder {} is gone: stopping its runs and exiting",
                     StoreDir(g_));
        engine_.StopRunsOnDrain();
        ::kill(::getpid(), SIGTERM);
        return;
      }
      if (idle_ms_ <= 0 || tick % 4 != 0) continue;
      if (!store) {
        auto opened = OpenStore(g_, /*create=*/false);
        if (!opened.ok()) continue;
        store = std::move(*opened);
      }
      const int64_t now = NowMs();
      if (RunsLeft(*store) || now - http_.last_request_ms() < idle_ms_) {
        idle_since = now;
        continue;
      }
      if (now - idle_since >= idle_ms_) {
        spdlog::info("idle for {} (nothing queued or running, no request): exiting",
                     FormatDuration(idle_ms_));
        ::kill(::getpid(), SIGTERM);
        return;
      }
    }
  }
  const Globals& g_;
  Engine& engine_;
  const server::HttpServer& http_;
  Millis idle_ms_;
  struct stat store_ {};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The token every request must carry: made at first start, kept 0600 in the store folder.
Result<std::string> LoadOrCreateToken(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    unsigned char raw[32];
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    urandom.read(reinterpret_cast<char*>(raw), sizeof raw);
    if (!urandom) {
      ::close(fd);
      return Internal("cannot read /dev/urandom to make the API token");
    }
    std::string token;
    for (unsigned char c : raw) token += fmt::format("{:02x}", c);
    std::string line = token + "\n";
    bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(fd);
    if (!ok) return ErrnoStatus("writing " + path);
    return token;
  }
  if (errno != EEXIST) return ErrnoStatus("creating " + path);
  // Whatever happened to it since, only the owner may read the token.
  if (::chmod(path.c_str(), 0600) != 0) return ErrnoStatus("chmod 0600 " + path);
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  token = std::string(Trim(token));
  if (token.size() < 32) {
    return FailedPrecondition(fmt::format(
        "the API token in {} is missing or too short; delete the file and start drover serve "
        "again to make a new one",
        path));
  }
  return token;
}

Status WriteDaemonInfo(const std::string& path, const std::string& host, int port,
                       const std::string& socket, Millis idle_exit_ms) {
  // 0644: local clients of a shared daemon find its socket here.
  return WriteFileAtomically(path,
                             Json({{"host", host},
                                   {"port", port},
                                   {"pid", ::getpid()},
                                   {"socket", socket},
                                   {"idle_exit_ms", idle_exit_ms}})
                                     .dump() +
                                 "\n");
}

Result<std::pair<std::string, int>> ParseListen(const std::string& listen) {
  auto colon = listen.rfind(':');
  auto bad = [&] {
    return InvalidArgument(fmt::format(
        "--listen '{}' is not HOST:PORT; write e.g. 127.0.0.1:7070 (port 0 picks a free one)",
        listen));
  };
  if (colon == std::string::npos || colon == 0) return bad();
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  char* end = nullptr;
  long port = std::strtol(listen.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535 || colon + 1 == listen.size()) return bad();
  return std::make_pair(host, static_cast<int>(port));
}

int Serve(Globals& g, const ServeFlags& f) {
  auto listen = ParseListen(f.listen);
  if (!listen.ok()) return ReportError(listen.status());
  // First, before any thread starts: the launcher blocks SIGINT/SIGTERM/SIGHUP/SIGCHLD, and the
  // HTTP threads inherit that mask, so those signals reach only the engine's loop; and it forks
  // the supervisor that starts and watches the runs while this process is still small
  // (exec/supervisor.h).
  PosixLauncher launcher(PosixLauncher::Mode::kSupervised);
  // A daemon's log is read later (journalctl, a file): stamp each line, and keep info lines
  // (alerts of severity info, runs stopped as diverged).
  SetLogPattern("[%Y-%m-%d %H:%M:%S.%e] %^%l%$: %v");
  if (!g.verbose) spdlog::set_level(spdlog::level::info);
  std::string fake = f.fake_gpus;
  if (fake.empty()) {
    if (const char* env = std::getenv("DROVER_FAKE_GPUS")) fake = env;
  }
  if (Status st = CheckStoreDir(g); !st.ok()) return ReportError(st);
  // A root daemon's store is root's alone, shared or not (its database holds every spec's env).
  if (!f.shared && ::geteuid() == 0) ::umask(077);
  if (f.shared) {
    // Users reach the daemon through its socket, never the store's files: everything it writes
    // is its own user's alone (the store, logs, outputs), and the folder only lets them through
    // to the socket and daemon.json (docs/lab-server.md, "Files").
    ::umask(077);
    std::error_code ec;
    std::filesystem::create_directories(StoreDir(g), ec);
    ::chmod(StoreDir(g).c_str(), 0711);
    // A store used before by a daemon that was not shared: what it holds becomes private too
    // (the top level is enough: a 0700 folder keeps out everything below it).
    for (const auto& entry : std::filesystem::directory_iterator(StoreDir(g), ec)) {
      const std::string name = entry.path().filename().string();
      if (name == "daemon.json" || name == "daemon.sock") continue;
      struct stat st {};
      if (::lstat(entry.path().c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
      // A root daemon's users reach their own runs' files through these (each run's own folder
      // is theirs alone): they let them through, and show nobody what is in them.
      const bool theirs = ::geteuid() == 0 && S_ISDIR(st.st_mode) &&
                          (name == "runs" || name == "changes" || name == "logs" ||
                           name == "checkpoints" || name == "snapshots");
      ::chmod(entry.path().c_str(), theirs ? 0711 : st.st_mode & 07700);
    }
  }
  auto setup = PrepareEngine(g, fake, f.engine);
  if (!setup.ok()) return ReportError(setup.status());
  Millis idle_ms = 0;
  if (!f.idle_exit.empty()) {
    auto d = ParseDurationMs(f.idle_exit);
    if (!d.ok()) return ReportError(InvalidArgument("--idle-exit: " + d.status().message()));
    idle_ms = *d;
  }
  auto lock = EngineLock::Acquire(StoreDir(g));
  // A daemon serves the store already (one an earlier drover run started, maybe idle): say which
  // and how to stop it, not only that the store is taken.
  if (!lock.ok()) return ReportError(ADaemonServesTheStore(g, lock.status()));
  if (Status st = OpenGpuLedger(g, *setup); !st.ok()) return ReportError(st);
  auto token = LoadOrCreateToken(TokenPath(g));
  if (!token.ok()) return ReportError(token.status());
  auto store = OpenStore(g, /*create=*/true);
  if (!store.ok()) return ReportError(store.status());

  RealClock clock;
  auto executor = PrepareExecutor(setup->config, ExecutorSpec{}, launcher, clock, StoreDir(g));
  if (!executor.ok()) return ReportError(executor.status());
  EngineOptions opts;
  opts.store_dir = StoreDir(g);
  opts.cpu_slots = f.cpus;
  opts.executor_max_jobs = executor->max_jobs;
  opts.stop_runs_on_drain = f.stop_runs;
  opts.watch = setup->config.watch;
  opts.scheduler = setup->config.scheduler;
  opts.environment = setup->config.environment;
  opts.commit_interval_ms = kCommitIntervalMs;  // engine.h
  opts.alert_sink = setup->sinks.get();
  opts.gpu_ledger = setup->ledger.get();
  // A root daemon serving a lab runs each run as its submitter (docs/lab-server.md).
  opts.runs_as_submitter = f.shared && ::geteuid() == 0;
  if (opts.runs_as_submitter && executor->kind != ExecutorKind::kLocal) {
    return ReportError(FailedPrecondition(
        "drover serve --shared as root runs each run as its submitter, which the Slurm executor "
        "does not do yet; serve Slurm from a service user's daemon (docs/lab-server.md)"));
  }
  Engine engine(**store, *executor->launcher, *setup->probe, clock, opts);
  auto recovered = engine.Recover();
  if (!recovered.ok()) return ReportError(recovered.status());

  Daemon daemon(engine, clock, DaemonOptions{setup->config.lab, f.shared});
  server::ServerOptions so;
  so.store_path = StorePath(g);
  so.host = listen->first;
  so.port = listen->second;
  so.token = *token;
  std::error_code ec;
  so.unix_socket = f.socket.empty() ? StoreDir(g) + "/daemon.sock" : f.socket;
  so.unix_socket = std::filesystem::absolute(so.unix_socket, ec).string();
  so.shared = f.shared;
  so.admin_group = setup->config.lab.admin_group;
  so.audit_path = StoreDir(g) + "/audit.log";
  so.tokens_path = StoreDir(g) + "/tokens.json";
  if (!so.admin_group.empty() && !LookupGroup(so.admin_group)) {
    return ReportError(InvalidArgument("lab.admin_group: there is no Unix group named '" +
                                       so.admin_group + "' on this machine (groupadd it, or fix "
                                       "the config)"));
  }
  for (const std::string& team : setup->config.lab.teams) {
    if (!LookupGroup(team)) {
      return ReportError(InvalidArgument("lab.teams: there is no Unix group named '" + team +
                                         "' on this machine (groupadd it, or fix the config)"));
    }
  }
  for (const std::string& r : f.recipes) {
    std::error_code ec;
    so.recipe_dirs.push_back(std::filesystem::absolute(r, ec).string());
  }
  server::HttpServer http(so, daemon, clock);
  if (Status st = http.Bind(); !st.ok()) return ReportError(st);
  if (Status st = WriteDaemonInfo(DaemonInfoPath(g), so.host, http.port(), so.unix_socket,
                                  idle_ms);
      !st.ok()) {
    return ReportError(st);
  }
  // MCP at /mcp: the same tools as `drover mcp`, over this daemon's own API on loopback.
  DaemonInfo self;
  self.host = so.host == "0.0.0.0" ? "127.0.0.1" : so.host == "::" ? "::1" : so.host;
  self.port = http.port();
  self.pid = ::getpid();
  self.token = *token;
  McpToolOptions mcp_options;
  mcp_options.project_dir = std::filesystem::current_path().string();
  mcp_options.recipe_dirs = so.recipe_dirs;
  mcp::ToolRegistry mcp_tools = MakeDroverTools(self, mcp_options);
  mcp::McpServer mcp_server({"drover", DROVER_VERSION, "drover: GPU experiments"}, mcp_tools,
                            McpInstructions());
  http.SetMcp(&mcp_server);
  std::thread http_thread([&http] { http.Run(); });
  Watchdog watchdog(g, engine, http, idle_ms);
  watchdog.Start();

  const RecoverySummary& r = *recovered;
  std::printf("drover serve: listening on http://%s:%d/api/v1 (store %s, pid %d)\n",
              so.host.c_str(), http.port(), StoreDir(g).c_str(), ::getpid());
  std::printf("web UI: http://%s:%d/ (sign in with the token in %s/token)\n",
              self.host.find(':') != std::string::npos ? ("[" + self.host + "]").c_str()
                                                       : self.host.c_str(),
              http.port(), StoreDir(g).c_str());
  std::printf("local clients: %s (%s)\n", so.unix_socket.c_str(),
              !f.shared ? "this user only"
              : opts.runs_as_submitter
                  ? "shared: every local user, each known by their uid; each run executes as "
                    "its submitter: docs/lab-server.md"
                  : "shared: every local user, each known by their uid; runs execute as this "
                    "daemon's user, so its users must trust each other (run it as root for runs "
                    "as their submitters): docs/lab-server.md");
  if (!setup->config_path.empty()) std::printf("config: %s\n", setup->config_path.c_str());
  if (!executor->banner.empty()) std::printf("executor: %s\n", executor->banner.c_str());
  std::printf("scheduling policy: %s\n",
              std::string(sched::ToString(setup->config.scheduler.policy)).c_str());
  if (r.experiments > 0) {
    std::printf("took over %d experiment(s): %d queued, %d adopted, %d ended while down, %d "
                "requeued\n",
                r.experiments, r.queued, r.adopted, r.finished, r.requeued);
  }
  std::fflush(stdout);

  if (idle_ms > 0) std::printf("exits after %s idle\n", FormatDuration(idle_ms).c_str());
  std::fflush(stdout);
  Status st = engine.Serve(&daemon);
  watchdog.Stop();
  setup->sinks->Flush(15'000);  // alerts raised while stopping still go out
  daemon.Close();
  http.Stop();
  http_thread.join();
  std::filesystem::remove(DaemonInfoPath(g));
  if (!st.ok()) return ReportError(st);
  std::printf("drover serve: stopped%s\n",
              f.stop_runs ? "; running runs were stopped and will be requeued"
                          : "; running runs keep running and the next drover serve adopts them");
  return kExitOk;
}

}  // namespace

Command RegisterServe(CLI::App& root, Globals& g) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* app = root.add_subcommand(
      "serve", "Run the daemon: own the GPUs, take experiments over HTTP, survive restarts");
  app->add_option("--listen", f->listen, "HOST:PORT to listen on (loopback by default)");
  app->add_option("--fake-gpus", f->fake_gpus, "Declared GPUs instead of real ones, e.g. 8x80GiB");
  app->add_option("--cpus", f->cpus, "CPU slots shared by all runs (default: the CPU count)")
      ->check(CLI::PositiveNumber);
  app->add_flag("--stop-runs", f->stop_runs,
                "On SIGTERM stop running runs (they are requeued) instead of leaving them to be "
                "adopted by the next daemon");
  app->add_option("--recipe", f->recipes,
                  "A project folder (or its drover.yaml) whose recipe the web UI offers for new "
                  "experiments; repeatable. The daemon's folder and those of submitted "
                  "experiments are offered anyway")
      ->check(CLI::ExistingPath);
  app->add_option("--socket", f->socket,
                  "Unix socket for local clients, who need no token there (default "
                  "<store>/daemon.sock; docs/lab-server.md)");
  app->add_flag("--shared", f->shared,
                "Let every local user use the socket (mode 0666), each known by the kernel; "
                "they act on their own experiments, admins (lab.admin_group) on all");
  app->add_option("--idle-exit", f->idle_exit,
                  "Exit after this long with nothing queued or running and no request (e.g. "
                  "30m; daemons started on demand use it). A daemon also exits when its store "
                  "folder is removed");
  app->add_option("--executor", f->engine.executor,
                  "Where attempts run: local (this machine) or slurm (each attempt a job; "
                  "docs/slurm.md); overrides the config's executor.kind")
      ->check(CLI::IsMember(ExecutorKindNames()));
  AddEngineFlags(app, f->engine);
  return {app, [&g, f] { return Serve(g, *f); }};
}

}  // namespace drover::cli
