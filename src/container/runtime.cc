#include "container/runtime.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>
#include <mutex>

#include "common/files.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "container/command.h"

namespace drover::container {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kQueryTimeoutMs = 60'000;
constexpr int64_t kPullTimeoutMs = 60LL * 60 * 1000;
constexpr size_t kMaxCdiFiles = 64;
constexpr int64_t kMaxCdiBytes = 4 * 1024 * 1024;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

bool OnPath(const std::string& program) {
  const char* path = getenv("PATH");
  for (const std::string& dir : Split(path ? path : "/usr/bin:/bin", ':')) {
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

bool Installed(ContainerRuntime r) { return OnPath(RuntimeProgram(r)); }

Status ParseInspect(std::string_view line, ContainerSpec* c) {
  std::vector<std::string> parts = Split(Trim(std::string(line)), '|');
  if (parts.size() < 2 || parts[0].empty()) {
    return Status(Code::kInternal,
                  fmt::format("unexpected image inspect output '{}'", line.substr(0, 200)));
  }
  std::string id = parts[0];
  if (id.rfind("sha256:", 0) != 0) id = "sha256:" + id;
  if (id.size() != 7 + 64 || id.find_first_not_of("0123456789abcdef", 7) != std::string::npos) {
    return Status(Code::kInternal, fmt::format("unexpected image id '{}'", id.substr(0, 100)));
  }
  c->image_id = id;
  c->digest = parts[1].rfind("sha256:", 0) == 0 ? parts[1] : "";
  if (c->digest.empty() && parts.size() > 2) {
    // Docker has no .Digest: the first repo digest's ("name@sha256:...").
    const size_t at = parts[2].find("@sha256:");
    if (at != std::string::npos) {
      const size_t end = parts[2].find('"', at);
      c->digest = parts[2].substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    }
  }
  return Status::Ok();
}

Status PinImage(ContainerSpec* c, const std::function<void(std::string_view)>& progress,
                bool pull) {
  if (c->runtime == ContainerRuntime::kPyxis) return Status::Ok();
  // No runtime written: podman, or docker where only docker is here.
  if (!c->runtime_given && c->runtime == ContainerRuntime::kPodman &&
      !Installed(ContainerRuntime::kPodman) && Installed(ContainerRuntime::kDocker)) {
    c->runtime = ContainerRuntime::kDocker;
  }
  c->runtime_given = true;
  const std::string program = RuntimeProgram(c->runtime);
  if (!Installed(c->runtime)) {
    return Status(Code::kFailedPrecondition,
                  fmt::format("container.runtime is {} but {} is not installed on this machine "
                              "(not on PATH); install it (apt-get install {}) or write the "
                              "runtime that is",
                              program, program, program == "docker" ? "docker.io" : "podman"));
  }
  CaptureOptions o;
  o.timeout_ms = kQueryTimeoutMs;
  o.max_output_bytes = 1 << 20;
  const std::string wanted = c->image_id.empty() ? c->image : c->image_id;
  auto inspect = [&]() -> Result<Captured> {
    return RunAndCapture(InspectArgv(c->runtime, wanted), o);
  };
  DROVER_ASSIGN_OR_RETURN(Captured got, inspect());
  if (got.exit_code != 0 && !c->image_id.empty()) {
    return Status(Code::kNotFound,
                  fmt::format("the image {} ({}) this run was recorded with is not in {}'s "
                              "images; pull {}{} or load it, then try again",
                              c->image_id.substr(0, 19), c->image, program, c->image,
                              c->digest.empty() ? "" : "@" + c->digest));
  }
  if (got.exit_code != 0) {
    if (c->image.rfind("localhost/", 0) == 0) {
      return Status(Code::kNotFound,
                    fmt::format("image {} is not in {}'s images and a localhost/ image cannot be "
                                "pulled; build or import it first ({} build -t {} ., or {} "
                                "import ROOTFS.tar {})",
                                c->image, program, program, c->image, program, c->image));
    }
    if (!pull) {
      return Status(Code::kNotFound,
                    fmt::format("image {} is not in {}'s images yet: the submit pulls it",
                                c->image, program));
    }
    spdlog::info("pulling image {} with {}", c->image, program);
    CaptureOptions po;
    po.timeout_ms = kPullTimeoutMs;
    std::string tail;
    po.on_output = [&](std::string_view text) {
      tail += text;
      if (tail.size() > 4096) tail.erase(0, tail.size() - 4096);
      if (progress) progress(text);
      return true;
    };
    // Pull progress and errors are on stderr: both are read.
    Result<Captured> pulled = RunAndCapture(
        {"sh", "-c", "exec \"$0\" pull \"$1\" 2>&1", program, c->image}, po);
    if (!pulled.ok() || pulled->exit_code != 0) {
      std::vector<std::string> lines = Split(Trim(tail), '\n');
      const std::string last = lines.empty() ? "" : lines.back();
      return Status(Code::kNotFound,
                    fmt::format("image {} could not be pulled ({}); check the name and the "
                                "registry's login (`{} pull {}` says more)",
                                c->image,
                                pulled.ok() ? last.substr(0, 300) : pulled.status().message(),
                                program, c->image));
    }
    DROVER_ASSIGN_OR_RETURN(got, inspect());
    if (got.exit_code != 0) {
      return Status(Code::kNotFound,
                    fmt::format("image {} was pulled but {} image inspect does not find it",
                                c->image, program));
    }
  }
  const std::vector<std::string> lines = Split(Trim(got.out), '\n');
  return ParseInspect(lines.empty() ? "" : lines.front(), c);
}

std::vector<Listed> ParseList(std::string_view text) {
  std::vector<Listed> out;
  for (const std::string& line : Split(std::string(text), '\n')) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) continue;
    out.push_back({line.substr(0, tab), Trim(line.substr(tab + 1))});
  }
  return out;
}

Result<std::vector<Listed>> ListContainers(ContainerRuntime r, const std::string& store_id) {
  CaptureOptions o;
  o.timeout_ms = kQueryTimeoutMs;
  o.max_output_bytes = 16 << 20;
  DROVER_ASSIGN_OR_RETURN(Captured got, RunAndCapture(ListArgv(r, store_id), o));
  if (got.exit_code != 0) {
    return Status(Code::kUnavailable,
                  fmt::format("{} ps exited with {}", RuntimeProgram(r), got.exit_code));
  }
  return ParseList(got.out);
}

std::string NoContainersMarkerPath(const std::string& store_dir) {
  return store_dir + "/containers-none";
}

void MarkNoContainers(const std::string& store_dir) {
  const std::string path = NoContainersMarkerPath(store_dir);
  Status st = WriteFileAtomically(
      path,
      "No container was started for this store yet: drover does not look for containers no run "
      "owns when it starts (docs/containers.md). The first container removes this file.\n");
  if (!st.ok()) spdlog::warn("could not write {}: {}", path, st.message());
}

bool MarkContainersStarting(const std::string& marker_path, ContainerRuntime r,
                            const std::string& store_id) {
  static std::mutex mu;
  static std::set<std::string> done;
  std::lock_guard<std::mutex> lock(mu);
  if (marker_path.empty() || done.count(marker_path)) return true;
  std::error_code ec;
  if (std::filesystem::exists(marker_path, ec) && r != ContainerRuntime::kPyxis && Installed(r) &&
      !store_id.empty()) {
    Result<std::vector<Listed>> listed = ListContainers(r, store_id);
    if (listed.ok() && !listed->empty()) {
      std::vector<std::string> names;
      for (const Listed& l : *listed) names.push_back(l.name);
      spdlog::info("removing {} container(s) with this store's label that it never started ({}): {}",
                   names.size(), RuntimeProgram(r), Join(names, " "));
      RemoveContainers(r, names);
    }
  }
  if (::unlink(marker_path.c_str()) != 0 && errno != ENOENT) {
    spdlog::error("could not remove {}: {}; no container starts until it is removed",
                  marker_path, ErrnoText(errno));
    return false;
  }
  done.insert(marker_path);
  return true;
}

void RemoveContainers(ContainerRuntime r, const std::vector<std::string>& names) {
  if (names.empty()) return;
  CaptureOptions o;
  o.timeout_ms = kQueryTimeoutMs;
  Result<Captured> got = RunAndCapture(RemoveArgv(r, names), o);
  if (!got.ok() || got->exit_code != 0) {
    spdlog::warn("could not remove container(s) {}: {}", Join(names, " "),
                 got.ok() ? fmt::format("exit {}", got->exit_code) : got.status().message());
  }
}

Result<std::vector<std::string>> CdiGpuNames(const std::string& text) {
  std::vector<std::string> out;
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsMap() || !root["kind"] || root["kind"].as<std::string>("") != "nvidia.com/gpu") {
      return out;
    }
    YAML::Node devices = root["devices"];
    if (!devices || !devices.IsSequence()) return out;
    for (const YAML::Node& d : devices) {
      if (d.IsMap() && d["name"] && d["name"].IsScalar()) out.push_back(d["name"].Scalar());
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("not a CDI spec: {}", e.what()));
  }
  return out;
}

