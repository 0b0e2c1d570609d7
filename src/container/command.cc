#include "container/command.h"

#include <fmt/format.h>

#include "common/strings.h"

namespace drover::container {

std::string RuntimeProgram(ContainerRuntime r) {
  switch (r) {
    case ContainerRuntime::kDocker: return "docker";
    case ContainerRuntime::kPyxis: return "srun";
    case ContainerRuntime::kPodman: break;
  }
  return "podman";
}

std::string InnerVisibleDevices(size_t n) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(std::to_string(i));
  return Join(ids, ",");
}

std::string CdiDeviceName(const std::string& uuid) { return "nvidia.com/gpu=" + uuid; }

std::string ContainerName(const std::string& store_id, int64_t run_id, int attempt) {
  return fmt::format("drover-{}-{}-{}", store_id, run_id, attempt);
}

std::string HelperContainerName(const std::string& store_id, std::string_view what, int64_t id) {
  return fmt::format("drover-{}-{}-{}", store_id, what, id);
}

namespace {

// A bind of `source` at `target`: --volume, or --mount where a path holds a ':' (which
// --volume would take as its separator; --mount's is ',').
std::string BindFlag(const std::string& source, const std::string& target, bool writable) {
  if (source.find(':') == std::string::npos && target.find(':') == std::string::npos) {
    return "--volume=" + source + ":" + target + (writable ? "" : ":ro");
  }
  return "--mount=type=bind,source=" + source + ",destination=" + target +
         (writable ? "" : ",readonly=true");
}

// The image a run names: its pinned id where there is one.
std::string PinnedImage(const ContainerSpec& c) {
  return c.image_id.empty() ? c.image : c.image_id;
}

std::vector<std::string> PyxisArgv(const ContainerRun& run, const std::vector<std::string>& argv) {
  // enroot imports registry images by reference; the digest pins it where the registry gave one.
  std::string image = run.spec.image;
  if (!run.spec.digest.empty() && image.find('@') == std::string::npos) {
    const size_t slash = image.rfind('/');
    const size_t colon = image.rfind(':');
    if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
      image.resize(colon);
    }
    image += "@" + run.spec.digest;
  }
  std::vector<std::string> mounts = {run.workdir + ":" + run.workdir};
  for (const auto& [path, writable] : run.binds) {
    mounts.push_back(path + ":" + path + (writable ? "" : ":ro"));
  }
  for (const std::string& m : run.spec.mounts) mounts.push_back(m);
  std::vector<std::string> out = {"srun",
                                  "--ntasks=1",
                                  "--container-image=" + image,
                                  "--container-mounts=" + Join(mounts, ","),
                                  "--container-workdir=" + run.workdir,
                                  "--container-name=" + run.name,
                                  "--no-container-mount-home",
                                  "--no-container-remap-root"};
  if (!run.inline_env.empty()) {
    // srun passes the job's environment; these override it for the step.
    std::vector<std::string> exports = {"ALL"};
    exports.insert(exports.end(), run.inline_env.begin(), run.inline_env.end());
    out.push_back("--export=" + Join(exports, ","));
  }
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace

std::vector<std::string> RunArgv(const ContainerRun& run, const std::vector<std::string>& argv) {
  if (run.spec.runtime == ContainerRuntime::kPyxis) return PyxisArgv(run, argv);
  const bool podman = run.spec.runtime == ContainerRuntime::kPodman;
  std::vector<std::string> out = {RuntimeProgram(run.spec.runtime), "run", "--rm", "--init",
                                  "--name", run.name, "--hostname", run.hostname};
  if (podman) {
    // The container's stdout and stderr are the run's log files themselves: nothing relays or
    // keeps a second copy. The image is pinned by id: never pulled here.
    out.insert(out.end(), {"--log-driver=passthrough", "--pull=never"});
  }
  // Values joined to their flags (--env=KEY): nothing a spec holds can be read as a flag.
  for (const auto& [k, v] : run.labels) out.push_back("--label=" + k + "=" + v);
  out.insert(out.end(), {"--network", run.spec.network ? "host" : "none"});
  if (podman && run.rootless) {
    out.push_back("--userns=keep-id");
  } else {
    out.insert(out.end(), {"--user", fmt::format("{}:{}", run.uid, run.gid)});
    // A root runtime starting a user's process (a root daemon's run as its submitter): no way
    // back to root inside (a setuid binary of the image) and no capability.
    if (run.uid != 0) {
      out.insert(out.end(), {"--security-opt=no-new-privileges", "--cap-drop=ALL"});
    }
  }
  if (!run.workdir.empty()) {
    out.push_back(BindFlag(run.workdir, run.workdir, true));
    out.push_back("--workdir=" + run.workdir);
  }
  for (const auto& [path, writable] : run.binds) out.push_back(BindFlag(path, path, writable));
  for (const std::string& m : run.spec.mounts) out.push_back("--volume=" + m);
  if (!run.env_file.empty()) out.push_back("--env-file=" + run.env_file);
  for (const std::string& k : run.env_keys) out.push_back("--env=" + k);
  for (const std::string& kv : run.inline_env) out.push_back("--env=" + kv);
  if (run.all_gpus) {
    out.insert(out.end(), {podman ? "--device" : "--gpus", podman ? CdiDeviceName("all") : "all"});
  } else if (!run.gpu_uuids.empty()) {
    if (podman) {
      for (const std::string& u : run.gpu_uuids) {
        out.insert(out.end(), {"--device", CdiDeviceName(u)});
      }
    } else {
      // Docker's --gpus: quoted, because the list holds commas.
      out.insert(out.end(), {"--gpus", "\"device=" + Join(run.gpu_uuids, ",") + "\""});
    }
  }
  if (run.memory > 0) out.push_back("--memory=" + std::to_string(run.memory));
  out.push_back(PinnedImage(run.spec));
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> InspectArgv(ContainerRuntime r, const std::string& image) {
  return {RuntimeProgram(r), "image", "inspect", "--format",
          "{{.Id}}|{{.Digest}}|{{json .RepoDigests}}", image};
}

std::vector<std::string> PullArgv(ContainerRuntime r, const std::string& image) {
  return {RuntimeProgram(r), "pull", image};
}

std::vector<std::string> ListArgv(ContainerRuntime r, const std::string& store_id) {
  return {RuntimeProgram(r), "ps", "--all", "--filter",
          fmt::format("label={}={}", kStoreLabel, store_id), "--format",
          "{{.Names}}\t{{.State}}"};
}

std::vector<std::string> RemoveArgv(ContainerRuntime r, const std::vector<std::string>& names) {
  std::vector<std::string> out = {RuntimeProgram(r), "rm", "--force"};
  if (r == ContainerRuntime::kPodman) out.push_back("--ignore");
  out.insert(out.end(), names.begin(), names.end());
  return out;
}

}  // namespace drover::container
