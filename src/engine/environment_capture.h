#pragma once
// Records each experiment's environment (the interpreter's package list, the GPUs and driver)
// off the engine's loop. Listing packages runs the user's interpreter, which may hang (a wedged
// network import, a broken site-packages): on its own thread, with a timeout, it costs that
// run's record a line ("timed out") and nothing else; the runs start meanwhile and the loop
// keeps answering.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/users.h"
#include "common/worker.h"
#include "model/run.h"
#include "spec/yaml_fields.h"

namespace drover {

// The daemon config file's `environment:` section (config/daemon_config.h reads the file):
//
//   environment:
//     package_list_timeout: 30s   # the interpreter's package listing is killed after this
struct EnvironmentConfig {
  // The package listing runs the user's interpreter off the loop; past this it is killed and
  // recorded as timed out (the runs start meanwhile either way).
  Millis package_list_timeout_ms = 30'000;
};
const std::vector<std::string>& EnvironmentKeys();
Status ParseEnvironmentSection(const yaml::Reader& r, const yaml::Field& f, EnvironmentConfig* out);

struct EnvironmentRequest {
  int64_t experiment_id = 0;
  std::vector<std::string> interpreters;  // "" = not a Python run: no package list
  std::string workdir;                    // where the interpreter is started
  std::string hostname;
  // Set: the runs are in this (pinned) image, and its interpreter is listed inside it, once per
  // image and interpreter however many experiments use it.
  std::optional<ContainerSpec> container;
  std::string store_id;  // StoreId(): the listing container's name and label
  std::string containers_marker;  // NoContainersMarkerPath(): removed before the listing container
  // Set (a root daemon's experiment of another user): the listing runs as them, with their
  // login's environment (it runs their interpreter, from their folder).
  std::optional<UnixUser> as;
};

class EnvironmentCapture {
 public:
  // `describe_gpus` is called once, on the capture thread, the first time it is needed.
  EnvironmentCapture(std::function<std::string()> describe_gpus, Millis package_list_timeout_ms);
  EnvironmentCapture(const EnvironmentCapture&) = delete;
  EnvironmentCapture& operator=(const EnvironmentCapture&) = delete;

  void Start(EnvironmentRequest request) { worker_.Start(std::move(request)); }
  // The environments captured since the last call (any thread; the engine's loop).
  std::vector<Environment> TakeFinished();
  // Whether a request is queued or being captured.
  bool Busy() const { return worker_.Busy(); }
  // Blocks until every started request is captured.
  void WaitIdle() { worker_.WaitIdle(); }
  // At most `ms` for the queue, then only the request in progress (a shutdown).
  void WaitIdleFor(int64_t ms) { worker_.WaitIdleFor(ms); }

 private:
  std::vector<Environment> CaptureAll(const EnvironmentRequest& r,
                                      const std::function<bool()>& stopping);
  Environment Capture(const EnvironmentRequest& r, const std::string& interpreter,
                      const std::function<bool()>& stopping);

  std::function<std::string()> describe_gpus_;
  Millis timeout_ms_;
  bool described_ = false;  // the capture thread's own
  std::string gpu_info_;
  std::map<std::string, std::string> image_packages_;  // "<image id> <interpreter>" -> list
  // Last: it is stopped (the listing in progress killed at once: RunAndCapture's `stop`) before
  // what it uses goes.
  Worker<EnvironmentRequest, std::vector<Environment>> worker_;
};

}  // namespace drover
