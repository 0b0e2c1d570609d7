#pragma once
// The command lines of a container runtime (docs/containers.md): an attempt's `podman run` /
// `docker run` / `srun --container-image` (pyxis), and the runtime's own queries (image
// inspect, pull, ps, rm). Pure: what runs them is container/runtime.h.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/spec.h"

namespace drover::container {

// One attempt's container: what RunArgv needs.
struct ContainerRun {
  ContainerSpec spec;         // image_id set (pinned at submit)
  std::string name;           // drover-<store>-<run>-<attempt>: found again by it
  std::string hostname;       // drover-run-<run>
  std::map<std::string, std::string> labels;
  std::string workdir;        // the run's working copy: bound at the same path, the container's cwd
                              // ("" for a helper: nothing bound, the image's cwd)
  std::vector<std::pair<std::string, bool>> binds;  // host path, writable: same path inside
  std::vector<std::string> env_keys;  // passed in by name (values from the runtime's environment)
  std::vector<std::string> inline_env;  // "KEY=VALUE" passed on the command line
  std::string env_file;                 // KEY=VALUE lines the runtime reads (--env-file)
  std::vector<std::string> gpu_uuids;
  bool all_gpus = false;  // the node's GPUs (a Slurm job: CUDA_VISIBLE_DEVICES picks the job's)
  int64_t memory = 0;  // bytes; 0: no limit
  int uid = 0;
  int gid = 0;
  bool rootless = false;  // podman not run by root: the user is mapped with --userns=keep-id
};

// The program of a runtime: "podman", "docker" (pyxis runs through Slurm's "srun").
std::string RuntimeProgram(ContainerRuntime r);

// The command line that runs `argv` in the attempt's container, in the foreground: the
// runtime's client stays the run's process (its exit status is the container's; SIGTERM to it
// reaches the container's processes through the runtime's signal proxy and an init process).
// Podman: --log-driver=passthrough, so the container writes straight to the run's log files.
std::vector<std::string> RunArgv(const ContainerRun& run, const std::vector<std::string>& argv);

// CUDA_VISIBLE_DEVICES inside a container given n GPUs: they are numbered 0..n-1 there ("" for
// none).
std::string InnerVisibleDevices(size_t n);

// The CDI name of a GPU: nvidia.com/gpu=<uuid>.
std::string CdiDeviceName(const std::string& uuid);

// An attempt's container name, and the labels drover puts on it.
std::string ContainerName(const std::string& store_id, int64_t run_id, int attempt);
inline constexpr char kStoreLabel[] = "drover.store";
// A helper's container (the package listing of an experiment's image): drover-<store>-<what>-<id>,
// with the store's label, so a daemon that restarts removes one a dead daemon left.
std::string HelperContainerName(const std::string& store_id, std::string_view what, int64_t id);

// Image queries. InspectArgv's output (one line): "<id>|<digest>|<repo digests as JSON>".
std::vector<std::string> InspectArgv(ContainerRuntime r, const std::string& image);
std::vector<std::string> PullArgv(ContainerRuntime r, const std::string& image);
// The store's containers, one per line: "<name>\t<state>".
std::vector<std::string> ListArgv(ContainerRuntime r, const std::string& store_id);
std::vector<std::string> RemoveArgv(ContainerRuntime r, const std::vector<std::string>& names);

}  // namespace drover::container
