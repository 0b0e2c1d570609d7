#pragma once
// What drover asks of a container runtime besides running attempts (docs/containers.md):
// pinning an image to its id at submit (pulling it when it is not here), the store's containers
// (to leave none behind), and whether the GPUs have CDI names. Runs the runtime's commands.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/gpu.h"
#include "model/spec.h"

namespace drover::container {

// Pins `c` to the image it names: image_id (and digest) from the runtime's image store. An
// image that is not there is pulled first (a registry reference; `progress` gets each line the
// pull prints), except a localhost/ one, which cannot be pulled: NotFound saying how to make
// it. A spec already pinned (a retry, `drover reproduce`) keeps its id, which must be there.
// Pyxis images are imported on the nodes by enroot: nothing to resolve here.
// `pull` false (a dry run): a missing registry image is NotFound too, saying the submit pulls it.
Status PinImage(ContainerSpec* c, const std::function<void(std::string_view)>& progress = {},
                bool pull = true);

// Parses InspectArgv's line: "<id>|<digest>|<repo digests>" -> image_id "sha256:<hex>", digest.
Status ParseInspect(std::string_view line, ContainerSpec* c);

// The store's containers the runtime lists (ListArgv): name and state ("running", "exited").
struct Listed {
  std::string name;
  std::string state;
};
Result<std::vector<Listed>> ListContainers(ContainerRuntime r, const std::string& store_id);
std::vector<Listed> ParseList(std::string_view text);
// Removes (stopping first) the named containers; errors are logged, not returned.
void RemoveContainers(ContainerRuntime r, const std::vector<std::string>& names);

// The file in a store's folder that says no container was ever started for the store: a new
// store gets it (cli OpenStore), and the first container of the store (a run's, or the
// environment's package listing) removes it before it is created. A store that has it is not
// looked at for containers no run owns after a restart (ContainerLauncher::EndRecovery), so a
// store that never ran one costs no `podman ps` at each start; one without it (a store of an
// older drover, or one that ran containers) is listed as before.
std::string NoContainersMarkerPath(const std::string& store_dir);
// Writes it, for a store just created (a failure is logged: the store is then listed).
void MarkNoContainers(const std::string& store_dir);
// Before the first container of this process for the store (once per path): when the marker is
// there, containers that carry the store's label are an earlier store's at the same path (one
// deleted while a container ran, say: a new store's first run would collide with its name), so
// they are removed first (with runtime `r`; none for pyxis), then the marker. False when the
// marker is there and cannot be removed: the container is not started then.
bool MarkContainersStarting(const std::string& marker_path, ContainerRuntime r,
                            const std::string& store_id);

// Whether the runtime's program is on PATH.
bool Installed(ContainerRuntime r);

// The Container Device Interface specs in `dirs` (default /etc/cdi and /var/run/cdi): whether
// each of `gpus` has a device of kind nvidia.com/gpu named by its UUID (or index). Failed
// precondition naming the GPUs without one and what to run (nvidia-ctk cdi generate).
inline const std::vector<std::string>& DefaultCdiDirs() {
  static const std::vector<std::string> dirs = {"/etc/cdi", "/var/run/cdi"};
  return dirs;
}
Status CheckCdi(const std::vector<GpuDevice>& gpus,
                const std::vector<std::string>& dirs = DefaultCdiDirs());
// The device names of kind nvidia.com/gpu in one CDI spec's text (YAML or JSON).
Result<std::vector<std::string>> CdiGpuNames(const std::string& text);

}  // namespace drover::container
