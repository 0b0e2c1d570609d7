#pragma once
// `container:` in a spec (docs/containers.md): each attempt runs in its own container of an
// image, with the given runtime, extra mounts and (only when asked) a network.
//
//   container:
//     image: localhost/digits:latest   # or a registry reference; pinned to its id at submit
//     runtime: podman                  # podman (default) | docker | pyxis (Slurm only)
//     mounts: [/data/imagenet:/data:ro]
//     network: false                   # default: no network inside the run
#include <string>
#include <vector>

#include "common/status.h"
#include "model/spec.h"
#include "spec/yaml_fields.h"

namespace drover {

const std::vector<std::string>& ContainerKeys();
Status ParseContainerSection(const yaml::Reader& r, const yaml::Field& f, ContainerSpec* out);

// Whether `image` is a reference a runtime takes (registry/name:tag, name@sha256:..., an image
// id), with nothing a command line would read as a flag. InvalidArgument saying what to write.
Status CheckImageReference(const std::string& image);
// One mount "HOST:CONTAINER" or "HOST:CONTAINER:ro|rw", both absolute, no ',' (the runtime's
// own separator). InvalidArgument saying what to write.
Status CheckMount(const std::string& mount);

inline constexpr size_t kMaxImageBytes = 512;
inline constexpr size_t kMaxMounts = 64;
inline constexpr size_t kMaxMountBytes = 4096;

}  // namespace drover
