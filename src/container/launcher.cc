#include "container/launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/files.h"
#include "common/strings.h"
#include "container/runtime.h"

namespace drover::container {

namespace {

// What the runtime's client itself needs from drover's environment (to find its programs, its
// storage and its registry logins); never passed into the container by name.
const std::vector<std::string>& ClientKeys() {
  static const std::vector<std::string> keys = {
      "PATH",          "HOME",        "USER",         "LOGNAME",           "XDG_RUNTIME_DIR",
      "XDG_CONFIG_HOME", "TMPDIR",    "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF",
      "CONTAINER_HOST", "DOCKER_HOST", "DOCKER_CONFIG", "REGISTRY_AUTH_FILE"};
  return keys;
}

std::string KeyOf(const std::string& kv) { return kv.substr(0, kv.find('=')); }

// The last line of `path`'s last 4 KiB that the runtime wrote as its own error ("Error: ...").
std::string RuntimeError(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 4096);
  in.seekg(from);
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string found;
  for (const std::string& line : Split(tail, '\n')) {
    // podman's and docker's own errors, and their init's (catatonit, tini) when it cannot
    // start the command.
    if (line.rfind("Error: ", 0) == 0 || line.rfind("docker: Error", 0) == 0 ||
        line.find("OCI runtime") != std::string::npos ||
        (line.rfind("ERROR (catatonit:", 0) == 0 && line.find("failed to exec") != std::string::npos) ||
        (line.rfind("[FATAL tini", 0) == 0 && line.find("exec ") != std::string::npos)) {
      found = line;
    }
  }
  return found.substr(0, 500);
}

}  // namespace

// /proc/<pid>/cmdline (a file of size 0 that reads as its contents), at most 1 MiB.
std::string CmdlineOf(int pid) {
  std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  std::string out;
  char buf[4096];
  while (in && out.size() < (1 << 20)) {
    in.read(buf, sizeof buf);
    out.append(buf, static_cast<size_t>(in.gcount()));
  }
  return out;
}

std::string ContainerNameOf(int pid) {
  std::vector<std::string> args = Split(CmdlineOf(pid), '\0');
  if (args.size() < 4) return "";
  const std::string base = args[0].substr(args[0].rfind('/') + 1);
  if ((base != "podman" && base != "docker") || args[1] != "run") return "";
  for (size_t i = 2; i + 1 < args.size(); ++i) {
    if (args[i] == "--name") return args[i + 1];
  }
  return "";
}

std::string ContainerNameFromRecord(const std::string& store_id, const std::string& record_path) {
  std::string base = record_path.substr(record_path.rfind('/') + 1);
  const std::string ext = ".exit";
  if (base.size() <= ext.size() || base.compare(base.size() - ext.size(), ext.size(), ext) != 0) {
    return "";
  }
  base.resize(base.size() - ext.size());
  const size_t dash = base.find('-');
  if (dash == std::string::npos || dash == 0 || dash + 1 == base.size()) return "";
  const std::string run = base.substr(0, dash), attempt = base.substr(dash + 1);
  auto digits = [](const std::string& t) {
    return t.size() <= 18 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(run) || !digits(attempt)) return "";
  return ContainerName(store_id, std::stoll(run), std::stoi(attempt));
}

ContainerLauncher::ContainerLauncher(ProcessLauncher& inner, std::string store_id)
    : inner_(inner),
      store_id_(std::move(store_id)),
      remover_([](Removal& r, const std::function<bool()>&) {
        RemoveContainers(r.runtime, r.names);
        return 0;
      }) {}

ContainerLauncher::~ContainerLauncher() { remover_.WaitIdle(); }

ContainerLauncher::Container ContainerLauncher::Describe(const LaunchSpec& spec) const {
  Container c;
  c.name = ContainerName(store_id_, spec.request.run_id, spec.request.attempt);
  c.runtime = spec.request.container->runtime;
  c.stderr_path = spec.stderr_path;
  return c;
}

