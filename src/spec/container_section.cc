#include "spec/container_section.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/strings.h"

namespace drover {

using yaml::Describe;
using yaml::Field;
using yaml::Find;

const std::vector<std::string>& ContainerKeys() {
  static const std::vector<std::string> keys = {"image", "runtime", "mounts", "network"};
  return keys;
}

Status CheckImageReference(const std::string& image) {
  if (image.empty()) {
    return InvalidArgument(
        "container.image is empty; write an image such as localhost/digits:latest");
  }
  if (image.size() > kMaxImageBytes) {
    return InvalidArgument(fmt::format("container.image is {} bytes; at most {} are taken",
                                       image.size(), kMaxImageBytes));
  }
  const bool plain = std::all_of(image.begin(), image.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '/' || c == ':' || c == '@';
  });
  if (!plain || image[0] == '-' || image[0] == '/' || image[0] == ':') {
    return InvalidArgument(fmt::format(
        "container.image '{}' is not an image reference (letters, digits, '.', '_', '-', '/', "
        "':', '@'); write one such as localhost/digits:latest or docker.io/library/python:3.11",
        image.substr(0, 80)));
  }
  return Status::Ok();
}

Status CheckMount(const std::string& mount) {
  const std::string hint = "write HOST:CONTAINER or HOST:CONTAINER:ro, both absolute paths";
  if (mount.size() > kMaxMountBytes) {
    return InvalidArgument(fmt::format("a mount is {} bytes; at most {} are taken", mount.size(),
                                       kMaxMountBytes));
  }
  if (mount.find_first_of(std::string(",\n\0", 3)) != std::string::npos) {
    return InvalidArgument(
        fmt::format("mount '{}' holds a ',', a newline or a NUL; {}", mount.substr(0, 80), hint));
  }
  std::vector<std::string> parts = Split(mount, ':');
  if (parts.size() < 2 || parts.size() > 3) {
    return InvalidArgument(fmt::format("mount '{}' is not HOST:CONTAINER; {}", mount.substr(0, 80),
                                       hint));
  }
  for (int i = 0; i < 2; ++i) {
    if (parts[i].empty() || parts[i][0] != '/') {
      return InvalidArgument(fmt::format("mount '{}': '{}' is not an absolute path; {}",
                                         mount.substr(0, 80), parts[i].substr(0, 80), hint));
    }
  }
  if (parts.size() == 3 && parts[2] != "ro" && parts[2] != "rw") {
    return InvalidArgument(fmt::format("mount '{}': options '{}' are not ro or rw; {}",
                                       mount.substr(0, 80), parts[2].substr(0, 40), hint));
  }
  return Status::Ok();
}

Status ParseContainerSection(const yaml::Reader& r, const Field& f, ContainerSpec* out) {
  yaml::MapRules rules;
  rules.valid = &ContainerKeys();
  rules.example = "container: {image: localhost/digits:latest}";
  DROVER_ASSIGN_OR_RETURN(std::vector<Field> fields, r.ReadMap(f.at(), f.value, f.path, rules));
  const Field* image = Find(fields, "image");
  if (!image) {
    return r.Err(f.at(), fmt::format("{} has no image; write e.g. {}",
                                     f.path.empty() ? "container" : f.path, rules.example));
  }
  DROVER_ASSIGN_OR_RETURN(out->image, r.Text(*image, "write an image such as localhost/digits:latest"));
  if (Status st = CheckImageReference(out->image); !st.ok()) return r.Err(image->at(), st.message());
  if (const Field* rt = Find(fields, "runtime")) {
    DROVER_ASSIGN_OR_RETURN(std::string runtime, r.Choice(*rt, {"podman", "docker", "pyxis"}));
    out->runtime_given = true;
    out->runtime = runtime == "docker"  ? ContainerRuntime::kDocker
                   : runtime == "pyxis" ? ContainerRuntime::kPyxis
                                        : ContainerRuntime::kPodman;
  }
  if (const Field* m = Find(fields, "mounts")) {
    if (!m->value.IsSequence()) {
      return r.Err(m->at(), fmt::format("{} must be a list of mounts, got {}; write e.g. "
                                        "mounts: [/data/imagenet:/data:ro]",
                                        m->path, Describe(m->value)));
    }
    if (m->value.size() > kMaxMounts) {
      return r.Err(m->at(), fmt::format("{} has {} mounts; at most {} are taken", m->path,
                                        m->value.size(), kMaxMounts));
    }
    for (const YAML::Node& n : m->value) {
      if (!n.IsScalar()) {
        return r.Err(n, fmt::format("each of {} must be one mount as text, got {}", m->path,
                                    Describe(n)));
      }
      if (Status st = CheckMount(n.Scalar()); !st.ok()) return r.Err(n, st.message());
      out->mounts.push_back(n.Scalar());
    }
  }
  if (const Field* n = Find(fields, "network")) {
    yaml::Scalar s = yaml::Resolve(n->value);
    if (s.kind != yaml::ScalarKind::kBool) {
      return r.Err(n->at(), fmt::format("{} must be true or false, got {}; write true to let the "
                                        "run reach the network",
                                        n->path, Describe(n->value)));
    }
    out->network = s.b;
  }
  return Status::Ok();
}

}  // namespace drover
