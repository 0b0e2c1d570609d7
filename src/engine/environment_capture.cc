#include "engine/environment_capture.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>

#include "common/strings.h"
#include "common/subprocess.h"
#include "container/command.h"
#include "container/runtime.h"

namespace drover {

namespace {

// Lists the interpreter's installed distributions, as `pip freeze` would, without needing pip.
constexpr const char* kPackageListScript =
    "import importlib.metadata as m\n"
    "seen = set()\n"
    "for d in m.distributions():\n"
    "    n = d.metadata['Name']\n"
    "    if n and n.lower() not in seen:\n"
    "        seen.add(n.lower()); print(f'{n}=={d.version}')\n";

}  // namespace

EnvironmentCapture::EnvironmentCapture(std::function<std::string()> describe_gpus,
                                       Millis package_list_timeout_ms)
    : describe_gpus_(std::move(describe_gpus)),
      timeout_ms_(package_list_timeout_ms),
      worker_([this](EnvironmentRequest& r, const std::function<bool()>& stopping) {
        return CaptureAll(r, stopping);
      }) {}

std::vector<Environment> EnvironmentCapture::TakeFinished() {
  std::vector<Environment> out;
  for (std::vector<Environment>& envs : worker_.TakeFinished()) {
    for (Environment& e : envs) out.push_back(std::move(e));
  }
  return out;
}

std::vector<Environment> EnvironmentCapture::CaptureAll(const EnvironmentRequest& r,
                                                        const std::function<bool()>& stopping) {
  std::vector<Environment> envs;
  for (const auto& interp : r.interpreters) {
    if (stopping()) break;  // shutting down: not one more listing
    envs.push_back(Capture(r, interp, stopping));
  }
  return envs;
}

Environment EnvironmentCapture::Capture(const EnvironmentRequest& r,
                                        const std::string& interpreter,
                                        const std::function<bool()>& stopping) {
  if (!described_) {
    gpu_info_ = describe_gpus_ ? describe_gpus_() : "";
    described_ = true;
  }
  Environment env;
  env.experiment_id = r.experiment_id;
  env.interpreter = interpreter;
  env.hostname = r.hostname;
  env.gpu_info = gpu_info_;
  if (interpreter.empty()) return env;
  CaptureOptions o;
  o.cwd = r.workdir;
  o.timeout_ms = timeout_ms_;
  o.max_output_bytes = 8LL << 20;  // a package list is kilobytes
  o.stop = stopping;  // a stopping daemon kills a listing in progress instead of waiting for it
  std::vector<std::string> argv = {interpreter, "-c", kPackageListScript};
  std::string key;
  std::string container_name;
  if (r.container) {
    key = r.container->image_id + " " + interpreter;
    if (auto it = image_packages_.find(key); it != image_packages_.end()) {
      env.packages = it->second;
      return env;
    }
    // The same command line as a run's container (container/command.h), without the run's
    // folder, GPUs or network: named and labelled as the store's, so a listing whose client was
    // killed is removed here, and one a dead daemon left by the next daemon.
    container::ContainerRun c;
    c.spec = *r.container;
    c.spec.network = false;
    c.spec.mounts.clear();
    c.name = container::HelperContainerName(r.store_id, "env", r.experiment_id);
    c.hostname = "drover-env";
    if (!r.store_id.empty()) c.labels[container::kStoreLabel] = r.store_id;
    c.uid = r.as ? static_cast<int>(r.as->uid) : static_cast<int>(getuid());
    c.gid = r.as ? static_cast<int>(r.as->gid) : static_cast<int>(getgid());
    argv = container::RunArgv(c, {interpreter, "-c", kPackageListScript});
    if (!container::MarkContainersStarting(r.containers_marker, r.container->runtime,
                                           r.store_id)) {
      env.packages = "# could not list packages of " + interpreter +
                     ": the store's containers-none file cannot be removed";
      return env;
    }
    container_name = c.name;
    o.cwd.clear();
  }
  if (r.as && !r.container) {
    // The user's interpreter, from their folder: as them, never with the daemon's rights.
    argv = AsUserArgv(*r.as, std::move(argv));
    o.clean_env = true;
    o.set_env = LoginEnvironment(*r.as);
  }
  auto cap = RunAndCapture(argv, o);
  if (!cap.ok() && !container_name.empty()) {
    // Killed (a timeout, a stopping daemon): the client is gone, its container may not be.
    container::RemoveContainers(r.container->runtime, {container_name});
  }
  if (cap.ok() && cap->exit_code == 0) {
    auto lines = Split(cap->out, '\n');
    lines.erase(std::remove(lines.begin(), lines.end(), ""), lines.end());
    std::sort(lines.begin(), lines.end());
    env.packages = Join(lines, "\n");
    if (!key.empty()) image_packages_[key] = env.packages;
  } else if (!cap.ok() && cap.status().code() == Code::kUnavailable) {
    env.packages =
        fmt::format("# could not list packages of {}: {}", interpreter, cap.status().message());
  } else {
    env.packages = "# could not list packages of " + interpreter;
  }
  return env;
}

const std::vector<std::string>& EnvironmentKeys() {
  static const std::vector<std::string> keys = {"package_list_timeout"};
  return keys;
}

Status ParseEnvironmentSection(const yaml::Reader& r, const yaml::Field& f, EnvironmentConfig* out) {
  yaml::MapRules rules;
  rules.valid = &EnvironmentKeys();
  rules.example = "environment: {package_list_timeout: 30s}";
  DROVER_ASSIGN_OR_RETURN(std::vector<yaml::Field> fields,
                          r.ReadMap(f.at(), f.value, "environment", rules));
  if (const yaml::Field* t = yaml::Find(fields, "package_list_timeout")) {
    DROVER_ASSIGN_OR_RETURN(out->package_list_timeout_ms, r.Duration(*t, 100));
  }
  return Status::Ok();
}

}  // namespace drover