LaunchSpec ContainerLauncher::Wrap(const LaunchSpec& spec) const {
  const AttemptRequest& req = spec.request;
  ContainerRun run;
  run.spec = *req.container;
  run.name = ContainerName(store_id_, req.run_id, req.attempt);
  run.hostname = fmt::format("drover-run-{}", req.run_id);
  run.labels = {{kStoreLabel, store_id_},
                {"drover.experiment", std::to_string(req.experiment_id)},
                {"drover.run", std::to_string(req.run_id)},
                {"drover.attempt", std::to_string(req.attempt)}};
  run.workdir = spec.cwd;
  run.binds = req.binds;
  run.gpu_uuids = req.gpu_uuids;
  run.memory = req.resources.memory;
  run.uid = static_cast<int>(getuid());
  run.gid = static_cast<int>(getgid());
  run.rootless = getuid() != 0;

  LaunchSpec out = spec;
  out.env.clear();
  std::set<std::string> given;
  std::vector<std::string> inline_env;  // KEY=VALUE on the command line
  for (const std::string& kv : spec.env) {
    const std::string key = KeyOf(kv);
    given.insert(key);
    if (key == "CUDA_VISIBLE_DEVICES" && inner_.kind() != ExecutorKind::kLocal) {
      // A Slurm job's GPUs are Slurm's: the container is given the node's GPUs and the job's
      // CUDA_VISIBLE_DEVICES (host numbering) picks its own among them.
      run.env_keys.push_back(key);
      out.env.push_back(kv);
    } else if (key == "CUDA_VISIBLE_DEVICES") {
      // The client keeps the host's numbering (what a restarted engine reads back); inside,
      // the container's GPUs are numbered from 0.
      inline_env.push_back("CUDA_VISIBLE_DEVICES=" + InnerVisibleDevices(req.gpu_uuids.size()));
      out.env.push_back(kv);
    } else if (std::find(ClientKeys().begin(), ClientKeys().end(), key) != ClientKeys().end()) {
      inline_env.push_back(kv);  // the spec's own PATH (or HOME): for inside only
    } else {
      run.env_keys.push_back(key);
      out.env.push_back(kv);
    }
  }
  for (const std::string& key : ClientKeys()) {
    if (const char* v = getenv(key.c_str())) out.env.push_back(key + "=" + v);
  }
  if (inner_.kind() != ExecutorKind::kLocal && req.resources.gpus > 0) run.all_gpus = true;
  run.inline_env = std::move(inline_env);
  std::vector<std::string> argv = RunArgv(run, spec.argv);
  out.argv = std::move(argv);
  return out;
}

Result<int> ContainerLauncher::Start(const LaunchSpec& spec) {
  if (!spec.request.container) return inner_.Start(spec);
  Result<int> pid = inner_.Start(Wrap(spec));
  if (pid.ok()) running_[*pid] = Describe(spec);
  return pid;
}

Result<int64_t> ContainerLauncher::BeginStart(const LaunchSpec& spec) {
  if (!spec.request.container) return inner_.BeginStart(spec);
  Result<int64_t> ticket = inner_.BeginStart(Wrap(spec));
  if (ticket.ok()) starting_[*ticket] = Describe(spec);
  return ticket;
}

void ContainerLauncher::Remove(const Container& c) {
  // A Slurm job's container is on its node: the job's own script stops it.
  if (inner_.kind() != ExecutorKind::kLocal || c.runtime == ContainerRuntime::kPyxis) return;
  remover_.Start(Removal{c.runtime, {c.name}});
}

void ContainerLauncher::SignalGroup(int pgid, int sig) {
  inner_.SignalGroup(pgid, sig);
  // SIGTERM reaches the container through the client; a SIGKILL ends only the client.
  if (sig == SIGKILL) {
    if (auto it = running_.find(pgid); it != running_.end()) Remove(it->second);
  }
}

