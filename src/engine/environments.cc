// Each experiment's environment, a component of the engine (engine/environments.h).
#include "engine/environments.h"

#include <unistd.h>

#include <set>

#include "common/hash.h"
#include "common/users.h"
#include "container/runtime.h"
#include "model/run.h"

namespace drover {

Environments::Environments(EngineContext& ctx, GpuProbe& probe, const EngineOptions& options,
                           std::string hostname)
    : ctx_(ctx), probe_(probe), options_(options), hostname_(std::move(hostname)) {}

Environments::~Environments() = default;

void Environments::Capture(const Experiment& experiment,
                           const std::vector<std::vector<std::string>>& argvs, const Spec& spec) {
  // Once per experiment and interpreter, not per run: a sweep shares one interpreter.
  std::set<std::string> interpreters;
  for (const auto& argv : argvs) {
    if (argv.empty()) continue;
    interpreters.insert(InterpreterOf(argv, spec.shell));
  }
  if (!capture_) {
    capture_ = std::make_unique<EnvironmentCapture>(
        [this] { return probe_.Kind() == "none" ? std::string() : probe_.Describe(); },
        options_.environment.package_list_timeout_ms);
  }
  EnvironmentRequest req;
  req.experiment_id = experiment.id;
  req.interpreters.assign(interpreters.begin(), interpreters.end());
  req.workdir = spec.workdir;
  req.hostname = hostname_;
  req.store_id = StoreId(options_.store_dir);
  if (options_.runs_as_submitter) {
    // Its interpreter is the submitter's code: listed as them (or not at all when unknown).
    const Experiment* e = &experiment;
    if (e->uid < 0) return;
    if (e->uid != static_cast<int64_t>(::geteuid())) {
      UnixUser who = LookupUser(e->uid, e->gid);
      if (who.name.empty()) return;
      req.as = std::move(who);
    }
  }
  // A container's packages are the image's: listed inside it (pyxis images are on the nodes).
  if (spec.container && spec.container->runtime != ContainerRuntime::kPyxis) {
    req.container = spec.container;
    req.containers_marker = container::NoContainersMarkerPath(options_.store_dir);
  }
  capture_->Start(std::move(req));
}

void Environments::Store(bool wait) {
  if (!capture_) return;
  // Waited for at most 10 s (then only the listing in progress, bounded by its own timeout):
  // one user's queue of slow interpreters must not hold the daemon's stop for minutes.
  if (wait) capture_->WaitIdleFor(10'000);
  for (const Environment& env : capture_->TakeFinished()) {
    ctx_.Tx();
    if (Status st = ctx_.store().PutEnvironment(env); !st.ok()) ctx_.Fail(st);
  }
}

}  // namespace drover
