#include "container/launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/files.h"
#include "common/strings.h"
#include "common/users.h"
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

bool EnvName(const std::string& k) {
  if (k.empty() || k.size() > 256 || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// The last non-empty line of `path`'s last 4 KiB: where a runtime that could not start the
// container, or the container's init that could not start the command, says why (and exits).
std::string LastErrorLine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - 4096));
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string last;
  for (const std::string& line : Split(tail, '\n')) {
    if (!line.empty()) last = line;
  }
  return last.substr(0, 500);
}

// Whether the last line is the runtime's (podman's "Error: ...", docker's "docker: Error") or
// its init's (catatonit, tini) own account of a start that failed, for this exit code: 125 the
// runtime failed (bad mount, image gone), 126/127 the OCI runtime could not execute the command
// (podman says so: "... OCI runtime attempted to invoke a command that was not found", "OCI
// permission denied"), 1 catatonit could not exec it. A program's own "Error:" on exit 1 is not.
bool RuntimeSaidIt(int code, const std::string& line) {
  const bool runtime = line.rfind("Error: ", 0) == 0 || line.rfind("docker: Error", 0) == 0;
  if (code == 125) return runtime;
  if (code == 126 || code == 127) {
    return (runtime && line.find("OCI ") != std::string::npos) ||
           (line.rfind("[FATAL tini", 0) == 0 && line.find("exec ") != std::string::npos);
  }
  if (code == 1) {
    return line.rfind("ERROR (catatonit:", 0) == 0 && line.find("failed to exec") != std::string::npos;
  }
  return false;
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
  if (!digits(run) || !digits(attempt) || attempt.size() > 9) return "";
  return ContainerName(store_id, std::stoll(run), std::stoi(attempt));
}

ContainerLauncher::ContainerLauncher(ProcessLauncher& inner, std::string store_id,
                                     std::string marker)
    : inner_(inner),
      store_id_(std::move(store_id)),
      marker_(std::move(marker)),
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

Result<LaunchSpec> ContainerLauncher::Wrap(const LaunchSpec& spec) const {
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
  if (spec.run_as.set()) {
    // A root daemon's run as its submitter: the runtime stays root's, the container's process
    // is the submitter's (--user). What the runtime binds in with its rights must be what the
    // submitter could read (checked as them; docs/lab-server.md).
    run.uid = static_cast<int>(spec.run_as.uid);
    run.gid = static_cast<int>(spec.run_as.gid);
    UnixUser who = LookupUser(spec.run_as.uid, spec.run_as.gid);
    std::vector<std::string> sources;
    for (const auto& [path, writable] : req.binds) sources.push_back(path);
    for (const std::string& m : run.spec.mounts) sources.push_back(m.substr(0, m.find(':')));
    ActingAs as(&who);
    if (!as.status().ok()) return as.status();
    for (const std::string& src : sources) {
      // AT_EACCESS: checked with this thread's file rights (the submitter's), not root's.
      if (::faccessat(AT_FDCWD, src.c_str(), R_OK, AT_EACCESS) != 0) {
        return PermissionDenied("cannot start the container: " + DisplayName(who) +
                                " may not read '" + src + "', which the run would be given (a "
                                "run is given only what its submitter can read)");
      }
    }
  }

  // The run's environment goes into the container through a file the runtime reads (or, where a
  // value cannot be one line of it, on the command line), never through the client's own
  // environment: the spec's LD_PRELOAD or XDG_DATA_HOME must not change podman itself, and a
  // name is never taken as a pattern of the client's variables.
  LaunchSpec out = spec;
  out.run_as = RunAs{};  // the runtime runs as the daemon; the container as run.uid
  if (run.spec.runtime == ContainerRuntime::kPyxis) {
    // srun hands the job's environment (the batch script's exports) into the container.
    out.argv = RunArgv(run, spec.argv);
    return out;
  }
  out.env.clear();
  std::string file;  // KEY=VALUE lines
  for (const std::string& kv : spec.env) {
    const std::string key = KeyOf(kv);
    std::string value = kv.size() > key.size() ? kv.substr(key.size() + 1) : "";
    if (!EnvName(key)) {
      spdlog::warn("run {}: environment variable '{}' is not a name a container takes; left out",
                   req.run_id, key.substr(0, 80));
      continue;
    }
    if (key == "CUDA_VISIBLE_DEVICES") {
      // The client keeps the host's numbering (what a restarted engine reads back).
      out.env.push_back(kv);
      if (inner_.kind() != ExecutorKind::kLocal) {
        // A Slurm job's GPUs are Slurm's: the container is given the node's GPUs and the job's
        // CUDA_VISIBLE_DEVICES (host numbering, in the client's environment) picks its own.
        run.env_keys.push_back(key);
        continue;
      }
      // Inside, the container's GPUs are numbered from 0.
      value = InnerVisibleDevices(req.gpu_uuids.size());
    }
    if (value.find('\n') != std::string::npos || spec.stdout_path.empty()) {
      run.inline_env.push_back(key + "=" + value);
    } else {
      file += key + "=" + value + "\n";
    }
  }
  for (const std::string& key : ClientKeys()) {
    if (const char* v = getenv(key.c_str())) out.env.push_back(key + "=" + v);
  }
  if (!file.empty()) {
    // Beside the attempt's logs (shared with the nodes under Slurm), readable by its user only.
    std::string path = spec.stdout_path;
    if (path.size() > 4 && path.compare(path.size() - 4, 4, ".out") == 0) path.resize(path.size() - 4);
    path += ".env";
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || write(fd, file.data(), file.size()) != static_cast<ssize_t>(file.size())) {
      const int err = errno;
      if (fd >= 0) close(fd);
      return Status(Code::kIo, fmt::format("cannot write the container's environment file {}: {}",
                                           path, ErrnoText(err)));
    }
    close(fd);
    run.env_file = path;
  }
  // A Slurm job: the node's GPUs, the job's CUDA_VISIBLE_DEVICES picks its own.
  if (inner_.kind() != ExecutorKind::kLocal && req.resources.gpus > 0) run.all_gpus = true;
  out.argv = RunArgv(run, spec.argv);
  return out;
}