void ContainerLauncher::Judge(const Container& c, ProcessExit* exit) const {
  if (exit->outcome || exit->lost) return;
  if (exit->signal != 0) return;
  // podman and docker: 125 the runtime failed, 126 the command cannot be run, 127 not found;
  // the init process that could not start the command: 1 (catatonit) or 127 (tini).
  if (exit->exit_code != 1 && (exit->exit_code < 125 || exit->exit_code > 127)) return;
  const std::string error = RuntimeError(c.stderr_path);
  if (error.empty()) return;  // the program's own exit status
  exit->outcome = AttemptOutcome::kLaunchError;
  exit->detail = fmt::format("{} could not run the container: {}", RuntimeProgram(c.runtime),
                             error);
  if (exit->error.empty()) exit->error = exit->detail;
}

WaitResult ContainerLauncher::Wait(int64_t timeout_ms) {
  WaitResult r = inner_.Wait(timeout_ms);
  for (const StartOutcome& s : r.started) {
    auto it = starting_.find(s.ticket);
    if (it == starting_.end()) continue;
    if (s.pid > 0) running_[s.pid] = std::move(it->second);
    starting_.erase(it);
  }
  for (ProcessExit& e : r.exits) {
    auto it = running_.find(e.pid);
    if (it == running_.end()) continue;
    Judge(it->second, &e);
    // A client that did not exit by itself (killed, lost) may have left its container.
    if (e.signal != 0 || e.lost) Remove(it->second);
    running_.erase(it);
  }
  return r;
}

void ContainerLauncher::Adopt(int pid, int64_t start_ticks, const ExitRecordAt& record) {
  inner_.Adopt(pid, start_ticks, record);
  if (inner_.kind() != ExecutorKind::kLocal) return;
  Container c;
  c.name = ContainerNameOf(pid);  // the supervisor's runs: the client leads the group
  if (CmdlineOf(pid).find("docker") != std::string::npos) c.runtime = ContainerRuntime::kDocker;
  if (!c.name.empty()) {
    running_[pid] = std::move(c);
    return;
  }
  // A shim leads it: the name its container would have, if it is a container run at all.
  c.name = ContainerNameFromRecord(store_id_, record.file);
  if (!c.name.empty()) maybe_[pid] = std::move(c);
}

void ContainerLauncher::EndRecovery() {
  inner_.EndRecovery();
  if (inner_.kind() != ExecutorKind::kLocal) return;
  std::set<std::string> owned;
  for (const auto& [pid, c] : running_) owned.insert(c.name);
  for (const auto& [pid, c] : maybe_) owned.insert(c.name);
  std::set<std::string> listed_names;
  for (ContainerRuntime rt : {ContainerRuntime::kPodman, ContainerRuntime::kDocker}) {
    if (!Installed(rt)) continue;
    // A docker client without an engine to talk to has nothing to list.
    if (rt == ContainerRuntime::kDocker && !getenv("DOCKER_HOST") &&
        access("/var/run/docker.sock", F_OK) != 0) {
      continue;
    }
    Result<std::vector<Listed>> listed = ListContainers(rt, store_id_);
    if (!listed.ok()) {
      spdlog::warn("could not list the store's containers with {}: {}", RuntimeProgram(rt),
                   listed.status().message());
      continue;
    }
    std::vector<std::string> stray;
    for (const Listed& l : *listed) {
      listed_names.insert(l.name);
      if (!owned.count(l.name)) stray.push_back(l.name);
    }
    if (stray.empty()) continue;
    spdlog::info("removing {} container(s) of this store that no run owns any more ({}): {}",
                 stray.size(), RuntimeProgram(rt), Join(stray, " "));
    RemoveContainers(rt, stray);
  }
  // A shim's run that has a container: its container is removed with it when it is killed.
  for (auto& [pid, c] : maybe_) {
    if (listed_names.count(c.name)) running_[pid] = std::move(c);
  }
  maybe_.clear();
}

}  // namespace drover::container