Status CheckCdi(const std::vector<GpuDevice>& gpus, const std::vector<std::string>& dirs) {
  if (gpus.empty()) return Status::Ok();
  std::set<std::string> names;
  size_t files = 0;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string ext = it->path().extension().string();
      if (ext != ".yaml" && ext != ".yml" && ext != ".json") continue;
      if (++files > kMaxCdiFiles) break;
      Result<std::string> text = ReadBoundedFile(it->path().string(), kMaxCdiBytes, "CDI spec", "");
      if (!text.ok()) continue;
      Result<std::vector<std::string>> got = CdiGpuNames(*text);
      if (!got.ok()) {
        spdlog::warn("{}: {}", it->path().string(), got.status().message());
        continue;
      }
      names.insert(got->begin(), got->end());
    }
  }
  std::vector<std::string> missing;
  for (const GpuDevice& g : gpus) {
    if (!names.count(g.uuid) && !names.count(std::to_string(g.index))) {
      missing.push_back(fmt::format("GPU {} ({})", g.index, g.uuid));
    }
  }
  if (missing.empty()) return Status::Ok();
  return Status(Code::kFailedPrecondition,
                fmt::format("the CDI specs in {} name no nvidia.com/gpu device for {}; containers "
                            "get GPUs by their CDI names: run `nvidia-ctk cdi generate "
                            "--output=/etc/cdi/nvidia.yaml` (again after a driver update)",
                            Join(dirs, " and "), Join(missing, ", ")));
}

}  // namespace drover::container
