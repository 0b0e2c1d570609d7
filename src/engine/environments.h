#pragma once
// Each experiment's environment (docs/reproducibility.md), a component of the engine: its
// interpreters' packages, the machine and its GPUs, listed off the loop once per experiment and
// interpreter (engine/environment_capture.h: the helper process and its timeout) and stored in
// the loop's transaction when ready. It never includes engine/engine.h.
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_context.h"
#include "engine/engine_options.h"
#include "engine/environment_capture.h"
#include "gpu/gpu_probe.h"
#include "model/run.h"
#include "model/spec.h"

namespace drover {

class Environments {
 public:
  Environments(EngineContext& ctx, GpuProbe& probe, const EngineOptions& options,
               std::string hostname);
  ~Environments();
  // Starts listing the environment of a new experiment whose runs run `argvs`.
  void Capture(const Experiment& experiment, const std::vector<std::vector<std::string>>& argvs,
               const Spec& spec);
  // Stores the environments listed so far (with `wait`, the loop ends: the listings in progress
  // are waited for, at most 10 s and each within its own timeout).
  void Store(bool wait);

 private:
  EngineContext& ctx_;
  GpuProbe& probe_;
  const EngineOptions& options_;
  std::string hostname_;
  std::unique_ptr<EnvironmentCapture> capture_;  // started at the first experiment
};

}  // namespace drover