Result<ExecHandle> ContainerLauncher::Start(const LaunchSpec& spec) {
  if (!spec.request.container) return inner_.Start(spec);
  DROVER_ASSIGN_OR_RETURN(LaunchSpec wrapped, Wrap(spec));
  if (!MarkContainersStarting(marker_, spec.request.container->runtime, store_id_)) {
    return Status(Code::kIo, "cannot remove " + marker_ + ", which says no container was started "
                             "for this store; check the store folder's permissions");
  }
  Result<ExecHandle> started = inner_.Start(wrapped);
  if (started.ok()) running_[*started] = Describe(spec);
  return started;
}

Result<int64_t> ContainerLauncher::BeginStart(const LaunchSpec& spec) {
  if (!spec.request.container) return inner_.BeginStart(spec);
  DROVER_ASSIGN_OR_RETURN(LaunchSpec wrapped, Wrap(spec));
  if (!MarkContainersStarting(marker_, spec.request.container->runtime, store_id_)) {
    return Status(Code::kIo, "cannot remove " + marker_ + ", which says no container was started "
                             "for this store; check the store folder's permissions");
  }
  Result<int64_t> ticket = inner_.BeginStart(wrapped);
  if (ticket.ok()) starting_[*ticket] = Describe(spec);
  return ticket;
}

void ContainerLauncher::Remove(const Container& c) {
  // A Slurm job's container is on its node: the job's own script stops it.
  if (inner_.kind() != ExecutorKind::kLocal || c.runtime == ContainerRuntime::kPyxis) return;
  remover_.Start(Removal{c.runtime, {c.name}});
}

void ContainerLauncher::Stop(ExecHandle attempt, StopSignal how) {
  inner_.Stop(attempt, how);
  // SIGTERM reaches the container through the client; a SIGKILL ends only the client.
  if (how == StopSignal::kKill) {
    if (auto it = running_.find(attempt); it != running_.end()) Remove(it->second);
  }
}

void ContainerLauncher::Judge(const Container& c, ProcessExit* exit) const {
  if (exit->outcome || exit->lost || exit->signal != 0) return;
  const std::string line = c.stderr_path.empty() ? "" : LastErrorLine(c.stderr_path);
  if (RuntimeSaidIt(exit->exit_code, line)) {
    exit->outcome = AttemptOutcome::kLaunchError;
    exit->detail = fmt::format("{} could not run the container: {}",
                               RuntimeProgram(c.runtime), line);
    exit->error = exit->detail;
    return;
  }
  // The runtime exits 128+N when the container's command was killed by signal N: a signal, as
  // the same end on the host is recorded.
  if (exit->exit_code > 128 && exit->exit_code < 128 + 65) {
    exit->signal = exit->exit_code - 128;
    exit->exit_code = -1;
  }
}

WaitResult ContainerLauncher::Wait(int64_t timeout_ms) {
  WaitResult r = inner_.Wait(timeout_ms);
  for (const StartOutcome& s : r.started) {
    auto it = starting_.find(s.ticket);
    if (it == starting_.end()) continue;
    if (s.handle.valid()) running_[s.handle] = std::move(it->second);
    starting_.erase(it);
  }
  for (ProcessExit& e : r.exits) {
    auto it = running_.find(e.handle);
    if (it == running_.end()) continue;
    Judge(it->second, &e);
    // A client that did not exit by itself (killed, lost) may have left its container.
    if (e.signal != 0 || e.lost) Remove(it->second);
    running_.erase(it);
  }
  return r;
}

void ContainerLauncher::Adopt(ExecHandle attempt, int64_t identity, const ExitRecordAt& record) {
  inner_.Adopt(attempt, identity, record);
  if (inner_.kind() != ExecutorKind::kLocal) return;
  // On this machine the handle is the process leading the attempt's group: the runtime's client
  // (the supervisor's runs) or a shim.
  const int pid = static_cast<int>(attempt.id);
  Container c;
  c.name = ContainerNameOf(pid);  // the supervisor's runs: the client leads the group
  const std::vector<std::string> args = Split(CmdlineOf(pid), '\0');
  const std::string argv0 = args.empty() ? "" : args.front();
  if (argv0.substr(argv0.rfind('/') + 1) == "docker") c.runtime = ContainerRuntime::kDocker;
  // Its stderr log: beside the exit record (<run>-<attempt>.exit -> .err).
  if (record.file.size() > 5 && record.file.compare(record.file.size() - 5, 5, ".exit") == 0) {
    c.stderr_path = record.file.substr(0, record.file.size() - 5) + ".err";
  }
  if (!c.name.empty()) {
    running_[attempt] = std::move(c);
    return;
  }
  // A shim leads it: the name its container would have, if it is a container run at all.
  c.name = ContainerNameFromRecord(store_id_, record.file);
  if (!c.name.empty()) maybe_[attempt] = std::move(c);
}

void ContainerLauncher::EndRecovery() {
  inner_.EndRecovery();
  if (inner_.kind() != ExecutorKind::kLocal) return;
  std::error_code ec;
  if (!marker_.empty() && std::filesystem::exists(marker_, ec)) {
    maybe_.clear();  // no container was ever started for this store: none of them has one
    return;
  }
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
