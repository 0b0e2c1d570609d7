#pragma once
// Attempts in containers (docs/containers.md): a ProcessLauncher over the engine's own (the
// local one, or Slurm's) that runs each attempt whose spec has `container:` as `podman run`
// (or docker, or pyxis's srun) of its pinned image, in the foreground. The runtime's client is
// the run's process, so the log files, the exit record, adoption after a restart, timeouts,
// cancel (SIGTERM reaches the container through the client's signal proxy and the container's
// init) and CUDA OOM retries work as for any run. What the client cannot do this launcher does:
// a SIGKILL of the client leaves its container running, so the container is removed too; a
// client that could not start the container (image gone, bad mount) is a launch error, not a
// crash; and after a restart the store's containers no attempt owns any more are removed.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/worker.h"
#include "container/command.h"
#include "exec/process_launcher.h"

namespace drover::container {

class ContainerLauncher : public ProcessLauncher {
 public:
  // `store_id`: the store's short id (StoreId), in container names and the store label.
  // `marker`: the store's NoContainersMarkerPath, removed before its first container starts and
  // looked for by EndRecovery ("": none kept, the store's containers are always listed).
  ContainerLauncher(ProcessLauncher& inner, std::string store_id, std::string marker = "");
  ~ContainerLauncher() override;

  ExecutorKind kind() const override { return inner_.kind(); }
  Result<ExecHandle> Start(const LaunchSpec& spec) override;
  bool StartsInBackground() const override { return inner_.StartsInBackground(); }
  Result<int64_t> BeginStart(const LaunchSpec& spec) override;
  void Stop(ExecHandle attempt, StopSignal how) override;
  WaitResult Wait(int64_t timeout_ms) override;
  int64_t Identity(ExecHandle attempt) override { return inner_.Identity(attempt); }
  std::optional<std::string> EnvOf(ExecHandle attempt, const std::string& name) override {
    return inner_.EnvOf(attempt, name);
  }
  std::optional<ExecHandle> OwnerOf(int64_t pid) override { return inner_.OwnerOf(pid); }
  void Adopt(ExecHandle attempt, int64_t identity, const ExitRecordAt& record) override;
  Json PlacedAs(ExecHandle attempt) override { return inner_.PlacedAs(attempt); }
  std::string StartNote(ExecHandle attempt) override { return inner_.StartNote(attempt); }
  bool WaitsToRun(const Json& placement) const override { return inner_.WaitsToRun(placement); }
  Status BeginRecovery() override { return inner_.BeginRecovery(); }
  // After the engine's adoption: the store's containers that no adopted attempt owns (their
  // client is gone: the attempt was requeued) are removed. A store whose marker says it never
  // started a container is not listed.
  void EndRecovery() override;
  void Wake() override { inner_.Wake(); }

  // The launch `spec` becomes for its container (its argv the runtime's; the run's environment
  // in <logs>/<run>-<attempt>.env, read by the runtime; public for tests).
  Result<LaunchSpec> Wrap(const LaunchSpec& spec) const;
  // Removals queued and not yet done (tests wait for 0).
  size_t removals_pending() const { return remover_.Busy() ? 1 : 0; }
  void WaitRemovals() { remover_.WaitIdle(); }

 private:
  struct Container {
    std::string name;
    ContainerRuntime runtime = ContainerRuntime::kPodman;
    std::string stderr_path;
  };
  struct Removal {
    ContainerRuntime runtime = ContainerRuntime::kPodman;
    std::vector<std::string> names;
  };
  Container Describe(const LaunchSpec& spec) const;
  void Remove(const Container& c);
  // An exit of a container's client: a launch error where the runtime said it could not run it.
  void Judge(const Container& c, ProcessExit* exit) const;

  ProcessLauncher& inner_;
  std::string store_id_;
  std::string marker_;
  std::map<ExecHandle, Container> running_;  // by the inner launcher's handle (the client's pid; a Slurm job id)
  std::map<int64_t, Container> starting_;    // by BeginStart's ticket
  // Adopted attempts whose process is not the runtime's client (a shim leads it): their
  // container's name from the exit record's, confirmed by the listing at EndRecovery.
  std::map<ExecHandle, Container> maybe_;
  Worker<Removal, int> remover_;
};

// The name a runtime client's command line gives its container (--name X), from
// /proc/<pid>/cmdline; "" when it is not a runtime's `run`.
std::string ContainerNameOf(int pid);
// The container name an attempt whose exit record is `record_path` (<run>-<attempt>.exit) would
// have; "" when the path is not such a record.
std::string ContainerNameFromRecord(const std::string& store_id, const std::string& record_path);

}  // namespace drover::container
