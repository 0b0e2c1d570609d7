#pragma once
// What an attempt is given before it starts, a component of the engine (docs/execution.md,
// docs/architecture.md): where its run's files go, whose rights it has (a daemon's runs as their
// submitter), its working copy (made from the snapshot, with the spec's data and a stage's
// needs' outputs shown in it), its environment, and what a container is given besides its
// working copy. Its state: how working copies are made here (probed at the first), and the
// Python client's folder. It never includes engine/engine.h.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "engine/engine_options.h"
#include "engine/live.h"
#include "exec/child.h"
#include "exec/working_copy.h"

namespace drover {

// python/ of this drover when it is there ("" otherwise): put on every run's PYTHONPATH, and
// what a script run by hand needs there to import drover's client (drover init says so).
std::string PythonClientDir();

class AttemptSetup {
 public:
  // `python_client_dir`: python/ of this drover, put on every run's PYTHONPATH ("": none).
  AttemptSetup(const EngineOptions& options, std::string python_client_dir)
      : options_(options), python_client_dir_(std::move(python_client_dir)) {}
  ~AttemptSetup();

  // Where the run's files go (cached in the LiveRun).
  const RunFiles& FilesOf(LiveRun& live);
  // Whose rights the experiment's runs have (EngineOptions::runs_as_submitter): its submitter's,
  // looked up at each launch as a login would; nothing when they are the engine's own. Fails
  // when the submitter is gone.
  Result<std::optional<RunAs>> RunAsOf(ExperimentEntry& exp) const;
  // A stage's needs' outputs to show in its working copy (Pipelines::NeedMounts).
  using NeedMounts = std::function<Result<std::vector<DataMount>>(const std::string& workdir)>;
  // The run's log folder and working copy, made if missing. An Io error is the machine's (a
  // full disk), not the run's.
  Result<WorkingCopy> MakeWorkingCopy(LiveRun& live, const NeedMounts& need_mounts);
  // The attempt's environment, sorted by name: the experiment's (made once) under its own.
  std::vector<std::string> RunEnv(const LiveRun& live, const Attempt& attempt,
                                  const std::string& checkpoint_dir) const;
  // What a container run is given besides its working copy (AttemptRequest::binds): its
  // checkpoint folder (writable, made here), the sources of `data` (the working copy's data and
  // needs' outputs), the project folder, drover's Python client, a stage's inputs file.
  std::vector<std::pair<std::string, bool>> ContainerBinds(
      const LiveRun& live, const RunFiles& files, const std::vector<DataMount>& data,
      const std::vector<std::string>& env) const;

 private:
  const EngineOptions& options_;
  std::string python_client_dir_;
  std::unique_ptr<WorkingCopies> working_copies_;  // made at the first launch
  bool copies_said_ = false;  // whether the log says how working copies are made
};

}  // namespace drover
